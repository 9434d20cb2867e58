"""The agent's tools: files confined to a workspace, the tool registry and the approval policy.

The shell machinery (``shell_run``, jobs detached with ``setsid`` whose pid,
output and exit status live in files, local and SSH executors) is here too,
with what confines it (``Confinement``: a bubblewrap ``Sandbox``, an
environment without the server's secrets, paths hidden from the file tools);
the model sees every tool through ``tool_schemas`` and ``parse_arguments``.
"""

from ._confinement import Confinement as Confinement
from ._environment import SCRUBBED_NAMES as SCRUBBED_NAMES
from ._environment import SCRUBBED_PREFIXES as SCRUBBED_PREFIXES
from ._environment import command_environment as command_environment
from ._executor import EXIT_WRITE_WAIT as EXIT_WRITE_WAIT
from ._executor import Executor as Executor
from ._executor import LocalExecutor as LocalExecutor
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
from ._procs import is_same_process as is_same_process
from ._procs import process_start_time as process_start_time
from ._procs import signal_group as signal_group
from ._procs import stop_group as stop_group
from ._registry import FILE_TOOL_NAMES as FILE_TOOL_NAMES
from ._registry import TOOL_NAMES as TOOL_NAMES
from ._registry import parse_arguments as parse_arguments
from ._registry import run_file_tool as run_file_tool
from ._registry import tool_schemas as tool_schemas
from ._sandbox import Sandbox as Sandbox
from ._sandbox import probe_sandbox as probe_sandbox
from ._shell import STOP_GRACE as STOP_GRACE
from ._shell import JobHandle as JobHandle
from ._shell import JobOutput as JobOutput
from ._shell import ShellResult as ShellResult
from ._shell import read_job_output as read_job_output
from ._shell import shell_run as shell_run
from ._ssh_executor import SshExecutor as SshExecutor
from ._ssh_options import SSH_OPTIONS as SSH_OPTIONS
from ._workspace import Workspace as Workspace
from ._wrapper import JobFiles as JobFiles
from ._wrapper import build_wrapper as build_wrapper
from ._wrapper import new_job_id as new_job_id
from ._wrapper import owner_dir as owner_dir
from ._wrapper import parse_exit_status as parse_exit_status
from ._wrapper import parse_pid as parse_pid
from ._wrapper import validate_job_id as validate_job_id

__all__ = [
    "APPROVALS",
    "DEFAULT_APPROVAL_POLICY",
    "EXIT_WRITE_WAIT",
    "FILE_TOOL_NAMES",
    "MAX_EDIT_BYTES",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "SCRUBBED_NAMES",
    "SCRUBBED_PREFIXES",
    "SSH_OPTIONS",
    "STOP_GRACE",
    "TOOL_NAMES",
    "Approval",
    "ApprovalPolicy",
    "Confinement",
    "Executor",
    "JobFiles",
    "JobHandle",
    "JobOutput",
    "LocalExecutor",
    "Sandbox",
    "ShellResult",
    "SshExecutor",
    "Workspace",
    "build_wrapper",
    "command_environment",
    "edit_file",
    "is_same_process",
    "list_dir",
    "new_job_id",
    "owner_dir",
    "parse_arguments",
    "parse_exit_status",
    "parse_pid",
    "probe_sandbox",
    "process_start_time",
    "read_file",
    "read_job_output",
    "run_file_tool",
    "shell_run",
    "signal_group",
    "stop_group",
    "tool_schemas",
    "validate_job_id",
    "write_file",
]
