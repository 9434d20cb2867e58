"""Callboard's runtime behind the leanest server: where the gateway's gap lies.

``runtime-send-ack-*`` are the ``bare-send-ack-*`` servers (``_gateway_floor``:
trio-websocket over the gateway's socket layer, one reader and one writer
per connection, the ``ok`` once the message is durable) with one change:
each send is stored through callboard's runtime, ``Runtime.send_nowait``
(``Runtime.send`` for an actor's first message, which activates it), to the
same ``sink`` actors the gateway scenarios send to. So the message gets all
the runtime gives it (the store's mailbox, cursor and tables, the actor's
cell and handling, the commit of its handling) and none of the gateway's
request handling (tokens, the frame's checks, limits, the outbox).

Read the three ratios side by side, each to the same echo server:
``bare-send-ack`` to ``runtime-send-ack`` is what the runtime and its store
cost per send beyond the leanest server's own INSERT, UPDATE and DELETE;
``runtime-send-ack`` to ``gateway-send-ack`` is what the gateway's own code
costs. The runtime's figure is also the ceiling of any server on callboard
that uses trio-websocket as the gateway does.

Afterwards every send must have been acknowledged once, with no error, and
every client's actor must have handled its last message.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

import callboard

from . import Result
from ._gateway import Sink, _round_trips
from ._gateway_floor import Store, connection_handler, send_ack_scenarios

__all__ = ["SCENARIOS"]


def _storing(rt: callboard.Runtime, nursery: trio.Nursery, errors: list[Exception]) -> Store:
    """A `Store` that sends through ``rt``. A send that fails is kept in
    ``errors`` and ends the run at once: its client would wait for the
    ``ok`` for ever."""

    def store(to: str, kind: str, body: Any, then: Callable[[int], None]) -> None:
        def stored(ack: callboard.Ack | Exception) -> None:
            if isinstance(ack, Exception):
                errors.append(ack)
                nursery.cancel_scope.cancel()
            else:
                then(ack.seq)

        if not rt.send_nowait(to, kind, body, then=stored):
            nursery.start_soon(_send, rt, to, kind, body, stored)

    return store


async def _send(
    rt: callboard.Runtime, to: str, kind: str, body: Any,
    stored: Callable[[callboard.Ack | Exception], None],
) -> None:  # fmt: skip
    try:
        ack = await rt.send(to, kind, body)
    except Exception as exc:
        stored(exc)
    else:
        stored(ack)


async def _floor(workdir: Path, clients: int, per_client: int, window: int) -> Result:
    config = callboard.RuntimeConfig(passivate_after=3600.0)
    errors: list[Exception] = []
    async with callboard.open_runtime(
        workdir / "data", kinds=[Sink], config=config
    ) as rt, trio.open_nursery() as nursery:  # fmt: skip
        handler = connection_handler(_storing(rt, nursery, errors))
        serve = partial(trio.serve_tcp, handler, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        port = listeners[0].socket.getsockname()[1]
        url = f"ws://127.0.0.1:{port}/v1"
        result = await _round_trips(url, clients, per_client, rt=rt, window=window)
        # Acked once each: the clients count the oks. Handled: each actor's last
        # seq. Waited for before the cancel below, which would cut the wait short.
        with trio.fail_after(60):
            for n in range(clients):
                await rt.wait_handled(f"sink/c{n}", per_client)
        nursery.cancel_scope.cancel()
    if errors:
        raise RuntimeError(f"{len(errors)} sends failed; the first: {errors[0]!r}")
    return result


SCENARIOS = send_ack_scenarios(
    "runtime",
    _floor,
    "the leanest server's socket layer, storing through callboard's runtime: no gateway",
)
