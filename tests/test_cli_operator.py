"""The operator's verbs (approvals, approve, deny, dead-letters, requeue, delete,
send --wait) as real ``callboard`` subprocesses against the real gateway, with
a session or a task asking a scripted model on loopback.

Output and exit codes are exact: what a script reading them relies on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import trio
from client_helpers import CALLBOARD, REPO, serving, subprocess_env
from scripted_model import ScriptedModel, text, tool_call

import callboard
from callboard.client import Client, connect
from callboard.mailbox import format_at

WRITE_NOTE = tool_call("write_file", {"path": "note.txt", "content": "once"}, "call_1")
NOTE_ARGUMENTS = '{"path":"note.txt","content":"once"}'


async def cli(*args: str, stdin: bytes = b"") -> tuple[int, list[str], list[str]]:
    done = await trio.run_process(
        [*CALLBOARD, *args],
        cwd=REPO,
        env=subprocess_env(CALLBOARD_HISTORY=os.devnull),
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return done.returncode, done.stdout.decode().splitlines(), done.stderr.decode().splitlines()


def session_spec(model: ScriptedModel, workspace: Path) -> dict[str, object]:
    return {"workspace": str(workspace), "base_url": model.base_url, "model": "m",
            "approvals": "ask"}  # fmt: skip


async def asked(client: Client, address: str, prompt_type: str = "prompt") -> dict[str, object]:
    """Prompt the session at ``address`` and return its ``approval.requested`` data."""
    async with client.subscribe(address, after=0) as events:
        await client.send(address, prompt_type, {"text": "write the note"})
        async for event in events:
            if event.type == "approval.requested":
                return event.data  # type: ignore[no-any-return]
    raise AssertionError("the subscription ended")


async def until(client: Client, address: str, type_: str) -> callboard.Event:
    async with client.subscribe(address, after=0) as events:
        async for event in events:
            if event.type == type_:
                return event
    raise AssertionError("the subscription ended")


async def test_approvals_lists_the_waiting_call_and_approve_runs_it_once(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([WRITE_NOTE, text("written")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", session_spec(model, workspace), name="s1")
            call = await asked(client, "session/s1")
            (pending,) = await server.rt.approvals()
            listed = await cli("approvals", "--url", server.url)
            as_json = await cli("approvals", "session/s1", "--json", "--url", server.url)
            approved = await cli("approve", "session/s1", "--url", server.url)
            await until(client, "session/s1", "turn.completed")
            after = await cli("approvals", "--url", server.url)
    at = format_at(pending.requested_at)
    assert listed == (0, [
        "ACTOR       CALL    TOOL        REQUESTED                 ARGUMENTS",
        f"session/s1  call_1  write_file  {at}  {NOTE_ARGUMENTS}",
    ], [])  # fmt: skip
    assert (as_json[0], [json.loads(line) for line in as_json[1]]) == (0, [{"approvals": [{
        "actor": "session/s1", "call_id": "call_1", "tool": "write_file",
        "arguments": {"path": "note.txt", "content": "once"}, "requested_at": at,
    }]}])  # fmt: skip
    assert call["call_id"] == "call_1"
    assert approved == (0, ["approved call_1 of session/s1"], [])
    assert after == (0, ["no approvals waiting"], [])
    assert (workspace / "note.txt").read_text() == "once"
    assert len(model.requests) == 2


async def test_deny_with_a_reason_tells_the_model_the_reason_in_the_tool_result(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([WRITE_NOTE, text("not writing")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", session_spec(model, workspace), name="s1")
            await asked(client, "session/s1")
            denied = await cli("deny", "session/s1", "call_1", "--reason", "use a branch",
                               "--url", server.url)  # fmt: skip
            answered = await until(client, "session/s1", "approval.answered")
            await until(client, "session/s1", "turn.completed")
    assert denied == (0, ["denied call_1 of session/s1"], [])
    assert answered.data == {"turn_id": "turn-1", "prompt_id": "p1", "call_id": "call_1",
                             "approved": False, "reason": "use a branch"}  # fmt: skip
    tool = model.requests[1]["messages"][-1]
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "denied: the user did not approve this write_file call. "
        "Their reason: use a branch",
    }
    assert not (workspace / "note.txt").exists()


async def test_an_answer_that_cannot_apply_exits_1_naming_what_waits(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([WRITE_NOTE, text("written")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", session_spec(model, workspace), name="s1")
            nothing = await cli("approve", "session/s1", "--url", server.url)
            raw = await cli("send", "session/s1", "approve", '{"approved": false}', "--wait",
                            "--url", server.url)  # fmt: skip
            await asked(client, "session/s1")
            wrong = await cli("deny", "session/s1", "call_9", "--url", server.url)
            still = await server.rt.approvals("session/s1")
    assert nothing == (1, [], ["callboard: no tool call is waiting for approval at session/s1"])
    # The wording an ``approve`` with no call_id got when nothing waited: "no tool call None".
    assert raw == (1, [], [
        "callboard: session/s1 did not apply message 1: no tool call is waiting for approval"
    ])  # fmt: skip
    assert wrong == (1, [], [
        "callboard: session/s1 did not apply message 3: no tool call 'call_9' is waiting "
        "for approval; waiting: 'call_1'"
    ])  # fmt: skip
    assert [p.call_id for p in still] == ["call_1"]


async def test_ls_shows_a_session_waiting_for_approval_as_waiting_until_it_is_answered(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([WRITE_NOTE, text("written")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", session_spec(model, workspace), name="s1")
            await asked(client, "session/s1")
            waiting = await cli("ls", "--url", server.url)
            only_waiting = await cli("ls", "--status", "waiting", "--url", server.url)
            none_active = await cli("ls", "--status", "active", "--url", server.url)
            await cli("approve", "session/s1", "--url", server.url)
            await until(client, "session/s1", "turn.completed")
            answered = await cli("ls", "--url", server.url)
    header = "ACTOR       STATUS   MAILBOX  RESTARTS"
    assert waiting == (0, [header, "session/s1  waiting  0        0"], [])
    assert only_waiting == waiting
    assert none_active == (0, ["no actors"], [])
    assert answered == (0, ["ACTOR       STATUS  MAILBOX  RESTARTS",
                            "session/s1  active  0        0"], [])  # fmt: skip


async def test_a_task_waiting_for_approval_is_listed_and_approved_like_a_session(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([WRITE_NOTE, text("done")]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            spec = callboard.RunSpec("write the note", base_url=model.base_url, model="m",
                                     approve="ask", workspace=str(workspace))  # fmt: skip
            handle = await client.tasks.spawn(spec, name="t1")
            await until(client, handle, "approval.requested")
            (pending,) = await server.rt.approvals()
            listed = await cli("approvals", "--url", server.url)
            approved = await cli("approve", "task/t1", "call_1", "--url", server.url)
            outcome = await client.tasks.wait(handle, timeout=30)
    at = format_at(pending.requested_at)
    assert listed == (0, [
        "ACTOR    CALL    TOOL        REQUESTED                 ARGUMENTS",
        f"task/t1  call_1  write_file  {at}  {NOTE_ARGUMENTS}",
    ], [])  # fmt: skip
    assert approved == (0, ["approved call_1 of task/t1"], [])
    assert isinstance(outcome, callboard.Settled)
    assert (workspace / "note.txt").read_text() == "once"


async def test_send_wait_says_handled_or_exits_1_with_the_rejection(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(40), ScriptedModel([]) as model:
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            await client.spawn("session", session_spec(model, workspace), name="s1")
            handled = await cli("send", "counter/a", "add", "--wait", "--url", server.url)
            as_json = await cli("send", "counter/a", "add", "--wait", "--json",
                                "--url", server.url)  # fmt: skip
            empty = await cli("send", "session/s1", "prompt", '{"text": " "}', "--wait",
                              "--url", server.url)  # fmt: skip
            unknown = await cli("send", "session/s1", "dance", "--wait", "--url", server.url)
            unwaited = await cli("send", "session/s1", "dance", "--url", server.url)
    assert handled == (0, ["sent to counter/a as seq 1 and handled"], [])
    assert (as_json[0], json.loads(as_json[1][0])) == (
        0, {"seq": 2, "duplicate": False, "outcome": "handled"}
    )  # fmt: skip
    assert empty == (1, [], [
        "callboard: session/s1 did not apply message 1: a prompt needs non-empty text: "
        "{'text': '...'}"
    ])  # fmt: skip
    assert unknown == (1, [], [
        "callboard: session/s1 did not apply message 2: a session does not handle 'dance' messages"
    ])  # fmt: skip
    assert unwaited == (0, ["sent to session/s1 as seq 3"], [])


async def test_a_dead_lettered_message_is_listed_requeued_and_send_wait_says_so(tmp_path):
    with trio.fail_after(60):
        async with serving(tmp_path) as server:
            # ``burst`` without ``n`` raises in the handler, every attempt.
            failed = await cli("send", "counter/c", "burst", "--wait", "--url", server.url)
            (letter,) = await server.rt.dead_letters()
            listed = await cli("dead-letters", "--url", server.url)
            only = await cli("dead-letters", "counter/other", "--url", server.url)
            as_json = await cli("dead-letters", "counter/c", "--json", "--url", server.url)
            requeued = await cli("requeue", str(letter.id), "--url", server.url)
            await server.rt.wait_handled("counter/c", 2)
            (again,) = await server.rt.dead_letters()
            missing = await cli("requeue", "99", "--url", server.url)
            usage = await cli("requeue", "seven", "--url", server.url)
    assert failed == (1, [], [
        "callboard: counter/c did not apply message 1: message 1 to counter/c went to the "
        "dead letters (id 1) after 3 attempts: 'n'"
    ])  # fmt: skip
    at = format_at(letter.at)
    assert listed == (0, [
        "ID  ACTOR      SEQ  TYPE   ATTEMPTS  AT                        ERROR",
        f"1   counter/c  1    burst  3         {at}  KeyError: 'n'",
    ], [])  # fmt: skip
    assert only == (0, ["no dead letters of counter/other"], [])
    (row,) = json.loads(as_json[1][0])["dead_letters"]
    assert {k: v for k, v in row.items() if k != "traceback"} == {
        "id": 1, "actor": "counter/c", "seq": 1, "type": "burst", "body": None,
        "error": "'n'", "error_type": "KeyError", "attempts": 3, "at": at,
        "sender": None, "key": None,
    }  # fmt: skip
    assert "KeyError" in row["traceback"]
    assert requeued == (0, ["requeued dead letter 1 as seq 2"], [])
    assert (again.seq, again.attempts) == (2, 3)
    assert missing == (1, [], [
        "callboard: there is no dead letter with id 99; dead_letters lists them"
    ])  # fmt: skip
    assert usage[0] == 2
    assert usage[2][-1] == (
        "callboard requeue: error: argument ID: must be a dead letter's id (a whole number "
        ">= 1, see dead-letters), got 'seven'"
    )


async def test_spawn_on_an_ended_actors_name_is_refused_until_it_is_deleted(tmp_path):
    with trio.fail_after(40):
        async with serving(tmp_path) as server, connect(server.url) as client:
            await client.spawn("box", name="b1")
            await client.send("box/b1", "put", {"item": 1})
            await client.spawn("box", name="live")
            await client.stop("box/b1")
            refused = await cli("spawn", "box", "--name", "b1", "--url", server.url)
            alive = await cli("delete", "box/live", "--url", server.url)
            deleted = await cli("delete", "box/b1", "--url", server.url)
            gone = await cli("delete", "box/b1", "--url", server.url)
            spawned = await cli("spawn", "box", "--name", "b1", "--url", server.url)
            view = await client.inspect("box/b1")
    assert refused == (1, [], [
        "callboard: 'box/b1' has ended (stopped) and takes no more messages; delete it first "
        "to reuse the name (callboard delete box/b1, or Runtime.delete), or pick another name"
    ])  # fmt: skip
    assert alive == (1, [], [
        "callboard: 'box/live' is active: only an actor that has ended (stopped, failed, or a "
        "task's or job's terminal) can be deleted; stop it first"
    ])  # fmt: skip
    assert deleted == (0, ["deleted box/b1"], [])
    assert gone == (1, [], ["callboard: there is no actor at 'box/b1'"])
    assert spawned == (0, ["box/b1 (spawned)"], [])
    assert (view.status, view.state, view.cursor, view.head) == ("active", {}, 0, 1)


async def test_the_repl_offers_the_operator_verbs(tmp_path):
    script = b"approvals\ndead-letters counter/c\nspawn box --name b1\nstop box/b1\n" \
             b"delete box/b1\nhelp approve\nquit\n"  # fmt: skip
    with trio.fail_after(40):
        async with serving(tmp_path) as server:
            code, out, err = await cli("repl", "--url", server.url, stdin=script)
    assert (code, err) == (0, [])
    assert out[:5] == [
        "no approvals waiting",
        "no dead letters of counter/c",
        "box/b1 (spawned)",
        "box/b1 stopped",
        "deleted box/b1",
    ]
    assert out[5] == "usage: approve [-h] [--reason TEXT] [--always] [--json] ADDRESS [CALL_ID]"
