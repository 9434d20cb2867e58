"""Supervised groups of your own trio tasks, in OTP's terms.

Actors need none of this: the runtime supervises every actor ``one_for_one``
by its kind's `Supervision`. `supervise` is for the plain trio tasks an
application runs beside them. It runs children (async callables) and
restarts them by strategy:

- ``one_for_one``: only the child that ended is restarted;
- ``one_for_all``: every other child is stopped (right to left) and all are
  started again (left to right);
- ``rest_for_one``: the children started after it are stopped and restarted
  with it.

Restart types say when: ``permanent`` always, ``transient`` only after a
crash, ``temporary`` never. More than ``intensity`` restarts within
``period`` seconds means the failure is not transient: every child is
stopped and `Escalation` is raised to the parent (a supervisor is itself a
valid child, so trees nest). ``backoff=Backoff(...)`` spaces restarts out by
the same capped, jittered rule as an actor's restarts. Time is trio's clock,
so tests run under ``autojump_clock`` without sleeping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs
import trio

from .._retry import Backoff, RestartWindow
from ..actors import Restart
from ..errors import CrashReason, Escalation

__all__ = ["ChildSpec", "Strategy", "supervise"]

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]


@attrs.frozen
class ChildSpec:
    """One child of a supervised group.

    ``start(*args)`` runs the child; returning is a normal exit, raising is
    a crash. ``shutdown`` bounds how long a stopped child may spend in its
    (shielded) cleanup before the supervisor stops waiting for it.
    """

    id: str
    start: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    restart: Restart = "permanent"
    shutdown: float = 5.0


@attrs.define
class _Running:
    spec: ChildSpec
    scope: trio.CancelScope
    done: trio.Event
    generation: int


class _Group:
    def __init__(
        self,
        children: Sequence[ChildSpec],
        strategy: Strategy,
        window: RestartWindow,
        backoff: Backoff | Callable[[int], float] | None,
    ) -> None:
        ids = [c.id for c in children]
        if len(set(ids)) != len(ids):
            raise ValueError(f"child ids must be unique, got {ids}")
        self.order = list(children)
        self.strategy = strategy
        self.window = window
        self.backoff = backoff
        self.running: dict[str, _Running] = {}
        self.restart_count = 0
        self.generation = 0
        self.send, self.receive = trio.open_memory_channel[tuple[str, int, BaseException | None]](
            len(children) * 2 + 8
        )

    async def start(self, nursery: trio.Nursery, spec: ChildSpec) -> None:
        self.generation += 1
        running = _Running(spec, trio.CancelScope(), trio.Event(), self.generation)
        self.running[spec.id] = running
        # nursery.start, not start_soon: children begin strictly left to right.
        await nursery.start(self._run, running, name=f"child {spec.id}")

    async def _run(self, running: _Running, task_status: trio.TaskStatus[None]) -> None:
        outcome: BaseException | None = None
        task_status.started()
        with running.scope:
            try:
                await running.spec.start(*running.spec.args)
            except Exception as exc:
                outcome = exc
        running.done.set()
        if not running.scope.cancelled_caught:
            self.send.send_nowait((running.spec.id, running.generation, outcome))

    async def stop(self, ids: Sequence[str]) -> None:
        # Right to left, as OTP stops children.
        for child_id in reversed(ids):
            running = self.running.pop(child_id, None)
            if running is None:
                continue
            running.scope.cancel()
            with trio.move_on_after(running.spec.shutdown, shield=True):
                await running.done.wait()


async def supervise(
    children: Sequence[ChildSpec],
    *,
    strategy: Strategy = "one_for_one",
    intensity: int = 1,
    period: float = 5.0,
    backoff: Backoff | Callable[[int], float] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``children`` under ``strategy`` until none is left to run.

    Returns when every child has ended for good (temporary ones, transient
    ones that returned); raises `Escalation` when restarts exceed
    ``intensity`` within ``period`` seconds (OTP's defaults: 1 in 5).
    ``backoff`` spaces restart number ``n`` out: a `Backoff` by its rule, or
    any callable ``backoff(n)`` returning the delay in seconds.
    """
    group = _Group(children, strategy, RestartWindow(intensity, period), backoff)
    async with trio.open_nursery() as nursery:
        for spec in group.order:
            await group.start(nursery, spec)
        task_status.started()
        while group.running:
            child_id, generation, outcome = await group.receive.receive()
            running = group.running.get(child_id)
            if running is None or running.generation != generation:
                continue
            del group.running[child_id]
            spec = running.spec
            wanted = spec.restart == "permanent" or (
                spec.restart == "transient" and outcome is not None
            )
            if not wanted:
                continue
            if group.window.record(trio.current_time()):
                await group.stop([c.id for c in group.order])
                reason = CrashReason.from_exception(outcome) if outcome is not None else None
                what = reason.summary() if reason else "it kept exiting"
                raise Escalation(
                    f"child {child_id!r} restarted more than {intensity} times in {period}s "
                    f"({strategy}); giving up: {what}",
                    reason,
                ) from outcome
            group.restart_count += 1
            if isinstance(backoff, Backoff):
                await trio.sleep(backoff.delay(group.restart_count))
            elif backoff is not None:
                await trio.sleep(backoff(group.restart_count))
            index = next(i for i, c in enumerate(group.order) if c.id == child_id)
            if strategy == "one_for_one":
                again = [spec]
            elif strategy == "one_for_all":
                again = list(group.order)
            else:
                again = group.order[index:]
            # Siblings stopped on its account come back too, except temporary
            # ones (never restarted) and ones that had already ended for good.
            siblings = [c for c in again if c.id != child_id and c.id in group.running]
            await group.stop([c.id for c in siblings])
            for restart in again:
                if restart.id == child_id or (
                    restart in siblings and restart.restart != "temporary"
                ):
                    await group.start(nursery, restart)
