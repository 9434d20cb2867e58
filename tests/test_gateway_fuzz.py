"""Property: every bad frame gets exactly one ``error`` frame with the right
code, the connection stays open, other connections are undisturbed, and no
state changes (no actor, no message, no event).

One gateway serves every example: it runs in its own thread and ``trio.run``
(pytest-trio gives each Hypothesis example a ``trio.run`` of its own, which
a server cannot outlive), so the examples also show that one long-lived
server keeps serving through all of them. ``max_frame`` is small so that
"huge" frames are cheap to generate.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import trio
from credentials import TEST_TOKEN
from gateway_wire import connect, open_gateway
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from callboard.gateway import Gateway, GatewayConfig, GatewayStatistics

MAX_FRAME = 2048
CONFIG = GatewayConfig(port=0, token=TEST_TOKEN, max_frame=MAX_FRAME)

# A valid request of each op, and the JSON type of each field it checks.
VALID = {
    "send": {"to": "counter/a", "type": "add"},
    "spawn": {"kind": "keeper", "name": "k9"},
    "subscribe": {"actor": "counter/a"},
    "unsubscribe": {"sub": "k1"},
    "list": {},
    "inspect": {"actor": "counter/a"},
    "stop": {"actor": "counter/a"},
    "ping": {},
}
TYPED = {
    "send": {"to": str, "type": str, "key": str},
    "spawn": {"kind": str, "name": str},
    "subscribe": {"actor": str, "after": int},
    "unsubscribe": {"sub": str},
    "list": {"kind": str, "status": str, "after": str, "limit": int},
    "inspect": {"actor": str},
    "stop": {"actor": str},
}

json_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    st.one_of(st.none(), json_scalars),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)

Bad = tuple[str | bytes, str, str | None, str | None]  # frame, code, id echoed, text in message


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def _wrong_type(value: Any, expected: type) -> bool:
    """Not of the ``expected`` JSON type (a boolean is no integer); null means absent."""
    if value is None:
        return False
    if expected is int and isinstance(value, bool):
        return True
    return not isinstance(value, expected)


@st.composite
def wrong_type(draw: st.DrawFn) -> Bad:
    op = draw(st.sampled_from(sorted(TYPED)))
    field = draw(st.sampled_from(sorted(TYPED[op])))
    expected = TYPED[op][field]
    value = draw(json_values.filter(lambda v: _wrong_type(v, expected)))
    frame = {"op": op, "id": "w", **VALID[op], field: value}
    return json.dumps(frame), "bad_request", "w", f"'{field}'"


@st.composite
def bad_op(draw: st.DrawFn) -> Bad:
    op = draw(json_values.filter(lambda v: not (isinstance(v, str) and v in {*VALID, "hello"})))
    frame: dict[str, Any] = {"id": "o"} if op is None else {"op": op, "id": "o"}
    return json.dumps(frame), "bad_request", "o", "'op'"


@st.composite
def huge(draw: st.DrawFn) -> Bad:
    char = draw(
        st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"), exclude_characters='"\\')
    )
    size = draw(st.integers(MAX_FRAME + 1, 4 * MAX_FRAME - 200))
    room = len(char.encode())
    body = char * max(1, size // room)
    frame = {"op": "send", "id": "h", "to": "counter/a", "type": "add", "body": body}
    return json.dumps(frame, ensure_ascii=False), "too_large", "h", "over the limit"


bad_frames = st.one_of(
    st.text(max_size=200).filter(_not_json).map(lambda t: (t, "bad_request", None, "not JSON")),
    st.one_of(st.none(), json_scalars, st.lists(json_values, max_size=3)).map(
        lambda v: (json.dumps(v), "bad_request", None, "JSON object")
    ),
    st.binary(max_size=50).map(lambda b: (b, "bad_request", None, "text frame")),
    bad_op(),
    wrong_type(),
    huge(),
)


class Server:
    """A gateway running in another thread; `statistics` is read on its own thread."""

    def __init__(self, gateway: Gateway, token: trio.lowlevel.TrioToken) -> None:
        self.url = gateway.url
        self._gateway = gateway
        self._token = token

    async def statistics(self) -> GatewayStatistics:
        read = partial(trio.from_thread.run_sync, self._gateway.statistics, trio_token=self._token)
        return await trio.to_thread.run_sync(read)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started: queue.Queue[tuple[Server, trio.CancelScope] | BaseException] = queue.Queue()

    async def serve() -> None:
        with trio.CancelScope() as scope:
            async with open_gateway(tmp_path_factory.mktemp("fuzz"), CONFIG) as (rt, gateway):
                await rt.send("counter/a", "add")
                await rt.wait_handled("counter/a", 1)
                started.put((Server(gateway, trio.lowlevel.current_trio_token()), scope))
                await trio.sleep_forever()

    def run() -> None:
        try:
            trio.run(serve)
        except BaseException as exc:  # pragma: no cover (reported by the fixture)
            started.put(exc)

    thread = threading.Thread(target=run, name="fuzzed gateway")
    thread.start()
    result = started.get(timeout=10)
    if isinstance(result, BaseException):  # pragma: no cover
        raise result
    served, scope = result
    try:
        yield served
    finally:
        trio.from_thread.run_sync(scope.cancel, trio_token=served._token)
        thread.join(10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(bad_frames, min_size=1, max_size=8))
@example(frames=[("{", "bad_request", None, "not JSON")])
@example(frames=[('{"op": "send", "id": "x", "to": "counter/a", "type": "add", "key": ""}',
                  "bad_request", "x", "'key'")])  # fmt: skip
async def test_every_bad_frame_gets_one_error_and_changes_nothing(server, frames):
    with trio.fail_after(10):
        before_stats = await server.statistics()
        async with connect(server.url) as client, connect(server.url) as bystander:
            before = (await client.ok("list"), await client.ok("inspect", actor="counter/a"))
            for frame, _, _, _ in frames:
                await client.ws.send(frame)
            replies = [await client.receive() for _ in frames]
            assert await client.ok("ping") == {}
            assert await bystander.ok("ping") == {}
            after = (await client.ok("list"), await client.ok("inspect", actor="counter/a"))
            assert client.pending == bystander.pending == type(client.pending)()
        stats = await server.statistics()
    assert [(r["op"], r["code"], r["id"]) for r in replies] == [
        ("error", code, rid) for _, code, rid, _ in frames
    ]
    for reply, (_, _, _, named) in zip(replies, frames, strict=True):
        assert named in reply["message"]
    assert after == before
    assert after[1]["mailbox"] == 0 and after[1]["cursor"] == 1 and after[1]["head"] == 2
    assert stats.sends_accepted_total == before_stats.sends_accepted_total == 0
    assert stats.dropped_total == 0
    assert stats.connections_total == before_stats.connections_total + 2
