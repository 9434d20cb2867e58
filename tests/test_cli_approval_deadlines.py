"""``callboard approvals`` shows an approval's deadline, and ``callboard approve
--always`` allows the tool for the rest of the session: real ``callboard``
subprocesses against the real gateway, a session asking a scripted model on
loopback. Output and exit codes are exact.
"""

from __future__ import annotations

import json

import trio
from client_helpers import serving
from scripted_model import ScriptedModel, text, tool_call
from test_cli_operator import NOTE_ARGUMENTS, WRITE_NOTE, asked, cli, session_spec

from callboard.client import Client, connect
from callboard.mailbox import format_at

WRITE_B = tool_call("write_file", {"path": "b.txt", "content": "two"}, "call_2")


async def events_until(client: Client, address: str, type_: str, count: int) -> list[str]:
    """The durable event types of ``address`` from the first, up to the ``count``th ``type_``."""
    seen: list[str] = []
    async with client.subscribe(address, after=0) as events:
        async for event in events:
            if event.seq is not None:
                seen.append(event.type)
            if seen.count(type_) == count:
                return seen
    raise AssertionError("the subscription ended")


async def test_approvals_shows_the_deadline_and_approve_always_stops_the_tool_asking(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [WRITE_NOTE, text("written"), WRITE_B, text("two")]
    with trio.fail_after(40), ScriptedModel(script) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            the_spec = {**session_spec(model, workspace), "approval_timeout": 3600}
            await client.spawn("session", the_spec, name="s1")
            await asked(client, "session/s1")
            (pending,) = await client.approvals()
            listed = await cli("approvals", "--url", server.url)
            as_json = await cli("approvals", "session/s1", "--json", "--url", server.url)
            approved = await cli("approve", "session/s1", "--always", "--json", "--url", server.url)
            await events_until(client, "session/s1", "turn.completed", 1)
            await client.send("session/s1", "prompt", {"text": "write b"})
            types = await events_until(client, "session/s1", "turn.completed", 2)
    at = format_at(pending.requested_at)
    deadline = format_at(pending.deadline_at)
    assert pending.on_expiry == "deny"
    assert listed == (0, [
        "ACTOR       CALL    TOOL        REQUESTED                 "
        f"{'DEADLINE':<{len(deadline) + len(' then deny  ')}}ARGUMENTS",
        f"session/s1  call_1  write_file  {at}  {deadline} then deny  {NOTE_ARGUMENTS}",
    ], [])  # fmt: skip
    assert (as_json[0], [json.loads(line) for line in as_json[1]]) == (0, [{"approvals": [{
        "actor": "session/s1", "call_id": "call_1", "tool": "write_file",
        "arguments": {"path": "note.txt", "content": "once"}, "requested_at": at,
        "deadline_at": deadline, "on_expiry": "deny",
    }]}])  # fmt: skip
    assert (approved[0], json.loads(approved[1][0]), approved[2]) == (0, {
        "actor": "session/s1", "call_id": "call_1", "approved": True, "seq": 2,
        "scope": "session",
    }, [])  # fmt: skip
    assert types.count("approval.requested") == 1
    assert types.count("tool.started") == 2
    assert (workspace / "b.txt").read_text() == "two"


async def test_approve_always_prints_that_the_tool_is_allowed_for_the_session(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([WRITE_NOTE, text("written")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", session_spec(model, workspace), name="s1")
            await asked(client, "session/s1")
            listed = await cli("approvals", "--url", server.url)
            approved = await cli("approve", "session/s1", "call_1", "--always", "--url", server.url)
            await events_until(client, "session/s1", "turn.completed", 1)
    assert listed[1][0].split() == ["ACTOR", "CALL", "TOOL", "REQUESTED", "ARGUMENTS"]
    assert approved == (
        0, ["approved call_1 of session/s1, and its tool for the rest of the session"], []
    )  # fmt: skip


async def test_the_python_clients_approve_always_allows_the_tool_for_the_session(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([WRITE_NOTE, text("written")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", session_spec(model, workspace), name="s1")
            await asked(client, "session/s1")
            outcome = await client.approve("session/s1", always=True)
            await events_until(client, "session/s1", "turn.completed", 1)
            view = await client.inspect("session/s1")
    assert outcome.ok
    assert view.state["allowed_tools"] == ["write_file"]
