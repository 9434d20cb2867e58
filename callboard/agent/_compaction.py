"""Context compaction: older turns summarised into a checkpoint so a conversation fits its model.

A conversation grows with every turn; a model's context does not. Before
each model call a turn estimates the request's size (`estimate_tokens`):
the prompt tokens the last model call reported (``usage.prompt_tokens``,
kept in the actor's snapshot as a `PromptSize`) plus one token per four
bytes of JSON for every item appended since; with no reported figure
(the first call, or the first after a compaction) the whole request is
counted at four bytes a token. When the estimate exceeds the configured
``context_window``, or when the server answers that the conversation
overflows its context (`ContextOverflow`), the turn compacts first: the
turns before the last ``keep_turns`` (and the previous summary, if any)
are sent to the model with a request to summarise them, and the summary is
appended to the conversation log as a *checkpoint* item::

    {"type": "compaction", "summary": "...", "keep_from": 12, "turns": 5,
     "reason": "context_window"}

The log is never rewritten: a checkpoint is one more item, and every later
request is built from the last one (`model_messages`): the system prompt,
the summary as a second system message, then the log from ``keep_from`` on
(checkpoints left out). The turn in flight is always kept whole, so a
compaction in the middle of a tool round loses nothing of it.

The checkpoint, the reset `PromptSize` and the ``conversation.compacted``
event are one commit, made only once the summary is in: a crash while the
model summarises leaves the conversation as it was, and the next attempt
compacts again from the same place. A compaction forced by an overflow is
followed by exactly one more attempt of the model call; if the turn in
flight alone overflows, nothing older is left to summarise and the server's
error ends the turn.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs
import orjson

from ..actors import Context
from ..errors import ModelError
from ..llm import AssistantReply, ChatClient, ContextOverflow
from ._journal import TurnJournal, conversation

__all__ = [
    "CHECKPOINT_TYPE",
    "DEFAULT_KEEP_TURNS",
    "SUMMARY_HEADER",
    "SUMMARY_INSTRUCTION",
    "Compaction",
    "PromptSize",
    "ask_compacting",
    "estimate_tokens",
    "is_checkpoint",
    "model_messages",
    "record_size",
    "summariser",
    "summary_request",
]

CHECKPOINT_TYPE = "compaction"
"""The ``type`` of a summary checkpoint in a conversation log (no model message has one)."""

DEFAULT_KEEP_TURNS = 2
"""Turns before the one in flight that a compaction keeps whole, by default."""

BYTES_PER_TOKEN = 4
"""The estimate for what no model call has counted yet: one token per four bytes of JSON."""

TOOL_RESULT_CAP = 2000
"""Characters of one tool result shown to the summariser: the summary needs the gist,
and a long file read must not make the summarising request overflow in its turn."""

SUMMARY_INSTRUCTION = (
    "You compact a conversation between a user and a coding agent. The agent will go on "
    "with only your summary and the most recent turns, so write down what it needs: the "
    "user's goals and requests, what was decided, the files and commands touched and what "
    "came of them, and what is still unfinished. Answer with the summary alone, in plain "
    "prose, as briefly as that allows."
)
"""The system prompt of the summarising call."""

SUMMARY_HEADER = "A summary of the earlier part of this conversation, which was compacted:"
"""What precedes the summary in the system message every later request carries."""

Reason = Literal["context_window", "context_overflow"]


@attrs.frozen
class Compaction:
    """When and how a conversation is compacted.

    ``context_window`` is the size in tokens a request may reach (an estimate,
    see the module docstring) before older turns are summarised; None
    compacts only when the server says the conversation overflows.
    ``keep_turns`` is how many turns before the one in flight stay whole (fewer
    when those are all there is to summarise).
    """

    context_window: int | None = None
    keep_turns: int = DEFAULT_KEEP_TURNS


@attrs.define
class PromptSize:
    """What the last model call reported of its request, kept in the snapshot.

    ``tokens`` is its ``usage.prompt_tokens`` (None when it reported none, or a
    compaction came since); ``at`` is the conversation log's length then, so
    what was appended after it is estimated by its bytes.
    """

    tokens: int | None = None
    at: int = 0


class ConversationItems(Protocol):
    """The conversation log as the turn keeps it (``_turn.ConversationLog``)."""

    def items(self, ctx: Context) -> list[dict[str, Any]]: ...
    def append(self, ctx: Context, entries: Iterable[dict[str, Any]]) -> None: ...


def is_checkpoint(item: object) -> bool:
    """Whether a log item is a summary checkpoint rather than a model message."""
    return isinstance(item, dict) and item.get("type") == CHECKPOINT_TYPE


def _last_checkpoint(items: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return next((item for item in reversed(items) if is_checkpoint(item)), None)


def model_messages(system_prompt: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``messages`` of a model request from the whole log: the system prompt, then
    the last checkpoint's summary and the log from its ``keep_from`` on, if there is one."""
    checkpoint = _last_checkpoint(items)
    if checkpoint is None:
        return conversation(system_prompt, items)
    summary = {"role": "system", "content": f"{SUMMARY_HEADER}\n\n{checkpoint['summary']}"}
    kept = [item for item in items[checkpoint["keep_from"] :] if not is_checkpoint(item)]
    return conversation(system_prompt, [summary, *kept])


