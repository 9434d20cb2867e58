"""The operator's ops on the wire (docs/protocol.md, "Operator ops"): their
replies field for field, and what a scoped token may see and do with them.

A real gateway in this process with the agent's kinds, a session asking a
scripted model on loopback for approval, and raw websocket frames.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
from client_helpers import serving
from gateway_wire import Client, connect
from scripted_model import ScriptedModel, text, tool_call

import callboard
from callboard.client import connect as client_connect
from callboard.gateway import add_client_token
from callboard.mailbox import format_at

WRITE_NOTE = tool_call("write_file", {"path": "note.txt", "content": "once"}, "call_1")


async def waiting_session(client: Client, model: ScriptedModel, workspace: Path) -> None:
    """Spawn session/s1 and prompt it until it asks to approve ``call_1``."""
    spec = {"workspace": str(workspace), "base_url": model.base_url, "model": "m",
            "approvals": "ask"}  # fmt: skip
    await client.ok("spawn", kind="session", name="s1", spec=spec)
    sub = await client.ok("subscribe", actor="session/s1", after=0)
    await client.ok("send", to="session/s1", type="prompt", body={"text": "write the note"})
    while True:
        (event,) = await client.events(sub["sub"], 1)
        if event["type"] == "approval.requested":
            break
    await client.ok("unsubscribe", sub=sub["sub"])


async def test_the_operator_ops_answer_with_the_fields_the_protocol_gives(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(60), ScriptedModel([WRITE_NOTE, text("written")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await waiting_session(client, model, workspace)
            (pending,) = await server.rt.approvals()
            approvals = await client.ok("approvals")
            one = await client.ok("approvals", actor="session/s1")
            nobody = await client.request("approvals", actor="counter/none")
            denied = await client.ok("send", to="session/s1", type="approve", wait=True,
                                     body={"approved": False, "reason": "no"})  # fmt: skip
            again = await client.ok("send", to="session/s1", type="approve", wait=True,
                                    body={"call_id": "call_1"})  # fmt: skip
            crashed = await client.ok("send", to="counter/c", type="burst", wait=True)
            (letter,) = await server.rt.dead_letters()
            letters = await client.ok("dead_letters", actor="counter/c")
            requeued = await client.ok("requeue", dead_letter=letter.id)
            live = await client.request("delete", actor="counter/c")
            await client.ok("stop", actor="counter/c")
            deleted = await client.ok("delete", actor="counter/c")
            quiet = await client.ok("approvals", actor="session/s1")
    row = {"actor": "session/s1", "call_id": "call_1", "tool": "write_file",
           "arguments": {"path": "note.txt", "content": "once"},
           "requested_at": format_at(pending.requested_at)}  # fmt: skip
    assert approvals == one == {"approvals": [row]}
    assert (nobody["code"], nobody["message"]) == (
        "unknown_actor", "there is no actor at 'counter/none'"
    )  # fmt: skip
    assert denied == {"seq": 2, "duplicate": False, "outcome": "handled"}
    assert again == {
        "seq": 3, "duplicate": False, "outcome": "rejected",
        "reason": "no tool call 'call_1' is waiting for approval",
    }  # fmt: skip
    assert crashed == {
        "seq": 1, "duplicate": False, "outcome": "dead_lettered",
        "reason": "message 1 to counter/c went to the dead letters (id 1) after 3 attempts: 'n'",
    }  # fmt: skip
    (stored,) = letters["dead_letters"]
    assert stored.pop("traceback").startswith("Traceback (most recent call last)")
    assert stored == {
        "id": letter.id, "actor": "counter/c", "seq": 1, "type": "burst", "body": None,
        "error": "'n'", "error_type": "KeyError", "attempts": 3, "at": format_at(letter.at),
        "sender": None, "key": None,
    }  # fmt: skip
    assert requeued == {"actor": "counter/c", "seq": 2}
    assert (live["code"], live["error_type"]) == ("bad_request", "BadRequest")
    assert live["message"].startswith("'counter/c' is active: only an actor that has ended")
    assert deleted == {"actor": "counter/c"}
    assert quiet == {"approvals": []}


async def test_a_scoped_token_sees_only_its_own_approvals_and_dead_letters(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data = tmp_path / "data"
    viewer = add_client_token(data, "viewer", access="read", actors=["counter/*"])
    with trio.fail_after(60), ScriptedModel([WRITE_NOTE]) as model:
        async with serving(data) as server:
            async with connect(server.url) as operator:
                await waiting_session(operator, model, workspace)
                await operator.ok("send", to="counter/c", type="burst", wait=True)
                await operator.ok("send", to="session/s1", type="dance", wait=True)
            async with connect(server.url, token=viewer, header_token=viewer) as client:
                approvals = await client.ok("approvals")
                theirs = await client.request("approvals", actor="session/s1")
                letters = await client.ok("dead_letters")
                requeue = await client.request("requeue", dead_letter=1)
                delete = await client.request("delete", actor="counter/c")
                missing = await client.request("requeue", dead_letter=99)
    assert approvals == {"approvals": []}
    assert [d["actor"] for d in letters["dead_letters"]] == ["counter/c"]
    for refused, what in [(theirs, "read the approvals of 'session/s1'"),
                          (requeue, "requeue the dead letters of 'counter/c'"),
                          (delete, "delete 'counter/c'")]:  # fmt: skip
        assert (refused["code"], refused["message"]) == ("forbidden", (
            f"the token 'viewer' (read access to counter/*) may not {what}; "
            "ask the operator for a token that reaches it"
        ))  # fmt: skip
    assert (missing["code"], missing["message"]) == (
        "bad_request", "there is no dead letter with id 99; dead_letters lists them"
    )  # fmt: skip


async def test_the_python_client_returns_the_runtimes_own_types(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(60), ScriptedModel([WRITE_NOTE, text("not written")]) as model:
        async with serving(tmp_path / "data") as server, client_connect(server.url) as client:
            spec = callboard.RunSpec("write the note", base_url=model.base_url, model="m",
                                     approve="ask", workspace=str(workspace))  # fmt: skip
            handle = await client.tasks.spawn(spec, name="t1")
            async with client.subscribe(handle, after=0) as events:
                async for event in events:
                    if event.type == "approval.requested":
                        break
            remote, local = await client.approvals(), await server.rt.approvals()
            await client.tasks.approve(handle, approved=False, reason="not today")
            settled = await client.tasks.wait(handle, timeout=30)
            await client.send("counter/c", "burst")
            ack, outcome = await client.send_and_wait("counter/c", "add")
            (letter,) = await client.dead_letters()
            (held,) = await server.rt.dead_letters()
            requeued = await client.requeue(letter.id)
            await client.stop("counter/c")
            await client.delete("counter/c")
            gone = await server.rt.has_actor("counter/c")
    (pending,) = remote
    assert attrs.evolve(pending, requested_at=None) == attrs.evolve(local[0], requested_at=None)
    assert format_at(pending.requested_at) == format_at(local[0].requested_at)
    assert (pending.actor, pending.call_id, pending.tool) == ("task/t1", "call_1", "write_file")
    assert isinstance(settled, callboard.Settled)
    assert model.requests[1]["messages"][-1]["content"] == (
        "denied: the user did not approve this write_file call. Their reason: not today"
    )
    assert (ack.seq, outcome) == (2, callboard.MessageOutcome("handled"))
    assert attrs.evolve(letter, at=0.0) == attrs.evolve(held, at=0.0)
    assert isinstance(letter, callboard.DeadLetter)
    assert requeued.seq == 3
    assert gone is False
