"""The ``job`` kind: background processes that outlive a timeout and the runtime."""

from ._job import Job as Job
from ._job import JobState as JobState
from ._job import executor_from as executor_from
from ._machine_event import fence as fence
from ._machine_event import machine_event_text as machine_event_text
from ._output import read_output as read_output

__all__ = ["Job", "JobState", "executor_from", "fence", "machine_event_text", "read_output"]
