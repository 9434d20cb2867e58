"""`HeldWrites`: a TCP stream whose writes can be held and sent as one.

trio-websocket's ``send_message`` writes each message with its own
``send_all``: a system call and a trip through the scheduler per frame, which
was most of what fan-out cost (py-spy put 90% of a subscriber connection's
writer in ``send_message``). The gateway hands trio-websocket this stream
instead of the bare socket. While the connection's writer sends a batch of
frames it holds the writes (`hold`), so each ``send_message`` only adds its
bytes to a buffer, and then sends the lot at once (`flush`). The client sees
the same websocket frames, in the same order; only the TCP segments are
fuller. Everything else (the reader's pongs, close frames) passes straight
through, or joins the held bytes in order if it comes during a batch.

Only the task that holds is buffered. Any other task that writes during a
hold (trio-websocket's reader replying to a close or a ping, a keepalive
ping, a close from ``drop``) sends what is held and then its own bytes at
once: a close reply must not wait for a batch, and the bytes must not be
lost if the stream is closed right after it.

The calls are public trio-websocket API (``wrap_server_stream`` takes any
`trio.abc.Stream`), but the ordering argument leans on how trio-websocket
0.12 sends: it encodes an event with wsproto, then writes it with one
``send_all`` under its own first-in-first-out lock, so bytes reach this
stream in the order wsproto encoded them. tests/test_gateway_batching.py
checks the frames that come out with a client's close in the middle of a
batch, and the gateway tests check them with pings and closes.

Reads go to the socket directly too (`receive_some`), with trio's cancel
and schedule points kept, since trio's own read wraps each call in more than
the read costs.

A write cut off halfway (cancelled, or the client vanished) leaves part of a
frame on the wire, after which no other frame may follow: the stream then
closes its socket and refuses every later write.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import TypeVar

import trio

__all__ = ["HeldWrites"]


_A = TypeVar("_A")
_T = TypeVar("_T")

_CLOSED = "the connection's socket was closed"
# What one read takes when the caller names no size (trio's own default).
_RECEIVE_SIZE = 65536


def _no_progress() -> None:
    pass


class HeldWrites(trio.abc.Stream):
    """Wraps ``stream``; `hold` makes writes buffer until `flush` or `discard`.

    Every write to the socket goes through one lock, so a pong that
    trio-websocket's reader sends while a batch is being flushed waits for
    the batch instead of cutting into it.
    """

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        # Written to directly, to see each partial send. Any other stream (a
        # TLS one, the tests' memory streams) takes each write whole, and a
        # batch then counts as progress only once it is all written.
        self._socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._held: list[bytes] | None = None
        self._holder: trio.lowlevel.Task | None = None
        self._lock = trio.StrictFIFOLock()
        self._cut = False

    def hold(self) -> None:
        """Buffer the calling task's writes from now on (it must end with
        `flush` or `discard`)."""
        self._held = []
        self._holder = trio.lowlevel.current_task()

    def discard(self) -> None:
        """Stop holding and drop what was held (the connection is ending)."""
        self._held = None

    async def flush(self, on_progress: Callable[[], None]) -> None:
        """Stop holding and send what was held, calling ``on_progress`` each time
        the socket takes some of it (the client is reading).

        Progress is counted per socket send, not per batch, so that a client
        that keeps reading is not taken for one that stopped, however big
        the batch.
        """
        held, self._held = self._held, None
        await self._write(memoryview(b"".join(held or ())), on_progress)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None and not self._cut:
            if trio.lowlevel.current_task() is self._holder:
                # trio-websocket's own send lock has yielded for this message
                # already; a cancel point is all this adds.
                await trio.lowlevel.checkpoint_if_cancelled()
                held.append(bytes(data))
                return
            # Another task writes: what is held was encoded first, so it goes first.
            self._held = []
            data = b"".join([*held, data])
        await self._write(memoryview(data), _no_progress)

    async def _write(self, data: memoryview, on_progress: Callable[[], None]) -> None:
        try:
            self._lock.acquire_nowait()  # no yield when free: the write yields
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            if self._cut:
                raise trio.BrokenResourceError("the connection was cut in the middle of a frame")
            total = len(data)
            try:
                while data:
                    data = data[await self._send_some(data) :]
                    on_progress()
            except BaseException:
                if 0 < len(data) < total:
                    self._cut_off()
                raise
        finally:
            self._lock.release()

    def _cut_off(self) -> None:
        # Part of a frame is out: whatever came next (a close frame queued on
        # the lock, say) would be read as the rest of it.
        self._cut = True
        self._held = None
        if self._socket is not None:
            self._socket.close()

    async def _send_some(self, data: memoryview) -> int:
        if self._socket is None:
            await self.stream.send_all(data)
            return len(data)
        # Written with os.write, and waited for only when the socket is full.
        # trio's send takes a schedule point after every write that went
        # through, a task step more per batch of frames; the writer takes one
        # anyway in trio-websocket's send lock. A cancel point still.
        await trio.lowlevel.checkpoint_if_cancelled()
        while (sent := self._try(os.write, data)) is None:
            await trio.lowlevel.wait_writable(self._socket)
        return sent

    def _try(self, call: Callable[[int, _A], _T], arg: _A) -> _T | None:
        """``call(fd, arg)`` on the socket, or None if it would block; errors
        as trio's socket stream says them. Not a coroutine: the reads and
        writes that need no wait (most) take no extra frame."""
        assert self._socket is not None
        fd = self._socket.fileno()  # read at each call: -1 once it is closed
        try:
            if fd < 0:
                raise trio.ClosedResourceError(_CLOSED)
            return call(fd, arg)
        except BlockingIOError:
            return None
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError(_CLOSED) from None
            raise trio.BrokenResourceError(f"the connection broke: {exc}") from exc

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._socket is None:
            return await self.stream.receive_some(max_bytes)
        if max_bytes is None:
            max_bytes = _RECEIVE_SIZE
        elif max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        # Read with os.read, as the writes are: trio's receive_some wraps
        # each read in a conflict detector and two context managers, 8% of
        # the gateway's CPU with 32 clients. It keeps trio's contract: a
        # cancel point first, and exactly one schedule point, either the
        # wait for data or, when data was already there, one after the read,
        # so a client that keeps the socket full cannot hold the event loop.
        await trio.lowlevel.checkpoint_if_cancelled()
        data = self._try(os.read, max_bytes)
        if data is not None:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data
        while True:
            await trio.lowlevel.wait_readable(self._socket)
            if (data := self._try(os.read, max_bytes)) is not None:
                return data

    async def aclose(self) -> None:
        # Held bytes are dropped: the connection is being torn down, and
        # waiting to write them could block on a client that stopped reading.
        self._held = None
        await self.stream.aclose()
