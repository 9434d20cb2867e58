"""`Outbox`: the one bounded queue of frames waiting for a connection's writer.

Three ways in, one way out (one bounded queue and one writer
task per connection, because ``send_message`` must never be cancelled
halfway and can block forever on a client that stopped reading):

- `put` (replies): waits while the queue, less its reserve, is full. That
  wait is the backpressure that stops a connection's reader.
- `put_nowait` (events): never waits; False when the queue, less its
  reserve, is full. The caller then ends the subscription with ``lagged``.
- `put_control_nowait` (``lagged``, errors): may use the reserve; False
  only when the whole queue is full, and then the connection is dropped.

A replay's events go in with `put` too, and `wait_room` comes before each
page of them is read from the store: a replay waits for its client instead
of lagging, and the connection never reads more while its queue is full.

"Full" counts frames and also bytes (big events would otherwise make a
frame count a poor bound on memory); a frame larger than the byte limit
still goes into an empty queue, so nothing is stuck forever.

`close_after` asks the writer to close the websocket once everything queued
so far is written.
"""

from __future__ import annotations

from collections import deque

import attrs
import trio

__all__ = ["Close", "Outbox"]


@attrs.frozen
class Close:
    """What the writer finds after the last frame: close with this code."""

    code: int
    reason: str


class Outbox:
    """At most ``capacity`` frames (``reserve`` of them for control frames only)
    and, for events and replies, at most ``max_bytes`` characters."""

    def __init__(self, capacity: int, *, reserve: int, max_bytes: int) -> None:
        if not 0 <= reserve < capacity:
            raise ValueError(f"reserve must be in [0, {capacity}), got {reserve}")
        self._frames: deque[str] = deque()
        self._capacity = capacity
        self._open_limit = capacity - reserve
        self._max_bytes = max_bytes
        self._bytes = 0
        self._close: Close | None = None
        self._space = trio.lowlevel.ParkingLot()
        # The one task that takes frames (the connection's writer), while it
        # waits for one: woken directly, as a parking lot's bookkeeping for a
        # single waiter was a tenth of the trio work a reply costs.
        self._taker: trio.lowlevel.Task | None = None
        self.peak = 0
        self.peak_bytes = 0

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def closing(self) -> bool:
        return self._close is not None

    def _has_room(self) -> bool:
        frames = len(self._frames)
        return frames == 0 or (frames < self._open_limit and self._bytes < self._max_bytes)

    def _append(self, frame: str) -> None:
        self._frames.append(frame)
        self._bytes += len(frame)
        self.peak = max(self.peak, len(self._frames))
        self.peak_bytes = max(self.peak_bytes, self._bytes)
        if self._taker is not None:  # the writer waits only when the queue was empty
            self._wake_taker()

    async def put(self, frame: str) -> None:
        """Queue a reply, waiting for room. Cancel-atomic: queued or not at all.

        Once the outbox is closing the frame is dropped: the connection is
        ending and nobody will read it. A cancel point always, a schedule
        point only when it waits: every caller's next step (its task ending,
        or the reader's next ``get_message``) yields anyway, and a yield per
        reply was a tenth of the gateway's scheduling work.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._has_room() and self._close is None:
            await self._space.park()
        if self._close is None:
            self._append(frame)

    async def wait_room(self) -> None:
        """Until `put` would not wait: the queue, less its reserve, has room
        (or the outbox is closing). A cancel point always, a schedule point
        only when it waits."""
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._has_room() and self._close is None:
            await self._space.park()

    def put_nowait(self, frame: str) -> bool:
        """Queue an event if there is room outside the reserve."""
        if self._close is not None or not self._has_room():
            return False
        self._append(frame)
        return True

    def put_control_nowait(self, frame: str) -> bool:
        """Queue a control frame, using the reserve if need be."""
        if self._close is not None or len(self._frames) >= self._capacity:
            return False
        self._append(frame)
        return True

    def close_after(self, code: int, reason: str) -> None:
        """Close with ``code`` once the frames queued so far are written.
        The first request wins; later frames are dropped."""
        if self._close is None:
            self._close = Close(code, reason)
            self._wake_taker()
            self._space.unpark_all()

    @property
    def close_request(self) -> Close | None:
        """The close asked for by `close_after`, if any."""
        return self._close

    def take(self, max_frames: int, max_chars: int) -> list[str]:
        """The oldest queued frames, at most ``max_frames`` and ``max_chars``.

        The first frame comes out whatever its size, so a frame larger than
        ``max_chars`` is written alone.
        Empty when nothing is queued.
        """
        frames = self._frames
        taken: list[str] = []
        chars = 0
        while frames and len(taken) < max_frames:
            if taken and chars + len(frames[0]) > max_chars:
                break
            frame = frames.popleft()
            taken.append(frame)
            chars += len(frame)
        if taken:
            self._bytes -= chars
            if self._space and self._has_room():
                self._space.unpark_all()
        return taken

    async def wait(self) -> None:
        """Until a frame is queued or a close is asked for. One task at a time
        waits (the connection's writer; a second is refused with RuntimeError).

        Yields only when it waits: the writer calls it when the queue was
        empty, and each write it makes yields in the socket anyway.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._frames and self._close is None:
            if self._taker is not None:
                raise RuntimeError("another task already waits for this outbox's frames")
            self._taker = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort_wait)

    def _wake_taker(self) -> None:
        task, self._taker = self._taker, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def _abort_wait(self, _: object) -> trio.lowlevel.Abort:
        self._taker = None  # cancelled: nothing is lost, the frames stay queued
        return trio.lowlevel.Abort.SUCCEEDED
