"""Session budgets: usage is charged from the model's ``usage`` in the commit of its
answer, a breach acts once by its policy (``pause``, ``ask``, ``fail``), and a
restart on the same data directory (after a clean close, or a SIGKILL of a
real child process, ``session_child.py``) neither charges twice nor acts again.
The scripted model answers every request with ``DEFAULT_USAGE`` (7 in, 5 out)
unless a reply says otherwise.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from scripted_model import ScriptedModel, hold, text, tool_call
from session_helpers import ADDRESS, KINDS, NAME, WRITE_NOTE, Watch, killed_at_exit, spec
from wires import WIRES

import callboard

NOTE_TWICE = tool_call("write_file", {"path": "again.txt", "content": "twice"})


def usage(state: dict[str, Any]) -> dict[str, Any]:
    return dict(state["budget"]["usage"])


async def test_a_paused_breach_waits_across_a_restart_and_a_raise_lets_the_turn_finish(
    data, workspace
):
    script = [WRITE_NOTE, text("written")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, max_tokens=12), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "write the note")
                exceeded = await Watch(sub).until("budget.exceeded")
        assert len(model.requests) == 1
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.resumed")
                held = (await rt.inspect(ADDRESS)).summary
                await rt.send(ADDRESS, "raise_budget", {"max_tokens": 100})
                raised = await watch.until("budget.raised")
                await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert exceeded.data == {
        "turn_id": "turn-1", "prompt_id": "p1", "limit": "max_tokens", "used": 12,
        "allowed": 12, "policy": "pause",
        "error": "budget exceeded: max_tokens is 12 and 12 was used",
    }  # fmt: skip
    assert watch.types().count("budget.exceeded") == 1, "acted once over both lives"
    assert held is not None and held["budget"]["breach"]["limit"] == "max_tokens"
    assert raised.data["limits"]["max_tokens"] == 100 and raised.data["by"] == "raise_budget"
    assert len(model.requests) == 2
    assert usage(view.state) == {
        "input_tokens": 14, "output_tokens": 10, "model_calls": 2, "tool_calls": 1, "cost": 0.0,
    }  # fmt: skip
    assert view.state["budget"]["breach"] is None


async def test_an_ask_breach_is_listed_as_an_approval_and_approving_grants_the_allowance_again(
    data, workspace
):
    script = [WRITE_NOTE, NOTE_TWICE, text("both written")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, max_model_calls=1, on_budget="ask")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await rt.send(ADDRESS, "prompt", "write two notes")
                await Watch(sub).until("budget.exceeded")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.resumed")
                waiting = await rt.approvals(ADDRESS)
                await rt.send(ADDRESS, "approve", {"call_id": "budget"})
                await watch.until("budget.raised")
                # One more model call was granted: the third asks again.
                await watch.until("budget.exceeded", 2)
                await rt.send(ADDRESS, "approve", {"call_id": "budget"})
                await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert [(a.call_id, a.tool, a.arguments) for a in waiting] == [
        ("budget", "raise_budget", {"limit": "max_model_calls", "used": 1, "allowed": 1})
    ]
    assert watch.types().count("budget.exceeded") == 2, "the first once, then the second raise"
    assert [e["limits"]["max_model_calls"] for e in watch.of("budget.raised")] == [2, 3]
    assert watch.of("approval.answered")[0]["call_id"] == "budget"
    assert len(model.requests) == 3
    assert usage(view.state)["model_calls"] == 3
    assert (workspace / "note.txt").read_text() == "once"


async def test_denying_an_ask_breach_fails_the_turn_with_the_budget_error(data, workspace):
    with ScriptedModel([WRITE_NOTE]) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, max_model_calls=1, on_budget="ask")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("budget.exceeded")
                await rt.send(ADDRESS, "approve", {"call_id": "budget", "approved": False})
                failed = await watch.until("turn.failed")
            left = await rt.approvals(ADDRESS)
    assert failed.data["error"] == (
        "budget exceeded: max_model_calls is 1 and 1 was used, and raising it was denied"
    )
    assert left == []
    assert len(model.requests) == 1


async def test_a_fail_breach_at_a_tool_call_ends_the_turn_once_and_answers_its_calls(
    data, workspace
):
    script = [WRITE_NOTE, NOTE_TWICE, text("never asked")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, max_tool_calls=1, on_budget="fail")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write two notes")
                failed = await watch.until("turn.failed")
            view = await rt.inspect(ADDRESS)
            conversation = await rt.read_log(ADDRESS, "conversation", 0, 100)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            after = await rt.inspect(ADDRESS)
    assert failed.data["error"] == "budget exceeded: max_tool_calls is 1 and 1 was used"
    assert after.state["budget"] == view.state["budget"], "a restart charges nothing more"
    assert after.state["active"] is None
    assert watch.types().count("budget.exceeded") == 1
    assert watch.types().count("tool.started") == 1
    assert not (workspace / "again.txt").exists()
    assert conversation[-1]["role"] == "tool", "the call that did not run is answered"
    assert view.state["active"] is None and view.state["budget"]["breach"] is None
    assert usage(view.state)["tool_calls"] == 1 and len(model.requests) == 2


async def test_max_cost_is_charged_at_the_spec_prices_in_the_answers_commit(data, workspace):
    prices = {"test-model": {"input": 0.5, "output": 2.0}}
    with ScriptedModel([text("one"), text("two")]) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, max_cost=13.5, prices=prices, on_budget="fail")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.completed")
                await rt.send(ADDRESS, "prompt", "second")
                failed = await watch.until("turn.failed")
            view = await rt.inspect(ADDRESS)
    # 7 in at 0.5 and 5 out at 2.0: 13.5 a call, all of the allowance after one.
    assert usage(view.state)["cost"] == 13.5
    assert failed.data["error"] == "budget exceeded: max_cost is 13.5 and 13.5 was used"
    assert len(model.requests) == 1


@pytest.mark.parametrize("wire", WIRES)
async def test_sigkill_after_a_model_answer_committed_charges_it_exactly_once(
    data, workspace, wire
):
    script = [WRITE_NOTE, hold(), text("written")]
    with ScriptedModel(script, wire=wire) as model, trio.fail_after(30):
        async with killed_at_exit(data, spec(model, workspace), "write the note") as child:
            await child.until_event("tool.finished")
            await model.wait_for_requests(2)
        assert child.process.returncode == -9
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                await Watch(sub).until("turn.completed")
            view = await rt.inspect(ADDRESS)
    # The held answer was cut off before any commit: only the two answers recorded count.
    assert len(model.requests) == 3
    assert usage(view.state) == {
        "input_tokens": 14, "output_tokens": 10, "model_calls": 2, "tool_calls": 1, "cost": 0.0,
    }  # fmt: skip


async def test_sigkill_while_a_breach_holds_the_turn_neither_charges_nor_acts_again(
    data, workspace
):
    script = [WRITE_NOTE, text("written")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, max_tokens=12)
        async with killed_at_exit(data, the_spec, "write the note") as child:
            await child.until_event("budget.exceeded")
        assert child.process.returncode == -9
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await watch.until("turn.resumed")
                before = usage((await rt.inspect(ADDRESS)).state)
                await rt.send(ADDRESS, "raise_budget", {"max_tokens": 24})
                await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert before == {
        "input_tokens": 7, "output_tokens": 5, "model_calls": 1, "tool_calls": 1, "cost": 0.0,
    }  # fmt: skip
    assert watch.types().count("budget.exceeded") == 1
    assert watch.types().count("tool.started") == 1
    assert usage(view.state)["input_tokens"] == 14 and usage(view.state)["output_tokens"] == 10
    assert len(model.requests) == 2


async def test_a_turn_cancelled_while_held_takes_its_breach_and_the_next_turn_announces_its_own(
    data, workspace
):
    with ScriptedModel([text("one")]) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, max_model_calls=1)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.completed")
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("budget.exceeded")
                await rt.send(ADDRESS, "cancel")
                await watch.until("turn.cancelled")
                cleared = (await rt.inspect(ADDRESS)).state["budget"]["breach"]
                await rt.send(ADDRESS, "prompt", "third")
                await watch.until("budget.exceeded", 2)
    assert cleared is None
    assert [e["turn_id"] for e in watch.of("budget.exceeded")] == ["turn-2", "turn-3"]
    assert len(model.requests) == 1


async def test_sigkill_right_after_the_answers_commit_charges_it_once_and_the_tool_once(
    data, workspace
):
    with ScriptedModel([WRITE_NOTE, text("written")]) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, approvals="ask")
        async with killed_at_exit(data, the_spec, "write the note") as child:
            # Killed once the answer is durable, before its tool call could run.
            await child.until_event("assistant.message")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                asked = await watch.until("approval.requested")
                charged = usage((await rt.inspect(ADDRESS)).state)
                await rt.send(ADDRESS, "approve", {"call_id": asked.data["call_id"]})
                await watch.until("turn.completed")
            view = await rt.inspect(ADDRESS)
    assert charged == {
        "input_tokens": 7, "output_tokens": 5, "model_calls": 1, "tool_calls": 0, "cost": 0.0,
    }  # fmt: skip
    assert usage(view.state) == {
        "input_tokens": 14, "output_tokens": 10, "model_calls": 2, "tool_calls": 1, "cost": 0.0,
    }  # fmt: skip
    assert len(model.requests) == 2
    assert (workspace / "note.txt").read_text() == "once"


async def test_the_summarising_call_of_a_compaction_is_charged_once_in_the_checkpoints_commit(
    data, workspace
):
    def reported(prompt_tokens: int) -> dict[str, int]:
        return {"prompt_tokens": prompt_tokens, "completion_tokens": 1}

    script = [
        text("one", usage=reported(50)),
        text("two", usage=reported(90)),
        text("the user said first; the agent answered one"),  # the summary: 7 in, 5 out
        text("three", usage=reported(40)),
    ]
    with ScriptedModel(script) as model, trio.fail_after(30):
        # The third turn's estimate passes the window: it compacts before asking.
        the_spec = spec(model, workspace, context_window=100, keep_turns=1, max_tokens=1000)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                for count, prompt in enumerate(["first", "second", "third"], 1):
                    await rt.send(ADDRESS, "prompt", prompt)
                    await watch.until("turn.completed", count)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            view = await rt.inspect(ADDRESS)
    assert watch.types().count("conversation.compacted") == 1
    assert len(model.requests) == 4
    assert usage(view.state) == {
        "input_tokens": 50 + 90 + 7 + 40, "output_tokens": 1 + 1 + 5 + 1, "model_calls": 4,
        "tool_calls": 0, "cost": 0.0,
    }  # fmt: skip


async def test_a_steer_into_a_turn_a_budget_holds_reaches_the_model_once_after_the_raise(
    data, workspace
):
    steered = "and keep it short"
    with ScriptedModel([WRITE_NOTE, text("written, briefly")]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, max_model_calls=1), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "write the note")
                await watch.until("budget.exceeded")
                await rt.send(ADDRESS, "prompt", {"text": steered, "mode": "steer"})
                await watch.until("steer.accepted")
                await rt.send(ADDRESS, "raise_budget", {"max_model_calls": 2})
                done = await watch.until("turn.completed")
    types = watch.types()
    assert done.data["answer"] == "written, briefly"
    assert types.count("turn.steered") == 1 and types.count("turn.started") == 1
    assert types.index("budget.raised") < types.index("turn.steered")
    assert len(model.requests) == 2
    last = model.requests[1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "user"]
    assert last[-1]["content"] == steered


async def test_an_interrupt_ends_a_turn_a_budget_holds_and_its_prompt_finds_the_limit_too(
    data, workspace
):
    with ScriptedModel([text("one")]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, max_model_calls=1), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.completed")
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("budget.exceeded")
                await rt.send(ADDRESS, "prompt", {"text": "third", "mode": "interrupt"})
                interrupted = await watch.until("turn.interrupted")
                again = await watch.until("budget.exceeded", 2)
    assert interrupted.data["turn_id"] == "turn-2" and interrupted.data["by"] == "p3"
    assert again.data["turn_id"] == "turn-3"
    assert len(model.requests) == 1


async def test_approving_an_ask_breach_for_the_session_is_rejected_and_changes_nothing(
    data, workspace
):
    with ScriptedModel([text("one")]) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, max_model_calls=1, on_budget="ask")
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.completed")
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("budget.exceeded")
                body = {"call_id": "budget", "approved": True, "scope": "session"}
                ack = await rt.send(ADDRESS, "approve", body)
                outcome = await rt.wait_outcome(ADDRESS, ack.seq)
            left = await rt.approvals(ADDRESS)
            view = await rt.inspect(ADDRESS)
    assert outcome.reason == (
        "'scope': 'session' allows a tool for the rest of the session, and the call 'budget' "
        "is no tool: each raise is answered by itself (or set the limits with raise_budget)"
    )
    assert [a.call_id for a in left] == ["budget"]
    assert view.state["budget"]["limits"]["max_model_calls"] == 1
    assert "budget.raised" not in watch.types()


async def test_a_session_a_budget_holds_is_listed_waiting_until_the_raise(data, workspace):
    with ScriptedModel([text("one"), text("two")]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace, max_model_calls=1), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.completed")
                await rt.send(ADDRESS, "prompt", "second")
                await watch.until("budget.exceeded")
                (held,) = await rt.list(kind="session")
                await rt.send(ADDRESS, "raise_budget", {"max_model_calls": 2})
                await watch.until("turn.completed", 2)
                (after,) = await rt.list(kind="session")
    assert held.status == "waiting"
    assert after.status in ("active", "idle")
