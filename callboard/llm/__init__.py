"""OpenAI-compatible chat completions, streamed over httpx, for the agent layer.

General layout, bottom up:

- ``_sse``: bytes or lines to server-sent events; pure (no trio, no httpx).
- ``_deltas``: one ``delta`` to its pieces of text, reasoning and refusal,
  in each server's spelling; pure.
- ``_accumulate``: ``chat.completion.chunk`` objects to one finished
  :class:`AssistantReply`, tool calls accumulated by index; pure.
- ``_classify``: what a server's error means, wherever it arrives: a
  :class:`ContextOverflow`, a passing fault, or a permanent refusal; pure.
- ``_failures``: which HTTP answers are retried, and the words of every
  :class:`~callboard.errors.ModelError` (with the API key removed).
- ``_client``: :class:`ChatClient`, the HTTP call with its retries, backoff
  and timeouts.

httpx is used nowhere else in callboard, so replacing it stays inside this package.
"""

from ._accumulate import AssistantReply as AssistantReply
from ._accumulate import ChunkAccumulator as ChunkAccumulator
from ._accumulate import ToolCall as ToolCall
from ._accumulate import accumulate as accumulate
from ._classify import ContextOverflow as ContextOverflow
from ._client import ChatClient as ChatClient
from ._client import RetryNotice as RetryNotice
from ._deltas import DeltaKind as DeltaKind
from ._deltas import StreamDelta as StreamDelta
from ._failures import API_KEY_ENV_VARS as API_KEY_ENV_VARS
from ._sse import EventStreamDecoder as EventStreamDecoder
from ._sse import ServerSentEvent as ServerSentEvent
from ._sse import iter_events as iter_events

__all__ = [
    "API_KEY_ENV_VARS",
    "AssistantReply",
    "ChatClient",
    "ChunkAccumulator",
    "ContextOverflow",
    "DeltaKind",
    "EventStreamDecoder",
    "RetryNotice",
    "ServerSentEvent",
    "StreamDelta",
    "ToolCall",
    "accumulate",
    "iter_events",
]
