"""Views a caller shares with the server: what `inspect`, `list` and the task
operations take and answer, the same types from an embedded runtime and
over the wire.

- ``_actors``: `ActorInfo`, `ActorView`, `PendingApproval`, `MessageOutcome` (``list``,
  ``inspect``, ``approvals``, ``send`` with ``wait``).
- ``_masking``: `mask_secrets`, secrets out of a spec that ``inspect`` shows.
- ``_job_output``: `OutputPage` (``output``, a job's output read by byte offset).
- ``_modes``: the modes of a prompt (`PromptMode`): queue, steer, interrupt.
- ``_run_spec``: `RunSpec`, how a task is spawned, and the approval words.
- ``_budget_spec``: the budget fields of a session's and a task's spec, and their checks.
- ``_outage_spec``: the checks of the outage fields of a session's and a task's spec.
- ``_tasks``: the task operations (`TaskOperations`) and their outcome types.
- ``task_logic``: what those operations conclude from a snapshot and the
  events, with no I/O.
- ``task_facade``: `TaskFacade`, the operations themselves over a transport's
  ``inspect``, ``send`` and event subscription; `callboard.agent.Tasks` and
  `callboard.client.RemoteTasks` are each a thin adapter over it.

Below the store and the runtime in the layers, so `callboard.client` can
import them without loading either.
"""

from ._actors import ActorInfo as ActorInfo
from ._actors import ActorView as ActorView
from ._actors import MessageOutcome as MessageOutcome
from ._actors import PendingApproval as PendingApproval
from ._budget_spec import BUDGET_POLICIES as BUDGET_POLICIES
from ._budget_spec import LIMIT_NAMES as LIMIT_NAMES
from ._budget_spec import BudgetPolicy as BudgetPolicy
from ._budget_spec import check_budget_policy as check_budget_policy
from ._budget_spec import check_cost_limit as check_cost_limit
from ._budget_spec import check_count_limit as check_count_limit
from ._budget_spec import check_prices as check_prices
from ._budget_spec import check_turn_deadline as check_turn_deadline
from ._budget_spec import prices_problem as prices_problem
from ._job_output import OUTPUT_READ_LIMIT as OUTPUT_READ_LIMIT
from ._job_output import OutputPage as OutputPage
from ._masking import MASK as MASK
from ._masking import mask_secrets as mask_secrets
from ._modes import PROMPT_MODES as PROMPT_MODES
from ._modes import PromptMode as PromptMode
from ._modes import check_mode as check_mode
from ._outage_spec import check_retry_limit as check_retry_limit
from ._outage_spec import check_retry_seconds as check_retry_seconds
from ._run_spec import APPROVALS as APPROVALS
from ._run_spec import DEFAULT_TASK_SYSTEM_PROMPT as DEFAULT_TASK_SYSTEM_PROMPT
from ._run_spec import Approval as Approval
from ._run_spec import RunSpec as RunSpec
from ._run_spec import check_approval_default as check_approval_default
from ._run_spec import check_approval_timeout as check_approval_timeout
from ._run_spec import check_context_window as check_context_window
from ._run_spec import check_keep_turns as check_keep_turns
from ._run_spec import check_key_env as check_key_env
from ._run_spec import check_provider_name as check_provider_name
from ._run_spec import executor_shape_problem as executor_shape_problem
from ._tasks import TASK_KIND as TASK_KIND
from ._tasks import Cancelled as Cancelled
from ._tasks import DeadlineExceeded as DeadlineExceeded
from ._tasks import Failed as Failed
from ._tasks import Settled as Settled
from ._tasks import Succeeded as Succeeded
from ._tasks import TaskOperations as TaskOperations
from ._tasks import TaskRecord as TaskRecord
from ._tasks import Terminal as Terminal
from ._tasks import WaitOutcome as WaitOutcome
from ._tasks import WaitTimedOut as WaitTimedOut
from ._tasks import message_id_for as message_id_for

__all__ = [
    "APPROVALS",
    "BUDGET_POLICIES",
    "DEFAULT_TASK_SYSTEM_PROMPT",
    "LIMIT_NAMES",
    "MASK",
    "OUTPUT_READ_LIMIT",
    "PROMPT_MODES",
    "TASK_KIND",
    "ActorInfo",
    "ActorView",
    "Approval",
    "BudgetPolicy",
    "Cancelled",
    "DeadlineExceeded",
    "Failed",
    "MessageOutcome",
    "OutputPage",
    "PendingApproval",
    "PromptMode",
    "RunSpec",
    "Settled",
    "Succeeded",
    "TaskOperations",
    "TaskRecord",
    "Terminal",
    "WaitOutcome",
    "WaitTimedOut",
    "check_approval_default",
    "check_approval_timeout",
    "check_budget_policy",
    "check_context_window",
    "check_cost_limit",
    "check_count_limit",
    "check_keep_turns",
    "check_key_env",
    "check_mode",
    "check_prices",
    "check_provider_name",
    "check_retry_limit",
    "check_retry_seconds",
    "check_turn_deadline",
    "executor_shape_problem",
    "mask_secrets",
    "message_id_for",
    "prices_problem",
]
