"""Writing several queued text frames to a websocket with one socket send.

trio-websocket's ``send_message`` writes each message with its own
``send_all``: a system call and a trip through the scheduler per frame. For
a subscriber's connection that is most of the cost of fan-out (py-spy put
90% of a connection writer's time inside ``send_message``). When frames are
waiting, `send_text_frames` frames them all with the connection's own
wsproto state and sends the bytes at once, under the same lock and with the
same error handling as ``send_message`` itself. The client reads the same
websocket frames; only the TCP segments are fuller.

This reaches into attributes trio-websocket does not publish, so
`can_batch` checks a connection for them, and the writer falls back to one
``send_message`` per frame when they are missing. The package pins the minor
version it was written against, and a test fails if that version stops
having them.
"""

from __future__ import annotations

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection
from wsproto.events import TextMessage

__all__ = ["can_batch", "send_text_frames"]

_NEEDED = ("_close_reason", "_wsproto", "_stream_lock", "_stream", "_abort_web_socket")


def can_batch(ws: WebSocketConnection) -> bool:
    """Whether ``ws`` has what `send_text_frames` uses."""
    return all(hasattr(ws, name) for name in _NEEDED)


async def send_text_frames(ws: WebSocketConnection, frames: list[str]) -> None:
    """Send ``frames`` as that many text messages, in order, with one ``send_all``.

    The same contract as ``send_message``: ConnectionClosed when the
    connection is closed or breaks, and it must not be cancelled halfway.
    """
    if ws._close_reason:
        raise ConnectionClosed(ws._close_reason)
    encode = ws._wsproto.send
    data = b"".join([encode(TextMessage(data=frame)) for frame in frames])
    async with ws._stream_lock:
        try:
            await ws._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await ws._abort_web_socket()
            raise ConnectionClosed(ws._close_reason) from None
