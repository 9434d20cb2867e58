"""The websocket gateway: docs/protocol.md over trio-websocket, in front of a runtime.

``await nursery.start(serve_gateway, runtime, GatewayConfig(...))`` returns
the URL once listening; cancelling it stops the gateway gracefully. Use
`Gateway` directly to read its `statistics`. Every connection presents a
token: the operator's (``<data>/token``, made by `ensure_operator_token`)
or a scoped client token (`add_client_token`).
"""

from ._config import GatewayConfig as GatewayConfig
from ._config import is_loopback as is_loopback
from ._grants import Grant as Grant
from ._server import Gateway as Gateway
from ._server import GatewayStatistics as GatewayStatistics
from ._server import serve_gateway as serve_gateway
from ._tokens import ClientToken as ClientToken
from ._tokens import add_client_token as add_client_token
from ._tokens import ensure_operator_token as ensure_operator_token
from ._tokens import list_client_tokens as list_client_tokens
from ._tokens import read_token as read_token
from ._tokens import remove_client_token as remove_client_token

__all__ = [
    "ClientToken",
    "Gateway",
    "GatewayConfig",
    "GatewayStatistics",
    "Grant",
    "add_client_token",
    "ensure_operator_token",
    "is_loopback",
    "list_client_tokens",
    "read_token",
    "remove_client_token",
    "serve_gateway",
]
