"""A reasoning model's thinking in a session: streamed apart from the answer
(``turn.reasoning``, ephemeral), kept in ``assistant.message`` as ``reasoning``,
and never sent back to the model in the conversation. The stream is a recorded
DeepSeek one (``model_streams/deepseek-reasoner.sse``) served by the scripted
model on loopback."""

from __future__ import annotations

from pathlib import Path

import trio
from scripted_model import Raw, ScriptedModel, text
from session_helpers import ADDRESS, KINDS, NAME, Watch, occurrences, spec

import callboard
from callboard.cli._render import Printer

STREAM = (Path(__file__).parent / "model_streams" / "deepseek-reasoner.sse").read_bytes()
THOUGHT = "用户问好"
ANSWER = "你好世界"


async def test_a_reasoning_models_thinking_is_its_own_event_and_not_sent_back(data, workspace):
    with ScriptedModel([Raw(STREAM), text("again")]) as model, trio.fail_after(30):
        async with callboard.open_runtime(data, kinds=KINDS) as rt:
            await rt.spawn("session", spec(model, workspace), name=NAME)
            async with rt.subscribe(ADDRESS, after=0) as sub:
                watch = Watch(sub)
                await rt.send(ADDRESS, "prompt", "say hello")
                await watch.until("turn.completed")
                await rt.send(ADDRESS, "prompt", "and again")
                await watch.until("turn.completed", 2)
    streamed = [e for e in watch.seen if e.type == "turn.reasoning"]
    assert [(e.seq, e.data) for e in streamed] == [(None, {"turn_id": "turn-1", "text": THOUGHT})]
    first = watch.of("assistant.message")[0]
    assert (first["content"], first["reasoning"]) == (ANSWER, THOUGHT)
    assert "reasoning" not in watch.of("assistant.message")[1], "none given, none kept"
    assert occurrences(model.requests[1], ANSWER) == 1
    assert occurrences(model.requests[1], THOUGHT) == 0
    shown: list[str] = []
    printer = Printer(shown.append, everything=True)
    for event in streamed:
        printer.show(event)
    assert shown == [], "tail shows the answer, not the thinking a piece at a time"
