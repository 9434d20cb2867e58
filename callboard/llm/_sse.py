"""Server-sent events, decoded without I/O.

A model server streams its answer as server-sent events (the WHATWG
``text/event-stream`` format). This module turns bytes, or lines, into
events and does nothing else: it imports neither trio nor httpx, so it is
tested with plain strings and would survive a change of HTTP library.

Why we split lines ourselves instead of using httpx's ``aiter_lines``: that
splits like ``str.splitlines``, which also breaks on U+2028, U+2029, U+0085
and form feeds. JSON allows U+2028 raw inside a string, and servers that do
not escape non-ASCII send it raw, so a model that writes one would see its
``data:`` line cut in two. The event-stream format ends a line only at CR,
LF or CRLF; so does this decoder.

Deviation from the specification, on purpose: an event whose ``data:`` lines
are not followed by a blank line before the stream ends is still delivered
by :meth:`EventStreamDecoder.close`. The specification drops it; a server
that closes right after ``data: [DONE]`` would otherwise lose its sentinel.

A second deviation: an ``error:`` line, which is no field of the format, is
read as the data of an event named ``error``. Older llama.cpp servers write
their in-stream errors so (``error: {json}`` and then ``data: [DONE]``);
ignoring the line, as the specification says, turns a context overflow into
what looks like an empty answer.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator

import attrs

__all__ = ["DONE", "EventStreamDecoder", "ServerSentEvent", "iter_events"]

DONE = "[DONE]"
"""The ``data`` an OpenAI-compatible server sends after its last chunk."""

_LINE_END = re.compile(r"\r\n|\r|\n")
_BOM = "\ufeff"


@attrs.frozen
class ServerSentEvent:
    """One dispatched event: its ``data`` lines joined with ``\\n``.

    ``event`` is the ``event:`` field (``"message"`` when absent) and ``id`` the
    last ``id:`` seen on the stream, which carries over to later events as the
    specification says.
    """

    data: str
    event: str = "message"
    id: str | None = None

    @property
    def is_done(self) -> bool:
        """Whether this is the ``[DONE]`` sentinel that ends an OpenAI stream."""
        return self.data.strip() == DONE


@attrs.define
class EventStreamDecoder:
    """Incremental decoder: feed it bytes (:meth:`feed`) or lines (:meth:`feed_line`).

    Bytes are decoded as UTF-8 (the format allows no other encoding), split
    across chunk boundaries correctly, including a CRLF or a multi-byte
    character cut in two. Call :meth:`close` when the stream ends.

    ``unrecognized`` keeps the first line that is neither blank, a comment, nor
    one of the four fields: the format says to ignore such lines, but a caller
    whose stream produced no event at all can quote it to say what arrived
    instead (an HTML error page, a plain JSON body).
    """

    unrecognized: str | None = attrs.field(default=None, init=False)
    _text: codecs.IncrementalDecoder = attrs.field(
        factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace"),
        init=False,
        repr=False,
    )
    _partial: str = attrs.field(default="", init=False, repr=False)
    _pending_cr: bool = attrs.field(default=False, init=False, repr=False)
    _first_line: bool = attrs.field(default=True, init=False, repr=False)
    _data: list[str] = attrs.field(factory=list, init=False, repr=False)
    _event: str = attrs.field(default="", init=False, repr=False)
    _last_id: str | None = attrs.field(default=None, init=False, repr=False)

    def feed(self, chunk: bytes | str) -> list[ServerSentEvent]:
        """Decode one chunk of the body and return the events it completed."""
        text = self._text.decode(chunk) if isinstance(chunk, bytes) else chunk
        return self._feed_text(text)

    def feed_line(self, line: str) -> ServerSentEvent | None:
        """Process one line (with or without its LF/CRLF/CR ending).

        Returns the event that a blank line dispatches, else ``None``.
        """
        if line.endswith("\r\n"):
            line = line[:-2]
        elif line.endswith(("\n", "\r")):
            line = line[:-1]
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "error":
            self._data.append(value)
            self._event = "error"
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            pass  # a reconnection delay: we never reconnect a model stream
        elif self.unrecognized is None:
            self.unrecognized = line
        return None

    def close(self) -> list[ServerSentEvent]:
        """End the stream: flush a last unterminated line and a last undispatched event."""
        events = self._feed_text(self._text.decode(b"", final=True))
        if self._partial:
            line, self._partial = self._partial, ""
            event = self.feed_line(line)
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF whose CR ended the previous chunk
        buffer = self._partial + text
        self._pending_cr = buffer.endswith("\r")
        lines = _LINE_END.split(buffer)
        self._partial = lines.pop()
        events = []
        for line in lines:
            event = self.feed_line(line)
            if event is not None:
                events.append(event)
        return events

    def _dispatch(self) -> ServerSentEvent | None:
        data, self._data = self._data, []
        event, self._event = self._event, ""
        if not data:
            return None
        return ServerSentEvent(data="\n".join(data), event=event or "message", id=self._last_id)


def iter_events(lines: Iterable[str]) -> Iterator[ServerSentEvent]:
    """Decode events from an iterable of lines; the stream ends with the iterable."""
    decoder = EventStreamDecoder()
    for line in lines:
        event = decoder.feed_line(line)
        if event is not None:
            yield event
    yield from decoder.close()
