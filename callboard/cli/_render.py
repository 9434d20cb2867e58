"""Events as a person reads them: one renderer for ``task run``, ``task show`` and ``tail``.

A turn's streamed text (``turn.delta``) is written as it arrives, with no line
per token; its stored message ends the line (and is written whole if no text
streamed, as when the subscription began after it). Tool calls, approvals,
a retried model call and a turn waiting for a model that is down get one
line each; a turn that resumes after a restart says so, since its text then
streams again from the start of the model call. With ``everything``, other
events get the one-line form of `format_event` (``tail``); ``task run``
shows only what its task does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import orjson

from ..mailbox import Event, format_at
from ..views import Succeeded, Terminal
from ..views.task_logic import LIVE_STATUSES

__all__ = [
    "ENDINGS",
    "LIVE_STATUSES",
    "RESULT_RULE",
    "LineWriter",
    "Printer",
    "event_json",
    "format_event",
    "summary_rows",
    "task_ending",
]

RESULT_RULE = "=== succeeded ==="
ENDINGS = frozenset({"actor.stopped", "actor.failed"})
"""The events after which an actor has ended: nothing follows them."""
# A wake-up for readers of the output, not news; the model's thinking, a piece at a time.
_QUIET = frozenset({"job.output", "turn.reasoning"})


def event_json(event: Event) -> dict[str, Any]:
    """An event as docs/protocol.md writes it, without ``op`` and ``sub``."""
    return event.to_json()


def format_event(event: Event, *, with_actor: bool = False) -> str:
    """One line: seq, time, (actor,) type and data as compact JSON."""
    seq = "-" if event.seq is None else str(event.seq)
    parts = [seq.rjust(6), format_at(event.at)]
    if with_actor:
        parts.append(event.actor)
    parts.append(event.type)
    if event.data is not None:
        parts.append(orjson.dumps(event.data).decode())
    return "  ".join(parts)


@attrs.define
class LineWriter:
    """Raw text to whole lines, for a writer that adds the newline itself (the REPL's)."""

    write_line: Callable[[str], None]
    _pending: str = ""

    def __call__(self, text: str) -> None:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self.write_line(line)

    def flush(self) -> None:
        if self._pending:
            self.write_line(self._pending)
            self._pending = ""


@attrs.define
class Printer:
    """Turns an actor's events into text a person reads, or JSON lines.

    ``write`` takes raw text (no newline added); ``with_actor`` puts the
    address in the lines of other events (a pattern's ``tail``).
    """

    write: Callable[[str], None]
    json_lines: bool = False
    everything: bool = False
    with_actor: bool = False
    _streamed: bool = False  # the model's text since its last stored message was shown
    _open_line: bool = False

    def show(self, event: Event) -> None:
        data = event.data if isinstance(event.data, dict) else {}
        if self.json_lines:
            row = {"actor": event.actor, "seq": event.seq, "type": event.type, "data": event.data}
            self._write(json.dumps(row, ensure_ascii=False) + "\n")
            return
        kind = event.type
        if kind == "turn.delta":
            self._streamed = True
            self._write(str(data.get("text", "")), open_line=True)
        elif kind == "turn.retrying":
            self._line("[the model is asked again; the text above is dropped]")
        elif kind == "turn.waiting_for_model":
            retry_at = data.get("retry_at")
            when = format_at(retry_at) if isinstance(retry_at, int | float) else "later"
            failed = data.get("attempt")
            self._line(
                f"[the model cannot be reached: {_one_line(data.get('error', ''), 200)}; "
                f"the turn waits and asks again at {when} ({failed} failed so far)]"
            )
        elif kind == "turn.started":
            self._line(f"> {data.get('prompt', '')}")
        elif kind == "turn.resumed":
            self._streamed = False
            prompt = f": {data['prompt']}" if data.get("prompt") else ""
            self._line(f"[resumed after a restart{prompt}; the model's answer streams again]")
        elif kind == "assistant.message":
            content = data.get("content") or ""
            if not self._streamed and content:
                self._write(content, open_line=True)
            self._streamed = False
            self._end_line()
        elif kind == "tool.started":
            self._line(f"[tool] {data.get('name')}({data.get('arguments', '')})")
        elif kind == "tool.finished":
            status = str(data.get("status"))
            result = " ".join(str(data.get("result", "")).split())
            # What the model reads says "error: ..." itself: the status says it once.
            result = result.removeprefix(f"{status}: ")
            result = result if len(result) <= 120 else result[:117] + "..."
            self._line(f"[tool] {data.get('name')} {status}: {result}")
        elif kind == "approval.requested":
            call = data.get("call_id")
            self._line(
                f"[approval] {data.get('name')}({data.get('arguments', '')}) waits; answer with: "
                f"callboard approve {event.actor} {call} (or deny ... --reason TEXT)"
            )
        elif kind == "turn.steered":
            self._line(f">> {data.get('text', '')}  [steered into the running turn]")
        elif kind == "turn.interrupted" and data.get("by"):
            self._line(f"[interrupted by {data.get('by')}]")
        elif kind == "approval.expired":
            verdict = "approved" if data.get("approved") else "denied"
            self._line(f"[approval] {data.get('name') or data.get('call_id')} expired: {verdict}")
        elif kind == "budget.exceeded":
            self._line(f"[budget] {data.get('error')}{_held(event.actor, data)}")
        elif kind == "budget.raised":
            limits = data.get("limits")
            given = ", ".join(
                f"{k} {v:g}"
                for k, v in (limits if isinstance(limits, dict) else {}).items()
                if v is not None
            )
            self._line(f"[budget] limits now {given or 'none'}; the turn goes on")
        elif kind == "conversation.compacted":
            self._line(f"[{data.get('turns')} earlier turns summarised to fit the model's context]")
        elif self.everything and kind not in _QUIET:
            self._line(format_event(event, with_actor=self.with_actor))

    def end(self, terminal: Terminal) -> None:
        if self.json_lines:
            return
        if isinstance(terminal, Succeeded):
            self._line(RESULT_RULE)
            self._line(terminal.result)

    def close(self) -> None:
        """End a line the model's text left open."""
        self._end_line()

    def _line(self, text: str) -> None:
        self._end_line()
        self._write(text + "\n")

    def _end_line(self) -> None:
        if self._open_line:
            self._write("\n")

    def _write(self, text: str, *, open_line: bool = False) -> None:
        self.write(text)
        self._open_line = open_line if text else self._open_line


def task_ending(handle: str, terminal: Terminal | None) -> str:
    """Why a task did not succeed, as one sentence for stderr."""
    name = type(terminal).__name__
    error = getattr(terminal, "error", None)
    words = {
        "Failed": f"{handle} failed: {error}",
        "Cancelled": f"{handle} was cancelled",
        "DeadlineExceeded": f"{handle} exceeded its deadline",
    }
    return words.get(name, f"{handle} ended without a terminal")


def summary_rows(summary: dict[str, Any] | None) -> list[list[str]]:
    """``inspect``'s rows for what a kind adds (a session's conversation and last turn)."""
    if not summary:
        return []
    rows = []
    if "conversation" in summary:
        rows.append(["conversation", f"{summary['conversation']} items"])
    last = summary.get("last_turn")
    if isinstance(last, dict):
        answer = _one_line(last.get("answer")) if last.get("answer") else "(no answer)"
        calls = last.get("tool_calls", 0)
        rows.append(["last_turn", f"> {_one_line(last.get('prompt'))}"])
        rows.append(["", f"{answer} ({calls} tool call{'' if calls == 1 else 's'})"])
    running = summary.get("running")
    if isinstance(running, dict):
        rows.append(["running", f"{running.get('turn_id')} ({running.get('phase')}): "
                                f"{_one_line(running.get('prompt'))}"])  # fmt: skip
        outage = running.get("outage")
        if isinstance(outage, dict):
            retry_at = outage.get("retry_at")
            when = format_at(retry_at) if isinstance(retry_at, int | float) else "now"
            failed = outage.get("attempt")
            rows.append(["outage", f"{failed} ask{'' if failed == 1 else 's'} failed, asks "
                                   f"again {'at ' if when != 'now' else ''}{when}: "
                                   f"{_one_line(outage.get('error'), 200)}"])  # fmt: skip
    return rows + _budget_rows(summary.get("budget"))


def _budget_rows(budget: Any) -> list[list[str]]:
    """What was spent, the limits in force and a breach that holds a turn."""
    if not isinstance(budget, dict) or not isinstance(budget.get("usage"), dict):
        return []
    spent = budget["usage"]
    tokens = f"{spent.get('input_tokens', 0)} in, {spent.get('output_tokens', 0)} out"
    calls = f"{spent.get('model_calls', 0)} model calls, {spent.get('tool_calls', 0)} tool calls"
    rows = [["usage", f"{tokens}, {calls}, cost {spent.get('cost', 0):g}"]]
    limits = budget.get("limits")
    if isinstance(limits, dict) and any(v is not None for v in limits.values()):
        rows.append(["limits", ", ".join(f"{k} {v:g}" for k, v in limits.items() if v is not None)])
    breach = budget.get("breach")
    if isinstance(breach, dict):
        how = (
            "approve the call budget or send raise_budget"
            if breach.get("policy") == "ask"
            else "send raise_budget (resume does not lift it)"
        )
        rows.append(["breach", f"{breach.get('limit')} reached in {breach.get('turn_id')} "
                               f"({breach.get('policy')}): {how} to go on"])  # fmt: skip
    return rows


def _held(actor: str, breach: dict[str, Any]) -> str:
    """How a person lets a turn a budget holds go on (nothing for ``fail``: it ended)."""
    limit = breach.get("limit")
    if breach.get("policy") == "ask":
        return f"; the turn waits: callboard approve {actor} budget (or deny ... --reason TEXT)"
    if breach.get("policy") == "pause":
        return (
            f"; the turn waits (resume does not lift it): callboard send {actor} raise_budget "
            f"'{{\"{limit}\": NEW}}'"
        )
    return ""


def _one_line(text: Any, limit: int = 80) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
