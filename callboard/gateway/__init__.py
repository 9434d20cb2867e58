"""The websocket gateway: PROTOCOL.md over trio-websocket, in front of a runtime.

``await nursery.start(serve_gateway, runtime, GatewayConfig(...))`` returns
the URL once listening; cancelling it stops the gateway gracefully. Use
`Gateway` directly to read its `statistics`.
"""

from ._config import GatewayConfig as GatewayConfig
from ._server import Gateway as Gateway
from ._server import GatewayStatistics as GatewayStatistics
from ._server import serve_gateway as serve_gateway

__all__ = ["Gateway", "GatewayConfig", "GatewayStatistics", "serve_gateway"]