def _bytes(value: object) -> int:
    return len(orjson.dumps(value))


def estimate_tokens(
    system_prompt: str,
    items: Sequence[dict[str, Any]],
    size: PromptSize,
    tools: Sequence[Mapping[str, Any]] = (),
) -> int:
    """The estimated prompt tokens of the next request (see the module docstring)."""
    if size.tokens is not None and size.at <= len(items):
        added = [item for item in items[size.at :] if not is_checkpoint(item)]
        return size.tokens + -(-_bytes(added) // BYTES_PER_TOKEN)
    request = {"messages": model_messages(system_prompt, items), "tools": list(tools)}
    return -(-_bytes(request) // BYTES_PER_TOKEN)


def record_size(size: PromptSize, reply: AssistantReply, at: int) -> None:
    """Keep what ``reply`` says of its request (sent with a log of ``at`` items)."""
    usage = reply.usage or {}
    tokens = usage.get("prompt_tokens")
    size.tokens = tokens if type(tokens) is int and tokens >= 0 else None
    size.at = at


async def ask_compacting(
    ctx: Context,
    turn: TurnJournal,
    chat: ConversationItems,
    size: PromptSize,
    policy: Compaction,
    summarise: Callable[[list[dict[str, Any]]], Awaitable[AssistantReply]],
    ask: Callable[[], Awaitable[AssistantReply]],
    *,
    system_prompt: str,
    tools: Sequence[Mapping[str, Any]] = (),
) -> AssistantReply:
    """Ask the model (``ask``), compacting first when the estimate exceeds the window,
    or after the server said the conversation overflows (then asking once more).

    ``summarise(messages)`` makes the summarising call and returns its reply.
    Records the reply's prompt size in ``size``.

    Raises:
        ModelError: the model could not be asked, or could not summarise;
            `ContextOverflow` when the conversation overflows even after a
            compaction, or nothing older than the turn in flight is left.
    """
    compacted = False
    if policy.context_window is not None:
        estimate = estimate_tokens(system_prompt, chat.items(ctx), size, tools)
        if estimate > policy.context_window:
            compacted = await _compact(
                ctx, turn, chat, size, policy, summarise, "context_window", estimate
            )
    at = len(chat.items(ctx))
    try:
        reply = await ask()
    except ContextOverflow:
        if compacted or not await _compact(
            ctx, turn, chat, size, policy, summarise, "context_overflow", None
        ):
            raise
        at = len(chat.items(ctx))
        reply = await ask()
    record_size(size, reply, at)
    return reply


async def _compact(
    ctx: Context,
    turn: TurnJournal,
    chat: ConversationItems,
    size: PromptSize,
    policy: Compaction,
    summarise: Callable[[list[dict[str, Any]]], Awaitable[AssistantReply]],
    reason: Reason,
    estimate: int | None,
) -> bool:
    """Summarise the turns before the kept ones and commit the checkpoint; False when
    nothing older than the turn in flight is left to summarise."""
    items = chat.items(ctx)
    previous = _last_checkpoint(items)
    start = previous["keep_from"] if previous is not None else 0
    current = max(start, min(turn.started_at, len(items)))
    # A turn begins with a user item; one appended mid-turn (a machine event) comes
    # only before a model call, after every tool result, so the log splits well there.
    starts = [i for i in range(start, current) if items[i].get("role") == "user"]
    if not starts:
        return False
    keep = policy.keep_turns
    keep_from = starts[-keep] if 0 < keep < len(starts) else current
    turns = sum(1 for i in starts if i < keep_from)
    older = [item for item in items[start:keep_from] if not is_checkpoint(item)]
    ctx.emit(
        "conversation.compacting",
        {"turn_id": turn.turn_id, "turns": turns, "reason": reason},
        ephemeral=True,
    )
    previous_summary = previous["summary"] if previous is not None else None
    began = time.monotonic()
    reply = await summarise(summary_request(previous_summary, older))
    elapsed = time.monotonic() - began
    summary = reply.content or ""
    if not summary.strip():
        raise ModelError(
            "the model answered the request to summarise the conversation with no text, "
            "so it was not compacted; try again, or start a new session",
            retryable=False,
        )
    at = len(items)
    checkpoint = {
        "type": CHECKPOINT_TYPE,
        "summary": summary,
        "keep_from": keep_from,
        "turns": turns,
        "reason": reason,
    }
    chat.append(ctx, [checkpoint])
    size.tokens = None  # the next request is a new shape: estimated by its bytes
    size.at = at
    event: dict[str, Any] = {
        "turn_id": turn.turn_id,
        "prompt_id": turn.prompt_id,
        "turns": turns,
        "kept_from": keep_from,
        "at": at,
        "reason": reason,
        "estimated_tokens": estimate,
        # The summarising call is a model call too: what it cost, as assistant.message says.
        "usage": reply.usage,
        "elapsed": round(elapsed, 6),
    }
    ctx.emit("conversation.compacted", event)
    await ctx.checkpoint()  # the checkpoint stands before the model is asked with it
    return True


def summary_request(previous: str | None, older: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summarising call's messages: the instruction, then the earlier part as text.

    Text, not the messages themselves: a tool call in the history would need the
    tools to be offered too (Anthropic refuses it otherwise), and the summariser
    must not call any.
    """
    lines: list[str] = []
    if previous is not None:
        lines.append(f"Summary of what came before:\n{previous}")
    for item in older:
        lines.extend(_said(item))
    transcript = "\n\n".join(lines)
    return [
        {"role": "system", "content": SUMMARY_INSTRUCTION},
        {"role": "user", "content": f"The conversation so far:\n\n{transcript}"},
    ]


def _said(item: Mapping[str, Any]) -> list[str]:
    role = item.get("role")
    content = item.get("content")
    text = content if isinstance(content, str) else ""
    if role == "user":
        return [f"User: {text}"]
    if role == "assistant":
        said = [f"Assistant: {text}"] if text else []
        for call in item.get("tool_calls") or ():
            function = call.get("function") or {}
            said.append(f"Assistant called {function.get('name')}({function.get('arguments')})")
        return said
    if role == "tool":
        if len(text) > TOOL_RESULT_CAP:
            text = f"{text[:TOOL_RESULT_CAP]}... ({len(text) - TOOL_RESULT_CAP} more characters)"
        return [f"Tool result: {text}"]
    return []


def summariser(
    client: ChatClient, *, base_url: str, model: str
) -> Callable[[list[dict[str, Any]]], Awaitable[AssistantReply]]:
    """A ``summarise`` for `ask_compacting` that asks ``model`` at ``base_url``, with no tools."""

    async def summarise(messages: list[dict[str, Any]]) -> AssistantReply:
        try:
            return await client.stream_chat(base_url=base_url, model=model, messages=messages)
        except ModelError as exc:
            raise ModelError(
                f"the conversation could not be compacted: {exc}",
                status=exc.status,
                retryable=exc.retryable,
            ) from exc

    return summarise
