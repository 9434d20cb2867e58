"""Context compaction: a conversation that outgrows its model is summarised, not failed.

Against the scripted model on loopback, with real restarts on the same data
directory and a real child process SIGKILLed while the model summarises.
Each test asserts the exact messages of the request after the compaction:
the system prompt, the summary, the turns kept whole, the turn in flight.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from typing import Any

import pytest
import trio
from scripted_model import DEFAULT_USAGE, ScriptedModel, hold, status, text, tool_call
from serve_helpers import serve_env, serving
from session_helpers import ADDRESS, KINDS, NAME, Watch, killed_at_exit, spec

import callboard
from callboard.agent import (
    CHECKPOINT_TYPE,
    SUMMARY_HEADER,
    SUMMARY_INSTRUCTION,
    RunSpec,
    Settled,
    builtin_kinds,
)
from callboard.client import connect

SYSTEM = "Be brief."
SUMMARY = "The user said first; the agent answered one."
WINDOW = 100  # tokens: the scripted usage below puts the third turn over it

OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your "
        "messages resulted in 9000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}


def usage(prompt_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 1,
        "total_tokens": prompt_tokens + 1,
    }


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def system(content: str) -> dict[str, Any]:
    return {"role": "system", "content": content}


SUMMARY_MESSAGE = system(f"{SUMMARY_HEADER}\n\n{SUMMARY}")

SUMMARY_OF_THE_FIRST_TURN = [
    system(SUMMARY_INSTRUCTION),
    user("The conversation so far:\n\nUser: first\n\nAssistant: one"),
]


def estimate(reported: int, *added: dict[str, Any]) -> int:
    """What the turn estimates: the reported prompt tokens plus 4 bytes a token since."""
    return reported + math.ceil(len(json.dumps(list(added), separators=(",", ":"))) / 4)


def compacting_spec(model: ScriptedModel, workspace: Any, **overrides: Any) -> dict[str, Any]:
    return spec(model, workspace, system_prompt=SYSTEM, keep_turns=1, **overrides)


async def turn(rt: callboard.Runtime, watch: Watch, prompt: str, count: int) -> callboard.Event:
    await rt.send(ADDRESS, "prompt", prompt)
    return await watch.until("turn.completed", count)


async def conversation_log(rt: callboard.Runtime) -> list[Any]:
    return await rt.read_log(ADDRESS, "conversation")


async def test_a_conversation_over_its_context_window_sends_the_summary_and_the_recent_turns(
    data, workspace
):
    script = [
        text("one", usage=usage(50)),
        text("two", usage=usage(90)),
        text(SUMMARY),
        text("three", usage=usage(40)),
        text("four", usage=usage(60)),
    ]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn(
                "session", compacting_spec(model, workspace, context_window=WINDOW), name=NAME
            )
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await turn(rt, watch, "first", 1)
                await turn(rt, watch, "second", 2)
                third = await turn(rt, watch, "third", 3)
        # A new runtime on the same directory: the summary stands, and the size the
        # model reported is still known (no second compaction for a short fourth turn).
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await turn(rt, watch, "fourth", 4)
            logged = await conversation_log(rt)
    assert third.data["answer"] == "three"
    assert len(model.requests) == 5
    assert model.requests[2]["messages"] == SUMMARY_OF_THE_FIRST_TURN
    assert "tools" not in model.requests[2]
    assert model.requests[3]["messages"] == [
        system(SYSTEM), SUMMARY_MESSAGE, user("second"), assistant("two"), user("third"),
    ]  # fmt: skip
    assert model.requests[4]["messages"] == [
        system(SYSTEM), SUMMARY_MESSAGE, user("second"), assistant("two"), user("third"),
        assistant("three"), user("fourth"),
    ]  # fmt: skip
    (compacted,) = watch.of("conversation.compacted")
    assert compacted.pop("elapsed") >= 0
    assert compacted == {
        "turn_id": "turn-3",
        "prompt_id": "p3",
        "turns": 1,
        "kept_from": 2,
        "at": 5,
        "reason": "context_window",
        "estimated_tokens": estimate(90, assistant("two"), user("third")),
        "usage": DEFAULT_USAGE,
    }
    checkpoint = {
        "type": CHECKPOINT_TYPE, "summary": SUMMARY, "keep_from": 2, "turns": 1,
        "reason": "context_window",
    }  # fmt: skip
    assert logged == [
        user("first"), assistant("one"), user("second"), assistant("two"), user("third"),
        checkpoint, assistant("three"), user("fourth"), assistant("four"),
    ]  # fmt: skip


async def test_the_servers_context_overflow_mid_tool_round_compacts_and_retries_the_call_once(
    data, workspace
):
    note = tool_call("write_file", {"path": "note.txt", "content": "once"}, call_id="w1")
    script = [text("one"), text("two"), note, status(400, OVERFLOW), text(SUMMARY), text("done")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", compacting_spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await turn(rt, watch, "first", 1)
                await turn(rt, watch, "second", 2)
                done = await turn(rt, watch, "write the note", 3)
    assert done.data["answer"] == "done"
    assert (workspace / "note.txt").read_text() == "once"
    assert watch.types().count("tool.started") == 1
    assert watch.types().count("turn.failed") == 0
    assert len(model.requests) == 6
    assert model.requests[4]["messages"] == SUMMARY_OF_THE_FIRST_TURN
    # The turn in flight is kept whole: its prompt, the call and the call's result.
    call = {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "w1", "type": "function", "function": {
            "name": "write_file", "arguments": '{"path": "note.txt", "content": "once"}'}}],
    }  # fmt: skip
    result = {"role": "tool", "tool_call_id": "w1", "content": "created 'note.txt': 4 bytes"}
    assert model.requests[5]["messages"] == [
        system(SYSTEM), SUMMARY_MESSAGE, user("second"), assistant("two"),
        user("write the note"), call, result,
    ]  # fmt: skip
    assert model.requests[5]["messages"][2:] == model.requests[3]["messages"][3:]
    (compacted,) = watch.of("conversation.compacted")
    assert (compacted["turns"], compacted["reason"]) == (1, "context_overflow")
    assert compacted["estimated_tokens"] is None


async def test_on_the_anthropic_wire_a_prompt_too_long_compacts_and_the_summary_joins_the_system(
    data, workspace
):
    too_long = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 9000 tokens > 8192 maximum",
        },
    }
    script = [text("one"), text("two"), status(400, too_long), text(SUMMARY), text("three")]
    with ScriptedModel(script, wire="anthropic") as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", compacting_spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await turn(rt, watch, "first", 1)
                await turn(rt, watch, "second", 2)
                done = await turn(rt, watch, "third", 3)
    assert done.data["answer"] == "three"
    summarising = model.requests[3]
    assert [block["text"] for block in summarising["system"]] == [SUMMARY_INSTRUCTION]
    assert "tools" not in summarising
    assert model.chat_requests[3]["messages"][1:] == SUMMARY_OF_THE_FIRST_TURN[1:]
    retried = model.requests[4]
    assert [block["text"] for block in retried["system"]] == [SYSTEM, SUMMARY_MESSAGE["content"]]
    assert model.chat_requests[4]["messages"][1:] == [
        user("second"),
        assistant("two"),
        user("third"),
    ]
    assert watch.of("conversation.compacted")[0]["reason"] == "context_overflow"


async def test_a_second_compaction_summarises_the_first_summary_with_the_turns_after_it(
    data, workspace
):
    later = "The user said first and second; the agent answered one and two."
    script = [
        text("one"), text("two"), status(400, OVERFLOW), text(SUMMARY), text("three"),
        status(400, OVERFLOW), text(later), text("four"),
    ]  # fmt: skip
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", compacting_spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                for count, prompt in enumerate(["first", "second", "third", "fourth"], 1):
                    await turn(rt, watch, prompt, count)
    assert len(model.requests) == 8
    assert model.requests[6]["messages"] == [
        system(SUMMARY_INSTRUCTION),
        user(
            f"The conversation so far:\n\nSummary of what came before:\n{SUMMARY}"
            "\n\nUser: second\n\nAssistant: two"
        ),
    ]
    assert model.requests[7]["messages"] == [
        system(SYSTEM), system(f"{SUMMARY_HEADER}\n\n{later}"), user("third"),
        assistant("three"), user("fourth"),
    ]  # fmt: skip
    assert [(e["turns"], e["kept_from"], e["at"]) for e in watch.of("conversation.compacted")] == [
        (1, 2, 5),
        (1, 4, 8),
    ]


async def test_an_overflow_that_persists_after_compacting_fails_the_turn_without_a_second_one(
    data, workspace
):
    script = [text("one"), text("two"), status(400, OVERFLOW), text(SUMMARY), status(400, OVERFLOW)]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", compacting_spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await turn(rt, watch, "first", 1)
                await turn(rt, watch, "second", 2)
                await rt.send(ADDRESS, "prompt", "third")
                failed = await watch.until("turn.failed")
    assert len(model.requests) == 5
    assert watch.types().count("conversation.compacted") == 1
    assert failed.data["retryable"] is False
    assert "exceeds the context window" in failed.data["error"]


async def test_a_first_turn_that_overflows_alone_fails_with_nothing_to_summarise(data, workspace):
    with ScriptedModel([status(400, OVERFLOW)]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", compacting_spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "first")
                await watch.until("turn.failed")
            logged = await conversation_log(rt)
    assert len(model.requests) == 1
    assert "conversation.compacted" not in watch.types()
    assert logged == [user("first")]


async def test_sigkill_while_the_model_summarises_loses_nothing_and_compacts_once_after_restart(
    data, workspace
):
    script = [
        text("one", usage=usage(50)),
        text("two", usage=usage(90)),
        hold(),  # the summarising call, in flight when the child is killed
        text(SUMMARY),
        text("three"),
    ]
    with ScriptedModel(script) as model, trio.fail_after(60):
        the_spec = compacting_spec(model, workspace, context_window=WINDOW)
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await turn(rt, watch, "first", 1)
                await turn(rt, watch, "second", 2)
        async with killed_at_exit(data, the_spec, "third") as child:
            await child.until_event("turn.started")
            await model.wait_for_requests(3)
        assert child.process.returncode == -9
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                done = await watch.until("turn.completed", 3)
            logged = await conversation_log(rt)
    assert done.data["answer"] == "three"
    assert "conversation.compacted" not in child.events
    assert len(model.requests) == 5
    # Asked again from where it was: the same request, the same conversation.
    assert model.requests[2]["messages"] == SUMMARY_OF_THE_FIRST_TURN
    assert model.requests[3] == model.requests[2]
    assert model.requests[4]["messages"] == [
        system(SYSTEM), SUMMARY_MESSAGE, user("second"), assistant("two"), user("third"),
    ]  # fmt: skip
    assert watch.types().count("conversation.compacted") == 1
    assert watch.types().count("turn.started") == 3
    assert [item.get("role", item.get("type")) for item in logged] == [
        "user", "assistant", "user", "assistant", "user", CHECKPOINT_TYPE, "assistant",
    ]  # fmt: skip


async def test_the_runtimes_context_window_setting_applies_to_the_configured_model(data, workspace):
    script = [text("one", usage=usage(50)), text("two", usage=usage(90)), text(SUMMARY), text("3")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        settings = {"model_url": model.base_url, "model": "test-model", "context_window": WINDOW}
        async with callboard.open_runtime(data, kinds=KINDS, settings=settings) as rt:
            the_spec = {"workspace": str(workspace), "system_prompt": SYSTEM, "keep_turns": 1}
            await rt.spawn("session", {**the_spec, "approvals": "always"}, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                for count, prompt in enumerate(["first", "second", "third"], 1):
                    await turn(rt, watch, prompt, count)
    assert model.requests[2]["messages"] == SUMMARY_OF_THE_FIRST_TURN
    assert watch.of("conversation.compacted")[0]["reason"] == "context_window"


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"context_window": 0}, "'context_window' must be a positive number of tokens, got 0"),
        ({"keep_turns": -1}, "'keep_turns' must be a number of turns, 0 or more, got -1"),
    ],
    ids=["window", "keep"],
)
async def test_a_compaction_setting_out_of_range_is_refused_naming_the_field(
    data, workspace, fields, said
):
    with trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            with pytest.raises(callboard.BadRequest) as refused:
                await rt.spawn("session", {"workspace": str(workspace), **fields}, name=NAME)
    assert said in str(refused.value)


async def test_a_task_whose_follow_up_overflows_is_compacted_and_answers_it(data, workspace):
    released = threading.Event()

    def first(body: dict[str, Any]) -> Any:
        released.wait(20)  # until both messages are queued: the task must not settle first
        return text("one")

    script = [first, text("two"), status(400, OVERFLOW), text(SUMMARY), text("three")]
    with ScriptedModel(script) as model, trio.fail_after(30):
        async with callboard.open_runtime(
            data, kinds=builtin_kinds({"workspace": workspace})
        ) as rt:
            task_spec = RunSpec(
                "first", base_url=model.base_url, model="test-model", approve="always",
                system_prompt=SYSTEM, keep_turns=1,
            )  # fmt: skip
            handle = await rt.tasks.spawn(task_spec, name="t1")
            await rt.tasks.send(handle, "second")
            last = await rt.tasks.send(handle, "third")
            released.set()
            reply = await rt.tasks.wait_message(handle, last, timeout=20)
    assert isinstance(reply, Settled) and reply.record.result == "three"
    assert model.requests[3]["messages"] == SUMMARY_OF_THE_FIRST_TURN
    assert model.requests[4]["messages"] == [
        system(SYSTEM), SUMMARY_MESSAGE, user("second"), assistant("two"), user("third"),
    ]  # fmt: skip


async def test_serve_context_window_compacts_a_session_on_the_configured_model(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [text("one", usage=usage(50)), text("two", usage=usage(90)), text(SUMMARY), text("3")]
    with ScriptedModel(script) as model, trio.fail_after(60):
        extra = ["--model-url", model.base_url, "--model", "m", "--context-window", str(WINDOW),
                 "--sandbox", "none"]  # fmt: skip
        async with serving(tmp_path / "data", *extra, cwd=tmp_path) as served:
            async with connect(served.url, token=served.token) as client:
                the_spec = {"workspace": str(workspace), "system_prompt": SYSTEM, "keep_turns": 1}
                await client.spawn("session", the_spec, name=NAME)
                async with client.subscribe(ADDRESS, after=0) as events:
                    watch = Watch(events)
                    for count, prompt in enumerate(["first", "second", "third"], 1):
                        await client.send(ADDRESS, "prompt", {"text": prompt})
                        await watch.until("turn.completed", count)
    assert model.requests[2]["messages"] == SUMMARY_OF_THE_FIRST_TURN
    assert model.requests[3]["messages"][:2] == [system(SYSTEM), SUMMARY_MESSAGE]
    assert [e["turns"] for e in watch.of("conversation.compacted")] == [1]


async def test_serve_refuses_a_context_window_that_is_not_a_positive_number(tmp_path):
    command = [sys.executable, "-m", "callboard", "serve", "--data", str(tmp_path / "data"),
               "--context-window", "0"]  # fmt: skip
    with trio.fail_after(30):
        done = await trio.run_process(command, capture_stdout=True, capture_stderr=True,
                                      check=False, env=serve_env())  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[-1] == (
        "callboard serve: error: argument --context-window: must be a positive number of "
        "tokens, got '0'"
    )
