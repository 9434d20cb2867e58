"""Gateway requests are a union tagged by ``op``, structured by the codec's converter.

Pure: `parse_frame` on text, no socket. Each request type round-trips
through the converter and the wire; each field a client can get wrong is
refused with a message naming it (the texts clients have always read); an
unknown ``op`` is refused before any field is looked at.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callboard.codec import converter
from callboard.gateway._frames import (
    FrameError,
    GetState,
    Hello,
    Inspect,
    ListActors,
    Output,
    Pause,
    Ping,
    Request,
    Resume,
    Send,
    SetState,
    Spawn,
    Step,
    Stop,
    Subscribe,
    Unsubscribe,
    parse_frame,
)
from callboard.gateway._requests import (
    OPS,
    Approvals,
    DeadLetters,
    Delete,
    FieldRefused,
    Nodes,
    Requeue,
    structure_request,
)

MAX_FRAME = 1 << 20

REQUESTS = [
    Hello("h1", client="my-app/2.0", token="secret"),
    Hello("h2"),
    Send("s1", "session/s1", "prompt", {"text": "hi", "n": [1, 2.5, None]}, "key-1"),
    Send("s2", "counter/a", "add"),
    Send("s3", "session/s1", "approve", {"approved": False, "reason": "no"}, None, True),
    Spawn("p1", "task", "t1", {"prompt": "go"}),
    Spawn("p2", "keeper"),
    Subscribe("b1", "session/s1", 0),
    Subscribe("b2", "session/*"),
    Subscribe("b3", "*"),
    Unsubscribe("u1", "k1"),
    ListActors("l1", "session", "active", "session/a", 10),
    ListActors("l2"),
    Inspect("i1", "job/ab12"),
    Stop("t1", "job/ab12"),
    Ping("9"),
    Approvals("a1", "session/s1"),
    Approvals("a2"),
    DeadLetters("d1", "session/s1"),
    DeadLetters("d2"),
    Requeue("r1", 7),
    Delete("x1", "session/old"),
    Output("o1", "job/ab12", 1234, 4096),
    Output("o2", "job/ab12"),
    GetState("g1", "counter/a"),
    SetState("g2", "counter/a", {"total": 3}),
    Pause("g3", "counter/a"),
    Resume("g4", "counter/a"),
    Step("g5", "counter/a"),
    Nodes("n1"),
]


def parse(frame: dict[str, Any] | str) -> Request | FrameError:
    text = frame if isinstance(frame, str) else json.dumps(frame)
    return parse_frame(text, max_frame=MAX_FRAME)


def refusal(frame: dict[str, Any] | str) -> str:
    result = parse(frame)
    assert isinstance(result, FrameError), result
    assert result.code == "bad_request"
    return result.message


def test_every_op_of_the_protocol_is_one_member_of_the_union():
    members = typing.get_args(Request)
    assert OPS == {cls.op for cls in members}
    assert len(OPS) == len(members)
    assert {type(r) for r in REQUESTS} == set(members)


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.id)
def test_each_request_round_trips_through_the_converter_and_the_wire(request_):
    unstructured = converter.unstructure(request_, unstructure_as=Request)
    assert unstructured["op"] == request_.op
    assert converter.structure(unstructured, Request) == request_
    assert parse_frame(orjson.dumps(unstructured).decode(), max_frame=MAX_FRAME) == request_


def test_unknown_fields_are_ignored_and_null_in_an_optional_field_is_absent():
    assert parse(
        {"op": "send", "id": "1", "to": "counter/a", "type": "add", "key": None, "later": [1]}
    ) == Send("1", "counter/a", "add")
    assert parse({"op": "hello", "id": "1", "protocol": None, "client": None}) == Hello("1")
    assert parse(
        {"op": "list", "id": "1", "kind": None, "status": None, "after": None, "limit": None}
    ) == ListActors("1")
    assert parse({"op": "subscribe", "id": "1", "actor": "*", "after": None}) == Subscribe("1", "*")


def test_an_unknown_op_is_refused_naming_the_ops_there_are_before_any_field():
    result = parse({"op": "launch", "id": "7", "to": 5})
    assert result == FrameError(
        "bad_request",
        "field 'op' has unknown op \"launch\" (a string); known: approvals, dead_letters, "
        "delete, hello, inspect, list, nodes, output, pause, ping, requeue, resume, send, "
        "set_state, spawn, state, step, stop, subscribe, unsubscribe",
        "7",
        "launch",
    )


BAD_FIELDS = [
    # send
    ({"op": "send", "id": "1", "type": "add"}, "field 'to' is missing: it must be a string"),
    ({"op": "send", "id": "1", "to": None, "type": "add"},
     "field 'to' is missing: it must be a string"),
    ({"op": "send", "id": "1", "to": 5, "type": "add"},
     "field 'to' must be a non-empty string, got 5 (a number)"),
    ({"op": "send", "id": "1", "to": "nobody", "type": "add"},
     "field 'to' must be an address KIND/NAME (e.g. 'session/s1'), got \"nobody\" (a string)"),
    ({"op": "send", "id": "1", "to": "counter/a"}, "field 'type' is missing: it must be a string"),
    ({"op": "send", "id": "1", "to": "counter/a", "type": ""},
     "field 'type' must be a non-empty string, got \"\" (a string)"),
    ({"op": "send", "id": "1", "to": "counter/a", "type": "t" * 129},
     "field 'type' must be at most 128 characters, got 129"),
    ({"op": "send", "id": "1", "to": "counter/a", "type": "add", "key": 7},
     "field 'key' must be a non-empty string, got 7 (a number)"),
    ({"op": "send", "id": "1", "to": "counter/a", "type": "add", "key": "k\x07"},
     "field 'key' must not hold control characters or lone surrogates, got '\\x07' at index 1"),
    # spawn
    ({"op": "spawn", "id": "1"}, "field 'kind' is missing: it must be a string"),
    ({"op": "spawn", "id": "1", "kind": "Bad Kind"},
     "field 'kind' must be a kind matching [a-z][a-z0-9_-]{0,31}, got \"Bad Kind\" (a string)"),
    ({"op": "spawn", "id": "1", "kind": "keeper", "name": "no/slash"},
     "field 'name' must be a name matching [A-Za-z0-9][A-Za-z0-9._-]{0,127}, got "
     "\"no/slash\" (a string)"),
    ({"op": "spawn", "id": "1", "kind": "keeper", "name": False},
     "field 'name' must be a non-empty string, got false (a boolean)"),
    # subscribe
    ({"op": "subscribe", "id": "1"}, "field 'actor' is missing: it must be a string"),
    ({"op": "subscribe", "id": "1", "actor": "Counter/*"},
     "field 'actor' must be an address KIND/NAME or a pattern KIND/* or *, got "
     "\"Counter/*\" (a string)"),
    ({"op": "subscribe", "id": "1", "actor": "counter"},
     "field 'actor' must be an address KIND/NAME (e.g. 'session/s1'), got \"counter\" (a string)"),
    ({"op": "subscribe", "id": "1", "actor": "counter/a", "after": -1},
     "field 'after' must be an integer >= 0 (an event seq), got -1 (a number)"),
    ({"op": "subscribe", "id": "1", "actor": "counter/a", "after": True},
     "field 'after' must be an integer >= 0 (an event seq), got true (a boolean)"),
    ({"op": "subscribe", "id": "1", "actor": "counter/a", "after": 2**63},
     "field 'after' must be an integer >= 0 (an event seq), got 9223372036854775808 (a number)"),
    ({"op": "subscribe", "id": "1", "actor": "counter/a", "after": 1.0},
     "field 'after' must be an integer >= 0 (an event seq), got 1.0 (a number)"),
    ({"op": "subscribe", "id": "1", "actor": "counter/*", "after": 3},
     "field 'after' cannot be used with the pattern 'counter/*': patterns are live only; "
     "subscribe to one actor's address to replay its events"),
    # unsubscribe, inspect, stop
    ({"op": "unsubscribe", "id": "1"}, "field 'sub' is missing: it must be a string"),
    ({"op": "unsubscribe", "id": "1", "sub": ""},
     "field 'sub' must be a non-empty string, got \"\" (a string)"),
    ({"op": "inspect", "id": "1", "actor": ["counter/a"]},
     "field 'actor' must be a non-empty string, got [\"counter/a\"] (an array)"),
    ({"op": "stop", "id": "1"}, "field 'actor' is missing: it must be a string"),
    ({"op": "stop", "id": "1", "actor": "job/"},
     "field 'actor' must be an address KIND/NAME (e.g. 'session/s1'), got \"job/\" (a string)"),
    # list
    ({"op": "list", "id": "1", "kind": 3},
     "field 'kind' must be a non-empty string, got 3 (a number)"),
    ({"op": "list", "id": "1", "status": {}},
     "field 'status' must be a non-empty string, got {} (an object)"),
    ({"op": "list", "id": "1", "after": 7},
     "field 'after' must be a non-empty string, got 7 (a number)"),
    ({"op": "list", "id": "1", "limit": 0},
     "field 'limit' must be an integer >= 1 (actors in one reply), got 0 (a number)"),
    ({"op": "list", "id": "1", "limit": "10"},
     "field 'limit' must be an integer >= 1 (actors in one reply), got \"10\" (a string)"),
    # the operator's ops, and send's wait
    ({"op": "send", "id": "1", "to": "counter/a", "type": "add", "wait": "yes"},
     "field 'wait' must be true or false, got \"yes\" (a string)"),
    ({"op": "approvals", "id": "1", "actor": "session"},
     "field 'actor' must be an address KIND/NAME (e.g. 'session/s1'), got \"session\" (a string)"),
    ({"op": "dead_letters", "id": "1", "actor": 5},
     "field 'actor' must be a non-empty string, got 5 (a number)"),
    ({"op": "requeue", "id": "1"},
     "field 'dead_letter' is missing: it must be an integer >= 1 (a dead letter's id)"),
    ({"op": "requeue", "id": "1", "dead_letter": 0},
     "field 'dead_letter' must be an integer >= 1 (a dead letter's id), got 0 (a number)"),
    ({"op": "requeue", "id": "1", "dead_letter": "7"},
     "field 'dead_letter' must be an integer >= 1 (a dead letter's id), got \"7\" (a string)"),
    ({"op": "delete", "id": "1"}, "field 'actor' is missing: it must be a string"),
    # output
    ({"op": "output", "id": "1"}, "field 'job' is missing: it must be a string"),
    ({"op": "output", "id": "1", "job": "job/a", "after": -1},
     "field 'after' must be an integer >= 0 (a byte offset), got -1 (a number)"),
    ({"op": "output", "id": "1", "job": "job/a", "limit": 0},
     "field 'limit' must be an integer >= 1 (bytes in one reply), got 0 (a number)"),
    # hello
    ({"op": "hello", "id": "1", "protocol": "1"},
     "field 'protocol' must be an integer, got \"1\" (a string)"),
    ({"op": "hello", "id": "1", "protocol": True},
     "field 'protocol' must be an integer, got true (a boolean)"),
    ({"op": "hello", "id": "1", "protocol": 2},
     "field 'protocol' asks for version 2; this server speaks 1"),
    ({"op": "hello", "id": "1", "client": 2},
     "field 'client' must be a non-empty string, got 2 (a number)"),
    ({"op": "hello", "id": "1", "token": ""},
     "field 'token' must be a non-empty string, got \"\" (a string)"),
]  # fmt: skip


@pytest.mark.parametrize(("frame", "message"), BAD_FIELDS)
def test_each_bad_field_is_refused_with_a_message_naming_it(frame, message):
    result = parse(frame)
    assert result == FrameError("bad_request", message, frame["id"], frame["op"])


def test_of_several_bad_fields_the_first_in_the_requests_order_is_named():
    frame = {"op": "send", "id": "1", "to": 5, "type": "", "key": 7}
    assert refusal(frame).startswith("field 'to' ")
    assert refusal({**frame, "to": "counter/a"}).startswith("field 'type' ")
    assert refusal({**frame, "to": "counter/a", "type": "add"}).startswith("field 'key' ")


def test_the_envelope_is_checked_before_the_fields():
    # No id to answer to: the fields are not looked at, and the error echoes no id.
    assert parse({"op": "send", "to": 5}) == FrameError(
        "bad_request", "field 'id' is missing: every request carries a string id", None, "send"
    )
    assert refusal({"id": "1", "to": 5}) == (
        "field 'op' is missing: it must be a string naming the operation"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)  # fmt: skip
FIELDS = ["to", "type", "body", "key", "kind", "name", "spec", "actor", "after", "sub"]
FIELDS += ["status", "limit", "protocol", "client", "token"]


@settings(max_examples=300, deadline=None)
@given(
    op=st.sampled_from(sorted(OPS)) | json_values,
    fields=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5),
)
def test_any_object_parses_to_a_request_or_an_error_and_never_raises(op, fields):
    result = parse({"op": op, "id": "x", **fields})
    assert isinstance(result, (FrameError, *typing.get_args(Request)))
    if isinstance(result, FrameError):
        assert result.code == "bad_request"
        assert result.message.startswith("field '")
        assert result.id == "x"
    else:
        assert result.op == op and result.id == "x"


def _by_the_converter(obj: dict[str, Any]) -> Request | FrameError:
    try:
        return structure_request(obj)
    except FieldRefused as exc:
        return FrameError("bad_request", str(exc), obj["id"], obj["op"])


_ADDRESSES = ["counter/a", "session/s-1.x", "a/b/c", "/a", "a/", "Counter/a", "a b/c", "", 5]
_TYPES = ["add", "", "a\x00b", "x" * 300, "\u00a0", 3, True]
_WAITS = [True, False, None, 0, 1, "yes"]


@settings(max_examples=400, deadline=None)
@given(
    fields=st.fixed_dictionaries(
        {},
        optional={
            "to": st.sampled_from(_ADDRESSES) | st.text(max_size=8) | json_values,
            "type": st.sampled_from(_TYPES) | st.text(max_size=8),
            "body": json_values,
            "key": st.none() | st.sampled_from(["k-1", "", "x" * 300, 7]) | st.text(max_size=8),
            "wait": st.sampled_from(_WAITS),
        },
    )
)
def test_a_send_parsed_the_quick_way_is_the_one_the_converter_makes(fields):
    # parse_frame takes a plainly valid send without the converter: whatever
    # the fields, the request (or the error) is the converter's.
    frame = {"op": "send", "id": "x", **fields}
    assert parse(frame) == _by_the_converter(frame)
