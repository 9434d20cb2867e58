"""The embedding API: sends, keys, order, spawn, stop, inspect, list and bad input."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
import trio
import trio.testing
from core_kinds import Counter
from store_backends import write_rows

import callboard


@attrs.define
class Conf:
    greeting: str
    times: int = 1


class Greeter(callboard.Actor):
    kind = "greeter"
    spec_type = Conf

    async def handle(self, ctx, message):
        ctx.emit("greeted", {"text": self.spec.greeting * self.spec.times})


class Gate(callboard.Actor):
    """Handles a message only when the test opens its gate."""

    kind = "gate"
    virtual = True
    gate: trio.Event
    entered: trio.Event

    async def handle(self, ctx, message):
        Gate.entered.set()
        ctx.emit("passed", {})
        self.state["passed"] = True
        await Gate.gate.wait()


class Relay(callboard.Actor):
    """Passes ``relay`` on to ``to`` as ``note``, with ``drop_if_stopped`` as asked."""

    kind = "relay"
    virtual = True

    async def handle(self, ctx, message):
        body = message.body
        ctx.send(body["to"], "note", {"n": 1, "id": "relayed"}, drop_if_stopped=body["drop"])
        ctx.emit("relayed", body)


KINDS = [Counter, Greeter, Gate, Relay]


async def test_a_send_returns_its_mailbox_position_once_durable_and_the_actor_applies_it(
    store_url, tmp_path
):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            first = await rt.send("counter/a", "add", {"n": 2, "id": "m1"})
            second = await rt.send("counter/a", "add", {"n": 3, "id": "m2"})
            await rt.wait_handled("counter/a", second.seq)
            view = await rt.inspect("counter/a")
    assert (first, second) == (callboard.Ack(1), callboard.Ack(2))
    assert view.state == {"total": 5, "seen": ["m1", "m2"]}
    assert (view.cursor, view.mailbox, view.restarts, view.last_error) == (2, 0, 0, None)


async def test_a_repeated_key_returns_the_first_ack_and_is_not_delivered_again(store_url, tmp_path):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            first = await rt.send("counter/a", "add", {"id": "m1"}, key="k1")
            again = await rt.send("counter/a", "add", {"id": "m1-again"}, key="k1")
            await rt.wait_handled("counter/a", first.seq)
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            after_restart = await rt.send("counter/a", "add", {"id": "m1-later"}, key="k1")
            other = await rt.send("counter/a", "add", {"id": "m2"}, key="k2")
            await rt.wait_handled("counter/a", other.seq)
            view = await rt.inspect("counter/a")
    assert first == callboard.Ack(1, duplicate=False)
    assert again == after_restart == callboard.Ack(1, duplicate=True)
    assert other == callboard.Ack(2, duplicate=False)
    assert view.state["seen"] == ["m1", "m2"]


async def test_messages_from_one_sender_are_handled_in_the_order_they_were_acknowledged(
    store_url, tmp_path
):
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:

            async def sender(name: str) -> None:
                for n in range(50):
                    await rt.send("counter/hot", "add", {"id": f"{name}-{n}"})

            async with trio.open_nursery() as nursery:
                for name in ("x", "y", "z"):
                    nursery.start_soon(sender, name)
            await rt.wait_handled("counter/hot", 150)
            seen = (await rt.inspect("counter/hot")).state["seen"]
    for name in ("x", "y", "z"):
        assert [m for m in seen if m.startswith(name)] == [f"{name}-{n}" for n in range(50)]


async def test_spawn_structures_the_spec_and_a_second_spawn_with_the_same_spec_existed(
    store_url, tmp_path
):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            address = await rt.spawn("greeter", {"greeting": "hi", "times": 2}, name="g1")
            again = await rt.spawn("greeter", {"greeting": "hi", "times": 2}, name="g1")
            with pytest.raises(callboard.SpawnConflict, match=r"^'greeter/g1' exists with a"):
                await rt.spawn("greeter", {"greeting": "yo"}, name="g1")
            with pytest.raises(callboard.BadRequest, match=r"greeting"):
                await rt.spawn("greeter", {"times": 2}, name="g2")
            generated = await rt.spawn("greeter", {"greeting": "hey"})
            async with rt.subscribe("greeter/g1", after=0) as events:
                await rt.send("greeter/g1", "greet")
                async for event in events:
                    if event.type == "greeted":
                        break
    assert (address, address.existed, again.existed) == ("greeter/g1", False, True)
    assert event.data == {"text": "hihi"}
    assert generated.kind == "greeter" and len(generated.name) == 26


async def test_stop_ends_an_actor_and_later_sends_are_refused(store_url, tmp_path):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.spawn("greeter", {"greeting": "hi"}, name="g")
            assert await rt.stop("greeter/g") == "stopped"
            with pytest.raises(callboard.ActorStopped, match=r"^'greeter/g' is stopped"):
                await rt.send("greeter/g", "greet")
            [info] = await rt.list(kind="greeter")
            events = [e.type async for e in _stored(rt, "greeter/g")]
    assert info == callboard.ActorInfo("greeter/g", "stopped", 0, 0)
    assert events == ["actor.started", "actor.stopped"]


async def test_a_send_to_a_stopped_actor_is_dead_lettered_unless_asked_to_be_dropped(
    store_url, tmp_path
):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            await rt.spawn("greeter", {"greeting": "hi"}, name="g")
            await rt.stop("greeter/g")
            for to, drop in (("greeter/g", True), ("greeter/g", False), ("greeter/none", True)):
                ack = await rt.send("relay/r", "relay", {"to": to, "drop": drop})
                await rt.wait_handled("relay/r", ack.seq)
            live = await rt.send("relay/r", "relay", {"to": "counter/c", "drop": True})
            await rt.wait_handled("relay/r", live.seq)
            await rt.wait_handled("counter/c", 1)
            dead = await rt.dead_letters()
            counter = await rt.inspect("counter/c")
    assert [(d.actor, d.type, d.sender, d.error.type) for d in dead] == [
        ("greeter/g", "note", "relay/r", "ActorStopped"),
        ("greeter/none", "note", "relay/r", "UnknownActor"),  # only a stopped one is dropped
    ]
    assert counter.state == {"total": 1, "seen": ["relayed"]}


async def _stored(rt, address):
    async with rt.subscribe(address, after=0) as events:
        head = await rt.head(address)
        async for event in events:
            yield event
            if event.seq == head:
                return


async def test_bad_input_raises_an_error_that_names_it_and_loses_nothing(store_url, tmp_path):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            kept = await rt.send("counter/a", "add", {"id": "kept"})
            with pytest.raises(callboard.UnknownKind, match=r"^there is no actor kind 'nope'"):
                await rt.send("nope/a", "add", {})
            with pytest.raises(callboard.BadAddress, match=r"has no '/'"):
                await rt.send("counter", "add", {})
            with pytest.raises(callboard.BadAddress, match=r"name '\.bad'"):
                await rt.send("counter/.bad", "add", {})
            with pytest.raises(callboard.UnknownActor, match=r"^there is no actor at 'greeter/x'"):
                await rt.send("greeter/x", "greet")
            with pytest.raises(callboard.BadMessage, match=r"^the body of 'add' to 'counter/a'"):
                await rt.send("counter/a", "add", {"when": object()})
            with pytest.raises(callboard.UnknownActor):
                await rt.inspect("greeter/x")
            await rt.wait_handled("counter/a", kept.seq)
            view = await rt.inspect("counter/a")
    assert view.state["seen"] == ["kept"] and view.cursor == 1


@attrs.define
class Strict:
    count: int = 0


class StrictCounter(callboard.Actor):
    kind = "counter"
    state_type = Strict
    virtual = True

    async def handle(self, ctx, message):
        self.state.count += 1


async def test_a_snapshot_that_does_not_structure_fails_the_actor_with_a_message_naming_it(
    store_url, tmp_path
):
    with trio.fail_after(10):
        async with callboard.open_runtime(tmp_path, kinds=[Counter], store=store_url) as rt:
            ack = await rt.send("counter/a", "add", {"id": "m1"})
            await rt.wait_handled("counter/a", ack.seq)
        # The same data directory, now with a state class the snapshot does not fit.
        write_rows(tmp_path, store_url, "UPDATE actors SET state = ?", (b'{"count": "many"}',))
        async with callboard.open_runtime(tmp_path, kinds=[StrictCounter], store=store_url) as rt:
            kept = await rt.send("counter/a", "add", {"id": "m2"})
            async with rt.subscribe("counter/a", after=0) as events:
                async for event in events:
                    if event.type == "actor.failed":
                        break
            view = await rt.inspect("counter/a")
    assert kept == callboard.Ack(2)
    assert view.status == "failed" and view.mailbox == 1
    assert view.last_error["type"] == "StateError"
    assert "'counter/a'" in view.last_error["message"]
    assert "$.count" in view.last_error["message"] or "count" in view.last_error["message"]


def _hold_the_commit_of(address: str, data: Path, store_url: str | None) -> Any:
    """A connection whose open transaction keeps the commit of ``address``
    from landing: SQLite's write lock, or on PostgreSQL the lock of the
    actor's ownership row, which the commit's fence must share."""
    if store_url is None:
        holder: Any = sqlite3.connect(data / "callboard.sqlite3", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
    else:
        holder = psycopg.connect(store_url)  # its first statement opens a transaction
        holder.execute(
            "SELECT 1 FROM callboard_ownership WHERE address = %s FOR UPDATE", (address,)
        ).fetchall()
    return holder


async def test_no_event_is_announced_before_its_commit_is_durable(tmp_path, store_url):
    Gate.gate, Gate.entered = trio.Event(), trio.Event()
    seen: list[str] = []

    async def consume(events) -> None:
        async for event in events:
            seen.append(event.type)

    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=KINDS, store=store_url) as rt:
            async with rt.subscribe("gate/g") as events, trio.open_nursery() as nursery:
                nursery.start_soon(consume, events)
                ack = await rt.send("gate/g", "go")
                await Gate.entered.wait()
                await trio.testing.wait_all_tasks_blocked()
                holder = _hold_the_commit_of("gate/g", tmp_path, store_url)
                Gate.gate.set()
                await trio.testing.wait_all_tasks_blocked()
                while_held = list(seen)
                # What the store holds meanwhile, read inside the holder's transaction.
                cursor = holder.execute(
                    "SELECT cursor FROM actors WHERE address = 'gate/g'"
                ).fetchone()[0]
                holder.rollback()
                holder.close()
                await rt.wait_handled("gate/g", ack.seq)
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
    assert while_held == ["actor.started"]
    assert cursor == 0
    assert seen == ["actor.started", "passed"]


@pytest.mark.parametrize("inbox_limit", [1, 3, 64])
async def test_many_senders_to_one_actor_are_handled_once_each_in_mailbox_order(
    store_url, tmp_path, inbox_limit
):
    # Acks wake their senders in any order, so messages reach the actor's
    # inbox out of order; it must still handle them by seq, each once.
    config = callboard.RuntimeConfig(inbox_limit=inbox_limit)
    seq_of: dict[str, int] = {}
    with trio.fail_after(60):
        async with callboard.open_runtime(
            tmp_path, kinds=[Counter], config=config, store=store_url
        ) as rt:

            async def sender(s: int) -> None:
                for j in range(10):
                    ident = f"s{s}-{j}"
                    seq_of[ident] = (await rt.send("counter/hot", "add", {"id": ident})).seq

            async with trio.open_nursery() as nursery:
                for s in range(32):
                    nursery.start_soon(sender, s)
            await rt.wait_handled("counter/hot", 320)
            seen = (await rt.inspect("counter/hot")).state["seen"]
    assert seen == sorted(seq_of, key=seq_of.__getitem__)
    assert sorted(seq_of.values()) == list(range(1, 321))


async def test_list_reads_every_page_and_filters_stored_and_active_statuses(store_url, tmp_path):
    with trio.fail_after(20):
        async with callboard.open_runtime(
            tmp_path, kinds=[Greeter, Counter], store=store_url
        ) as rt:
            for n in range(7):
                await rt.spawn("greeter", {"greeting": "hi"}, f"g{n}")
            await rt.stop("greeter/g2")
            await rt.stop("greeter/g5")
            first, after = await rt.list_page("greeter", limit=3)
            second, after_second = await rt.list_page("greeter", after=after, limit=3)
            active, after_active = await rt.list_page("greeter", "active", limit=4)
            stopped, after_stopped = await rt.list_page("greeter", "stopped", limit=1)
            everyone = await rt.list("greeter")
            with pytest.raises(callboard.BadRequest, match="limit >= 1, got 0"):
                await rt.list_page(limit=0)
    assert [i.actor for i in first] == ["greeter/g0", "greeter/g1", "greeter/g2"]
    assert (after, after_second) == ("greeter/g2", "greeter/g5")
    assert [(i.actor, i.status) for i in second] == [
        ("greeter/g3", "active"), ("greeter/g4", "active"), ("greeter/g5", "stopped"),
    ]  # fmt: skip
    assert ([i.actor for i in active], after_active) == (
        ["greeter/g0", "greeter/g1", "greeter/g3", "greeter/g4"], "greeter/g4"
    )  # fmt: skip
    assert ([i.actor for i in stopped], after_stopped) == (["greeter/g2"], "greeter/g2")
    assert [i.status for i in everyone] == ["active"] * 2 + ["stopped"] + ["active"] * 2 + [
        "stopped", "active"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("write_queue", 0, "RuntimeConfig.write_queue must be an integer >= 1, got 0"),
        ("inbox_limit", 2.5, "RuntimeConfig.inbox_limit must be an integer >= 1, got 2.5"),
        ("batch_max", True, "RuntimeConfig.batch_max must be an integer >= 1, got True"),
        ("replay_page", 0, "RuntimeConfig.replay_page must be an integer >= 1, got 0"),
        (
            "replay_page_bytes",
            "1M",
            "RuntimeConfig.replay_page_bytes must be an integer >= 1, got '1M'",
        ),
        ("passivate_after", -1, "RuntimeConfig.passivate_after must be seconds > 0, got -1"),
        ("key_window", "7d", "RuntimeConfig.key_window must be seconds > 0, got '7d'"),
    ],
)
def test_a_runtime_config_limit_that_makes_no_sense_is_refused_naming_it(field, value, message):
    with pytest.raises(ValueError) as refused:
        callboard.RuntimeConfig(**{field: value})
    assert str(refused.value) == message
