"""A message to a settled task is refused by the store, atomically, on both sides.

Settling is one commit that also makes the task's actor final, and the
store refuses a message to a final actor (`ActorStopped`). So neither
`Tasks.send` nor `RemoteTasks.send` looks at the task before sending: the
order of their calls is recorded here, and the only read is the one after a
refusal that names the terminal. A view read just before the task settled
(stale, as any read before a send may be) changes nothing: `cancel` that
read it and sent anyway gets the terminal the store's refusal stands for.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest
import trio
from client_helpers import serving
from scripted_model import ScriptedModel, text
from task_helpers import MESSAGE, kinds_in, spec

import callboard
from callboard import ActorStopped, ActorView, Settled, Succeeded
from callboard.agent import Tasks
from callboard.client import connect

SETTLED = r"^task/\S+ has settled \(succeeded\) and takes no more messages; spawn a new task"


def settled(outcome: Any) -> Any:
    assert isinstance(outcome, Settled), outcome
    return outcome.record


def ready(released: threading.Event) -> Any:
    """The prompt's answer, held until ``released`` (so a message is queued first)."""

    def answer(body: dict[str, Any]) -> Any:
        released.wait(20)
        return text("ready")

    return answer


def seq_of(message_id: str) -> int:
    return int(message_id.removeprefix("msg-"))


def running(view: ActorView) -> ActorView:
    """``view`` as it was read before the task settled."""
    return attrs.evolve(view, status="active", state={**view.state, "terminal": None})


async def test_a_local_send_is_one_store_write_and_a_settled_task_refuses_it(
    data, workspace, monkeypatch
):
    calls: list[str] = []
    released = threading.Event()
    with ScriptedModel([ready(released), text("done")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            inspect, send = rt.inspect, rt.send

            async def inspecting(address: str) -> ActorView:
                calls.append("inspect")
                return await inspect(address)

            async def sending(*args: Any, **kwargs: Any) -> callboard.Ack:
                calls.append("send")
                return await send(*args, **kwargs)

            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            await model.wait_for_requests(1)
            monkeypatch.setattr(rt, "inspect", inspecting)
            monkeypatch.setattr(rt, "send", sending)
            message_id = await tasks.send(handle, MESSAGE, key="k")
            accepted, calls[:] = list(calls), []
            await rt.wait_handled(handle, seq_of(message_id))  # queued before the prompt ends
            released.set()
            reply = settled(await tasks.wait_message(handle, message_id, timeout=10))
            assert settled(await tasks.wait(handle, timeout=10)).terminal == Succeeded("done")
            calls.clear()
            with pytest.raises(ActorStopped, match=SETTLED):
                await tasks.send(handle, MESSAGE)
            refused, calls[:] = list(calls), []
            with pytest.raises(ActorStopped, match=SETTLED):
                await tasks.approve(handle, "call-1")
            # The key's first send was stored: repeating it is answered from the key.
            assert await tasks.send(handle, MESSAGE, key="k") == message_id
    assert accepted == ["send"]
    assert refused == ["send", "inspect"]  # the read only words the refusal
    assert reply.result == "done"


async def test_a_local_cancel_after_a_stale_read_returns_the_terminal_the_store_holds(
    data, workspace, monkeypatch
):
    with ScriptedModel([text("done")]) as model, trio.fail_after(20):
        async with callboard.open_runtime(data, kinds=kinds_in(workspace)) as rt:
            tasks = Tasks(rt)
            handle = await tasks.spawn(spec(model))
            settled(await tasks.wait(handle, timeout=10))
            inspect, stale = rt.inspect, [True]

            async def once_stale(address: str) -> ActorView:
                view = await inspect(address)
                if stale:
                    stale.clear()
                    return running(view)
                return view

            monkeypatch.setattr(rt, "inspect", once_stale)
            assert await tasks.cancel(handle) == Succeeded("done")
            assert not stale, "cancel read the task once, then sent"
            assert (await rt.inspect(handle)).status == "succeeded"
    assert len(model.requests) == 1


async def test_a_remote_send_is_one_request_and_a_settled_task_refuses_it(
    tmp_path, workspace, monkeypatch
):
    ops: list[str] = []
    released = threading.Event()
    with ScriptedModel([ready(released), text("done")]) as model, trio.fail_after(20):
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            request = client._request

            async def counted(op: str, fields: dict[str, Any], **kwargs: Any) -> Any:
                ops.append(op)
                return await request(op, fields, **kwargs)

            tasks = client.tasks
            handle = await tasks.spawn(spec(model, workspace=str(workspace)))
            await model.wait_for_requests(1)
            monkeypatch.setattr(client, "_request", counted)
            message_id = await tasks.send(handle, MESSAGE)
            accepted, ops[:] = list(ops), []
            assert server.rt is not None
            await server.rt.wait_handled(handle, seq_of(message_id))
            released.set()
            reply = settled(await tasks.wait_message(handle, message_id, timeout=10))
            assert settled(await tasks.wait(handle, timeout=10)).terminal == Succeeded("done")
            ops.clear()
            with pytest.raises(ActorStopped, match=SETTLED):
                await tasks.send(handle, MESSAGE)
            refused, ops[:] = list(ops), []
            with pytest.raises(ActorStopped, match=SETTLED):
                await tasks.approve(handle)
    assert accepted == ["send"]
    assert refused == ["send", "inspect"]  # the read only words the refusal
    assert reply.result == "done"


async def test_a_remote_cancel_after_a_stale_read_returns_the_terminal_the_store_holds(
    tmp_path, workspace, monkeypatch
):
    with ScriptedModel([text("done")]) as model, trio.fail_after(20):
        async with serving(tmp_path / "data") as server, connect(server.url) as client:
            tasks = client.tasks
            handle = await tasks.spawn(spec(model, workspace=str(workspace)))
            settled(await tasks.wait(handle, timeout=10))
            inspect, stale = client.inspect, [True]

            async def once_stale(address: str) -> ActorView:
                view = await inspect(address)
                if stale:
                    stale.clear()
                    return running(view)
                return view

            monkeypatch.setattr(client, "inspect", once_stale)
            assert await tasks.cancel(handle) == Succeeded("done")
            assert not stale, "cancel read the task once, then sent"
    assert len(model.requests) == 1
