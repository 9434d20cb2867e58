"""The commits and the crashes of an `ActorCell`: what a step leaves, made durable.

A step's commit is prepared (its effects, the snapshot if it changed, the
bookkeeping a crash left to record), written, and only then heard of:
events published, sends routed, the cursor advanced. A crash is recorded
the same way, and the kind's supervision says what follows: a restart
after backoff, a dead letter, the actor failed, or an escalation. Kept
apart from the cell's life and mailbox loop (``_cell``), which call these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from .._retry import RestartWindow
from ..actors import Actor, Effects
from ..codec import converter, dumps, kept_copy, loads
from ..errors import CrashReason, Escalation, StateError, StoreUnavailable, UnknownOutcome
from ..mailbox import Event, Message
from ..store import Commit, CommitResult, NewEvent
from ._commits import build_commit
from ._crashes import Verdict, crash_verdict, died_handling
from ._states import CellState

if TYPE_CHECKING:
    from ._services import CellServices

__all__ = ["CellCommits"]


class CellCommits:
    """The part of `ActorCell` that commits its steps and records its crashes."""

    if not TYPE_CHECKING:
        __slots__ = ()  # its fields are ActorCell's slots

    if TYPE_CHECKING:
        address: str
        kind: type[Actor]
        state: CellState
        effects: Effects
        restarts: int
        final_status: str | None
        commit_failure: str | None
        _svc: CellServices
        _actor: Actor | None
        _cursor: int
        _last_state: bytes | None
        _last_error: bytes | None
        _last_error_seq: int | None
        _current: Message | None
        _pending_dead_letter: tuple[int, bytes] | None
        _pending_attempts: tuple[int, int, int] | None
        _uncounted: tuple[int, int] | None
        _restart_window: RestartWindow | None

        def wall_time(self) -> float: ...

    # -- commits --------------------------------------------------------------

    def _lifecycle(self, type: str, data: dict[str, Any]) -> None:
        self.effects.events.append(NewEvent(type, dumps(data), self.wall_time()))

    def _snapshot(self) -> bytes:
        assert self._actor is not None
        try:
            return dumps(converter.unstructure(self._actor.state))
        except TypeError as exc:
            raise StateError(
                f"the state of {self.address!r} does not serialize to JSON: {exc}"
            ) from None

    async def _commit(self, *, cursor: int | None = None, **lifecycle: Any) -> CommitResult:
        bookkeeping = bool(lifecycle)  # a crash's record, not a step of the actor
        commit, state = self._prepare_commit(cursor, lifecycle)
        return await self._commit_prepared(commit, state, bookkeeping)

    async def _commit_prepared(
        self, commit: Commit, state: bytes | None, bookkeeping: bool
    ) -> CommitResult:
        try:
            result = await self._svc.store.commit(commit)
        except (StoreUnavailable, UnknownOutcome) as exc:
            # Until a commit goes through, inspect tells that this actor is stuck.
            self.commit_failure = str(exc)
            raise
        self._committed(commit, result, state, bookkeeping)
        return result

    def _prepare_commit(
        self, cursor: int | None, lifecycle: dict[str, Any]
    ) -> tuple[Commit, bytes | None]:
        """The commit of what the actor did since the last (and the snapshot in it)."""
        effects, self.effects = self.effects, Effects()
        state: bytes | None = None
        busy: bool | None = None
        if self._actor is not None and not lifecycle:
            snapshot = self._snapshot()
            state = snapshot if snapshot != self._last_state else None
            busy = self._actor.is_busy()
        if self._pending_dead_letter is not None:
            lifecycle["dead_letter"], self._pending_dead_letter = self._pending_dead_letter, None
        if self._pending_attempts is not None:
            # Kept until a commit takes it: a crash's count must not be lost.
            lifecycle["attempts"] = self._pending_attempts
        commit = build_commit(
            self.address, self.kind.state_version, effects, state, busy, cursor,
            lifecycle, self.wall_time(),
        )  # fmt: skip
        return commit, state

    def _committed(
        self, commit: Commit, result: CommitResult, state: bytes | None, bookkeeping: bool
    ) -> None:
        """``commit`` is durable: only now may anyone hear of it."""
        if not bookkeeping:
            self.commit_failure = None
        if commit.attempts is not None:
            self._pending_attempts = None
        self._svc.counted("commits")
        if commit.dead_letter is not None:
            self._svc.counted("dead_letters")
        if state is not None:
            # Of its exact size: orjson's buffer is 4 KB or more whatever it
            # holds, and every active actor keeps its last snapshot.
            self._last_state = kept_copy(state)
        cursor = commit.cursor
        if cursor is not None:
            self._cursor = max(self._cursor, cursor)
            self._svc.cursor_advanced(self.address, cursor)
        if result.events:
            # Events are stored either way; with no subscriber, no one reads
            # the live copy, so it is not built, unless its type is tapped.
            listening, tapped = self._svc.listening(self.address), self._svc.tapped
            if listening or tapped:
                for seq, event in result.events:
                    if listening or event.type in tapped:
                        data = loads(event.data)
                        self._svc.publish(Event(self.address, seq, event.type, data, event.at))
        if commit.sends:
            self._svc.route(commit.sends, result)
        if commit.timers:
            self._svc.timers_changed()
        if commit.final:
            self.final_status = commit.status
            self.state = CellState.ENDED

    def _dead_letter(self, message: Message, error: CrashReason) -> None:
        error_json = dumps({**error.to_json(), "seq": message.seq})
        self._lifecycle(
            "message.dead_lettered",
            {"seq": message.seq, "type": message.type, "error": error.summary()},
        )
        self._pending_dead_letter = (message.seq, error_json)

    def _died_handling(self, message: Message) -> CrashReason:
        return died_handling(message, self.address, self._last_error, self._last_error_seq)

    # -- crashes ----------------------------------------------------------------

    async def _crashed(self, exc: BaseException) -> bool:
        """Record a crash; True to restart, False when the actor ends here."""
        policy = self.kind.supervision
        reason = CrashReason.from_exception(exc)
        failed_seq = self._current.seq if self._current is not None else None
        self._current = None
        if self._uncounted is not None:
            # Counted in whichever commit records the crash, before a dead letter.
            self._pending_attempts = (*self._uncounted, 1)
            self._uncounted = None
        self.effects = Effects()  # what the failed attempt did is not committed
        self._actor = None
        error_json = dumps({**reason.to_json(), "seq": failed_seq})
        if self._restart_window is None:
            self._restart_window = RestartWindow(policy.intensity, policy.period)
        exceeded = self._restart_window.record(trio.current_time())
        verdict = crash_verdict(policy, exc, exceeded, failed_seq, self._cursor)
        if verdict is Verdict.ESCALATE:
            await self._fail(reason, error_json)
            raise Escalation(
                f"{self.address} restarted more than {policy.intensity} times in "
                f"{policy.period}s; escalating: {reason.summary()}",
                reason,
            ) from exc
        if verdict is Verdict.DEAD_LETTER:
            message = next(iter(await self._svc.store.pending(self.address, self._cursor, 1)), None)
            if message is not None:
                self._restart_window.reset()
                self._dead_letter(Message.from_record(message), reason)
                await self._commit_lifecycle(cursor=failed_seq, last_error=error_json)
                return True
        if verdict is not Verdict.RESTART:
            await self._fail(reason, error_json)
            return False
        self.restarts += 1
        self._svc.counted("restarts")
        delay = policy.backoff(self.restarts)
        self._lifecycle("actor.crashed", {"error": reason.summary(), "restart_in": delay})
        await self._commit_lifecycle(restarts=1, last_error=error_json)
        await trio.sleep(delay)
        return True

    async def _fail(self, reason: CrashReason, error_json: bytes) -> None:
        self._lifecycle("actor.failed", {"error": reason.summary()})
        await self._commit_lifecycle(status="failed", final=True, last_error=error_json)

    async def _commit_lifecycle(self, *, cursor: int | None = None, **fields: Any) -> None:
        await self._commit(cursor=cursor, **fields)
