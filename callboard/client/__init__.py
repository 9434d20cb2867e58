"""A Python client for the callboard gateway (docs/protocol.md), on trio.

``async with callboard.client.connect(url, token) as client:`` gives the
gateway's ops as methods that return the embedding API's own types
(`callboard.Ack`, `callboard.Address`, `callboard.Event`,
`callboard.ActorInfo`, `callboard.ActorView`; ``client.tasks`` the task
types of `callboard.views`), and raise its own errors, plus the few in
`_errors` that only a network client meets. Subscriptions survive
reconnection with no gap and no duplicate.

The types it shares with the server come from `callboard.views`: importing
the client loads nothing of the runtime, the store, the tools or the agent.
"""

from .._retry import Backoff as Backoff
from ._client import DEFAULT_URL as DEFAULT_URL
from ._client import Client as Client
from ._client import Spawned as Spawned
from ._client import connect as connect
from ._credentials import find_token as find_token
from ._errors import ConnectionFailed as ConnectionFailed
from ._errors import ConnectionLost as ConnectionLost
from ._errors import ProtocolError as ProtocolError
from ._errors import RateLimited as RateLimited
from ._errors import ServerError as ServerError
from ._errors import TooLarge as TooLarge
from ._errors import Unauthorized as Unauthorized
from ._stream import EventStream as EventStream
from ._stream import StreamStatistics as StreamStatistics
from ._tasks import RemoteTasks as RemoteTasks

__all__ = [
    "DEFAULT_URL",
    "Backoff",
    "Client",
    "ConnectionFailed",
    "ConnectionLost",
    "EventStream",
    "ProtocolError",
    "RateLimited",
    "RemoteTasks",
    "ServerError",
    "Spawned",
    "StreamStatistics",
    "TooLarge",
    "Unauthorized",
    "connect",
    "find_token",
]
