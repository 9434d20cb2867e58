"""The log of ``callboard serve``: plain lines for a terminal, or one JSON object a
line for a log shipper (``--log-format json``), and the actors' lifecycle steps.

A JSON line has ``time`` (UTC, ISO 8601 with milliseconds), ``level``,
``logger`` and ``message``; ``actor`` when the line concerns one; and
``exception`` (the traceback, as text) when it carries one. The actor comes
from the line itself (``extra={"actor": ...}``) or else from the task that
logged it (`callboard.supervisor.current_actor`), so a model call's retry
logged inside a session's turn names the session.

`log_lifecycle` logs what an operator wants to hear of an actor without
tailing it: a crash, a failure, a message moved to the dead letters, from
the events the runtime commits (a tap: each once, after its commit).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

from ..mailbox import Event
from ..runtime import Runtime
from ..supervisor import current_actor

__all__ = ["LIFECYCLE", "ActorFilter", "JsonFormatter", "configure_logging", "log_lifecycle"]

LIFECYCLE = ("actor.crashed", "actor.failed", "message.dead_lettered")
"""The lifecycle events `log_lifecycle` logs."""

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

lifecycle_log = logging.getLogger("callboard.actors")


class ActorFilter(logging.Filter):
    """Sets ``record.actor``: the line's own, else the logging task's actor (or None)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "actor", None) is None:
            record.actor = current_actor.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _utc(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        actor = getattr(record, "actor", None)
        if actor is not None:
            line["actor"] = str(actor)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # default=str: a message argument orjson cannot encode is already in "message".
        return orjson.dumps(line, default=str).decode()


def _utc(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def configure_logging(level: str, format: str) -> None:
    """Log to stderr, at ``level``, as ``format`` (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ActorFilter())
    handler.setFormatter(JsonFormatter() if format == "json" else logging.Formatter(_TEXT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())


def log_lifecycle(rt: Runtime) -> None:
    """Log each actor's crash, failure and dead letter, as its event is committed."""
    rt.tap(LIFECYCLE, _log_event)


def _log_event(event: Event) -> None:
    data = event.data if isinstance(event.data, dict) else {}
    error = data.get("error")
    extra = {"actor": event.actor}
    if event.type == "actor.crashed":
        lifecycle_log.warning(
            "%s crashed: %s; it restarts in %.3g s", event.actor, error,
            data.get("restart_in") or 0.0, extra=extra,
        )  # fmt: skip
    elif event.type == "actor.failed":
        lifecycle_log.error("%s failed and stopped: %s", event.actor, error, extra=extra)
    else:
        lifecycle_log.error(
            "%s: message %s (%s) moved to the dead letters: %s", event.actor, data.get("seq"),
            data.get("type"), error, extra=extra,
        )  # fmt: skip
