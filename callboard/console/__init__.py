"""The operator's web console: a page served by ``callboard serve`` beside the gateway.

The page (plain HTML, CSS and JavaScript in ``static/``, shipped as package
data, no build step) is a client of the gateway protocol like any other: it
connects to the gateway's websocket and presents the token in its
``hello``. This package only serves its files, on loopback::

    async with open_console(port) as console:       # bound: console.origins, console.url
        config = attrs.evolve(config, allowed_origins=(*config.allowed_origins, *console.origins))
        url = await nursery.start(Gateway(rt, config).serve)
        await nursery.start(console.serve, url)
"""

from ._server import DEFAULT_CONSOLE_PORT as DEFAULT_CONSOLE_PORT
from ._server import Console as Console
from ._server import open_console as open_console

__all__ = ["DEFAULT_CONSOLE_PORT", "Console", "open_console"]
