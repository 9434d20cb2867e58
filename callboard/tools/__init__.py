"""The agent's tools: files confined to a workspace, the tool registry and the approval policy.

The shell tools (``shell_run``, ``job_output``, ``job_list``, ``job_stop``) are
re-exported here too once they land; the model sees every tool through
``tool_schemas`` and ``parse_arguments``.
"""

from ._files import MAX_EDIT_BYTES as MAX_EDIT_BYTES
from ._files import MAX_LIST_ENTRIES as MAX_LIST_ENTRIES
from ._files import MAX_READ_BYTES as MAX_READ_BYTES
from ._files import edit_file as edit_file
from ._files import list_dir as list_dir
from ._files import read_file as read_file
from ._files import write_file as write_file
from ._policy import APPROVALS as APPROVALS
from ._policy import DEFAULT_APPROVAL_POLICY as DEFAULT_APPROVAL_POLICY
from ._policy import Approval as Approval
from ._policy import ApprovalPolicy as ApprovalPolicy
from ._registry import FILE_TOOL_NAMES as FILE_TOOL_NAMES
from ._registry import TOOL_NAMES as TOOL_NAMES
from ._registry import parse_arguments as parse_arguments
from ._registry import run_file_tool as run_file_tool
from ._registry import tool_schemas as tool_schemas
from ._workspace import Workspace as Workspace

__all__ = [
    "APPROVALS",
    "DEFAULT_APPROVAL_POLICY",
    "FILE_TOOL_NAMES",
    "MAX_EDIT_BYTES",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "TOOL_NAMES",
    "Approval",
    "ApprovalPolicy",
    "Workspace",
    "edit_file",
    "list_dir",
    "parse_arguments",
    "read_file",
    "run_file_tool",
    "tool_schemas",
    "write_file",
]
