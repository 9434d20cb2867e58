"""A model outage during a compaction's summarising call parks the turn like any
other model call, and the retry compacts once and answers once."""

from __future__ import annotations

import trio
from scripted_model import ScriptedModel, status, text
from session_helpers import ADDRESS, NAME, Watch, spec

import callboard
from callboard.agent import SUMMARY_INSTRUCTION, builtin_kinds

FAST = {"model_call_attempts": 1, "outage_backoff_initial": 0.01, "outage_backoff_max": 0.05}
"""No backoff inside the client, and parked turns retried within hundredths of a second."""

DOWN = status(503, {"error": {"message": "upstream is restarting", "type": "server_error"}})


def usage(prompt_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": 1}


async def test_an_outage_while_the_model_summarises_parks_the_turn_and_it_compacts_once(
    data, workspace
):
    script = [
        text("one", usage=usage(50)),
        text("two", usage=usage(90)),
        DOWN,  # the summarising call of the third turn
        text("the user said first; the agent answered one"),
        text("three"),
    ]
    with ScriptedModel(script) as model, trio.fail_after(30):
        the_spec = spec(model, workspace, context_window=100, keep_turns=1)
        async with callboard.open_runtime(data, kinds=builtin_kinds(FAST)) as rt:
            await rt.spawn("session", the_spec, name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                for count, prompt in enumerate(["first", "second", "third"], 1):
                    await rt.send(ADDRESS, "prompt", prompt)
                    done = await watch.until("turn.completed", count)
            view = await rt.inspect(ADDRESS)
    (waited,) = watch.of("turn.waiting_for_model")
    assert waited["turn_id"] == "turn-3" and waited["status"] == 503
    assert "the conversation could not be compacted" in waited["error"]
    assert done.data["answer"] == "three"
    assert watch.types().count("conversation.compacted") == 1
    assert "turn.failed" not in watch.types()
    assert len(model.requests) == 5
    assert model.requests[2]["messages"][0]["content"] == SUMMARY_INSTRUCTION
    assert model.requests[3] == model.requests[2], "the same summarising request, asked again"
    assert view.state["budget"]["usage"]["model_calls"] == 4, "the failed ask charged nothing"
