"""What an owner of background jobs (a session or task) does with them, outside its handlers.

Kept apart from ``_session`` so the session reads as its queue and turns:
recording a job's end and queueing its machine event, handing waiting
machine events to the next model call, and adopting the jobs a crash left
unrecorded. Each function changes the owner's state in place; the change is
committed with the owner's next commit.
"""

from __future__ import annotations

from typing import Any

import trio

from ..actors import Context
from ..jobs import executor_from
from ..tools import Confinement, owner_dir
from ._confinement import jobs_dir
from ._job_tools import JobRecord, JobTools, describe_status, find_orphans, record_finished
from ._journal import TurnJournal
from ._turn import ConversationLog

__all__ = [
    "adopt_orphans",
    "job_tools_for",
    "record_job_end",
    "stop_jobs_of_ending_owner",
    "take_machine_events",
]


def job_tools_for(
    ctx: Context,
    jobs: dict[str, JobRecord],
    *,
    background_on_timeout: bool,
    executor: dict[str, Any] | None = None,
) -> JobTools:
    """The job tools of the owner at ``ctx``, its files under the host's `jobs_dir`
    (on the executor's machine), its commands run by ``executor`` (``_executor_spec``),
    confined as the host's settings say (`Confinement`), never as the spec says."""
    return JobTools(
        ctx,
        jobs,
        jobs_dir(ctx.settings),
        background_on_timeout=background_on_timeout,
        executor=executor_from(executor, confinement=Confinement.from_settings(ctx.settings)),
        executor_description=executor,
    )


def stop_jobs_of_ending_owner(ctx: Context, jobs: dict[str, JobRecord]) -> None:
    """The owner is ending (a stopped session, a settled task): stop its running jobs.

    Sent in the owner's last commit. ``owner_ending`` tells each job that no
    one will read its end, so it sends no ``job.finished`` to an owner that
    takes no more messages (which would only fill the dead letters).
    """
    for job_id, record in jobs.items():
        # Also those the owner stopped itself (job_stop kills the group without
        # telling the job actor): their ends must not come here either.
        if record.status == "running":
            record.stop_requested = True
            # A job that ended before this commit takes no more messages: its
            # end, on its way here, is all there was to stop.
            ctx.send(
                f"job/{job_id}", "stop", {"owner_ending": True},
                key=f"owner-ending:{job_id}", drop_if_stopped=True,
            )  # fmt: skip


def record_job_end(
    ctx: Context,
    jobs: dict[str, JobRecord],
    machine_events: list[str],
    *,
    busy: bool,
    sender: str | None,
    body: dict[str, Any],
) -> str | None:
    """Record a ``job.finished`` and queue its machine event; or say why it is refused.

    A job the model stopped itself (``job_stop``) queues nothing: its end is
    no news. Emits ``job.ended`` with where the event goes (``running turn``,
    ``new turn``, or None).
    """
    job_id = body.get("job_id")
    if not isinstance(job_id, str) or job_id not in jobs or sender not in (None, f"job/{job_id}"):
        return f"job {job_id!r} is not a job of {ctx.address}"
    record = record_finished(jobs, job_id, body)
    text = body.get("text")
    delivery: str | None = None
    if not record.stop_requested and isinstance(text, str):
        machine_events.append(text)
        delivery = "running turn" if busy else "new turn"
    status = describe_status(record)
    ctx.emit("job.ended", {"job_id": job_id, "status": status, "delivery": delivery})
    return None


def take_machine_events(
    ctx: Context, machine_events: list[str], turn: TurnJournal | None, chat: ConversationLog
) -> list[dict[str, Any]]:
    """Move the waiting machine events into ``turn``'s conversation as one user message.

    The owner's ``before_model_call`` hook (`drive_turn`): returns the items
    it appended, which the next model call reads.
    """
    if turn is None or not machine_events:
        return []
    items = [{"role": "user", "content": "\n\n".join(machine_events)}]
    count = len(machine_events)
    machine_events.clear()
    chat.append(ctx, items)
    ctx.emit("machine_event.delivered", {"turn_id": turn.turn_id, "prompt_id": turn.prompt_id,
                                         "count": count})  # fmt: skip
    return items


async def adopt_orphans(ctx: Context, tools: JobTools) -> None:
    """Watch the jobs a crash left running unrecorded (their ``shell_run`` was cut off)."""
    directory = owner_dir(tools.jobs_root, ctx.address)
    orphans = await trio.to_thread.run_sync(find_orphans, directory, set(tools.jobs))
    for job in orphans:
        tools.adopt(job)
        ctx.emit("job.adopted", {"job_id": job.job_id, "command": job.command})
