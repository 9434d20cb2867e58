"""Model calls for the agent layer, streamed over httpx: OpenAI-compatible chat
completions, or the Anthropic Messages API, behind one :class:`ChatClient`.

General layout, bottom up:

- ``_sse``: bytes or lines to server-sent events; pure (no trio, no httpx).
- ``_deltas``: one ``delta`` to its pieces of text, reasoning and refusal,
  in each server's spelling; pure.
- ``_accumulate``: ``chat.completion.chunk`` objects to one finished
  :class:`AssistantReply`, tool calls accumulated by index; pure.
- ``_messages_request``, ``_messages_stream``: the same conversation as an
  Anthropic Messages request, and its streamed events to the same
  :class:`AssistantReply`; pure.
- ``_classify``: what a server's error means, wherever it arrives: a
  :class:`ContextOverflow`, a passing fault, or a permanent refusal; pure.
- ``_failures``: which HTTP answers are retried, and the words of every
  :class:`~callboard.errors.ModelError` (with the API key removed).
- ``_providers``: the names of the providers and of their key variables.
- ``_wires``: what differs per provider, the request and the reading of
  its events.
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
from ._messages_stream import MessagesAccumulator as MessagesAccumulator
from ._providers import API_KEY_ENV_VARS as API_KEY_ENV_VARS
from ._providers import PROVIDERS as PROVIDERS
from ._providers import Provider as Provider
from ._providers import check_provider as check_provider
from ._providers import key_env_vars as key_env_vars
from ._sse import EventStreamDecoder as EventStreamDecoder
from ._sse import ServerSentEvent as ServerSentEvent
from ._sse import iter_events as iter_events

__all__ = [
    "API_KEY_ENV_VARS",
    "PROVIDERS",
    "AssistantReply",
    "ChatClient",
    "ChunkAccumulator",
    "ContextOverflow",
    "DeltaKind",
    "EventStreamDecoder",
    "MessagesAccumulator",
    "Provider",
    "RetryNotice",
    "ServerSentEvent",
    "StreamDelta",
    "ToolCall",
    "accumulate",
    "check_provider",
    "iter_events",
    "key_env_vars",
]
