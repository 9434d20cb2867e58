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

Only public trio-websocket API is involved: ``wrap_server_stream`` takes any
`trio.abc.Stream`.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

import trio

__all__ = ["HeldWrites"]


class HeldWrites(trio.abc.Stream):
    """Wraps ``stream``; `hold` makes writes buffer until `flush` or `discard`.

    Every write to the socket goes through one lock, so a pong that
    trio-websocket's reader sends while a batch is being flushed waits for
    the batch instead of cutting into it.
    """

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        # Sent to directly when flushing, to see each partial send (under the lock).
        self._socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._held: list[bytes] | None = None
        self._lock = trio.StrictFIFOLock()

    def hold(self) -> None:
        """Buffer the writes from now on (the caller must end with `flush` or `discard`)."""
        self._held = []

    def discard(self) -> None:
        """Stop holding and drop what was held (the connection is ending)."""
        self._held = None

    async def flush(self, on_progress: Callable[[], None]) -> None:
        """Stop holding and send what was held, calling ``on_progress`` each time
        the socket takes some of it (the client is reading).

        Progress is counted per socket send, not per batch, so that a client
        that reads slowly but steadily is not taken for one that stopped.
        Like ``send_all``, it must not be cancelled halfway while the
        connection is meant to go on.
        """
        held, self._held = self._held, None
        data = memoryview(b"".join(held or ()))
        await self._acquire()
        try:
            while data:
                data = data[await self._send_some(data) :]
                on_progress()
        finally:
            self._lock.release()

    async def _send_some(self, data: memoryview) -> int:
        if self._socket is None:  # not a socket (the tests' memory streams): all at once
            await self.stream.send_all(data)
            return len(data)
        try:
            return await self._socket.send(data)
        except OSError as exc:  # as trio.SocketStream.send_all says it
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("the connection's socket was closed") from None
            raise trio.BrokenResourceError(f"the connection broke: {exc}") from exc

    async def _acquire(self) -> None:
        # No yield when the lock is free: the socket write that follows yields.
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is not None:
            # trio-websocket's own send lock has yielded for this message
            # already; a cancel point is all this adds.
            await trio.lowlevel.checkpoint_if_cancelled()
            self._held.append(bytes(data))
            return
        await self._acquire()
        try:
            await self.stream.send_all(data)
        finally:
            self._lock.release()

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        self._held = None
        await self.stream.aclose()
