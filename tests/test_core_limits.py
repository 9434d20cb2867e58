"""The limits at the door of the embedding API: `Runtime.send`, `Runtime.spawn`
and `Context.emit` refuse what a later stage could not carry, or would carry
changed, with the same limits and words as the gateway."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import callboard
from callboard.mailbox import MAX_DEPTH


def nest(depth: int, leaf: Any = "bottom") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


class Echo(callboard.Actor):
    """``echo`` emits its body as ``echoed``; ``dig`` emits data it nests ``depth`` deep."""

    kind = "echo"
    virtual = True
    supervision = callboard.Supervision(max_attempts=1, backoff_initial=0.001)

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        if message.type == "echo":
            ctx.emit("echoed", message.body)
        elif message.type == "dig":
            ctx.emit("dug", nest(message.body["depth"]))


DEPTH_REFUSED = (
    "nests arrays and objects deeper than 128 levels, the limit "
    "(callboard.mailbox.MAX_DEPTH); flatten it or send the deep part as a string"
)


async def _stored_events(rt: callboard.Runtime, address: str) -> list[callboard.Event]:
    events = []
    async with rt.subscribe(address, after=0) as subscription:
        head = await rt.head(address)
        async for event in subscription:
            events.append(event)
            if event.seq == head:
                return events
    raise AssertionError("the subscription ended")  # pragma: no cover


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 254])
async def test_a_body_nested_deeper_than_the_limit_is_refused_by_send_naming_it(
    store_url, tmp_path, depth
):
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as rt:
            with pytest.raises(callboard.BadMessage) as refused:
                await rt.send("echo/e", "echo", nest(depth))
            assert await rt.list() == []
    assert str(refused.value) == f"the body of 'echo' to 'echo/e' {DEPTH_REFUSED}"


async def test_a_spec_nested_deeper_than_the_limit_is_refused_by_spawn_naming_it(
    store_url, tmp_path
):
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as rt:
            with pytest.raises(callboard.BadMessage) as refused:
                await rt.spawn("echo", {"deep": nest(MAX_DEPTH)}, "e1")
            assert await rt.list() == []
    assert str(refused.value) == f"the spec for 'echo/e1' {DEPTH_REFUSED}"


async def test_the_deepest_body_allowed_goes_through_send_handling_emit_and_replay(
    store_url, tmp_path
):
    deepest = nest(MAX_DEPTH)
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as rt:
            async with rt.subscribe("echo/e") as live:
                ack = await rt.send("echo/e", "echo", deepest)
                await rt.wait_handled("echo/e", ack.seq)
                heard = [event async for event in _until(live, "echoed")]
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as reopened:
            replayed = await _stored_events(reopened, "echo/e")
    assert [(e.seq, e.type) for e in heard] == [(1, "actor.started"), (2, "echoed")]
    assert heard[-1].data == deepest
    assert [(e.seq, e.type) for e in replayed] == [(1, "actor.started"), (2, "echoed")]
    assert replayed[1].data == deepest


async def _until(subscription: callboard.runtime.Subscription, type: str) -> Any:
    async for event in subscription:
        yield event
        if event.type == type:
            return


async def test_event_data_deeper_than_the_limit_is_refused_by_emit_and_the_message_set_aside(
    store_url,
    tmp_path,
):
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as rt:
            ack = await rt.send("echo/e", "dig", {"depth": MAX_DEPTH + 1})
            await rt.wait_handled("echo/e", ack.seq)
            [dead] = await rt.dead_letters("echo/e")
            events = await _stored_events(rt, "echo/e")
    assert (dead.seq, dead.error.type) == (1, "BadMessage")
    assert dead.error.message == f"the data of event 'dug' from 'echo/e' {DEPTH_REFUSED}"
    assert "dug" not in [event.type for event in events]


@pytest.mark.parametrize(
    ("to", "type", "key", "error", "message"),
    [
        (
            "echo/e", "echo\x00", None, callboard.BadMessage,
            "the type of a message to 'echo/e' must not hold control characters or lone "
            "surrogates, got '\\x00' at index 4",
        ),
        (
            "echo/e", "t" * 129, None, callboard.BadMessage,
            "the type of a message to 'echo/e' must be at most 128 characters, got 129",
        ),
        (
            "echo/e", "echo", "k" * 1_000_000, callboard.BadMessage,
            "the idempotency key of a message to 'echo/e' must be at most 256 characters, "
            "got 1000000",
        ),
        (
            "echo/e", "echo", "k\x1b[2J", callboard.BadMessage,
            "the idempotency key of a message to 'echo/e' must not hold control characters "
            "or lone surrogates, got '\\x1b' at index 1",
        ),
        (
            "echo/e", "echo", "\ud800", callboard.BadMessage,
            "the idempotency key of a message to 'echo/e' must not hold control characters "
            "or lone surrogates, got '\\ud800' at index 0",
        ),
        (
            "echo/e\x00", "echo", None, callboard.BadAddress,
            "address 'echo/e\\x00' has name 'e\\x00', which does not match "
            "[A-Za-z0-9][A-Za-z0-9._-]{0,127}",
        ),
    ],
)  # fmt: skip
async def test_a_type_key_or_address_with_a_control_character_or_too_long_is_refused_by_send(
    store_url, tmp_path, to, type, key, error, message
):
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as rt:
            with pytest.raises(error) as refused:
                await rt.send(to, type, {}, key=key)
            assert await rt.list() == []
    assert str(refused.value) == message


async def test_a_type_and_a_key_at_their_limits_are_taken(store_url, tmp_path):
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as rt:
            first = await rt.send("echo/e", "t" * 128, {}, key="k" * 256)
            again = await rt.send("echo/e", "t" * 128, {}, key="k" * 256)
    assert (first, again) == (callboard.Ack(1), callboard.Ack(1, duplicate=True))


async def test_an_integer_outside_64_bits_is_refused_by_send_naming_where_it_is(
    store_url, tmp_path
):
    with trio.fail_after(5):
        async with callboard.open_runtime(tmp_path, kinds=[Echo], store=store_url) as rt:
            with pytest.raises(callboard.BadMessage) as refused:
                await rt.send("echo/e", "echo", {"n": [2**64 - 1, 2**64]})
            assert await rt.list() == []
    assert str(refused.value) == (
        "the body of 'echo' to 'echo/e' does not serialize to JSON: the value at /n/1 is the "
        "integer 18446744073709551616, outside the 64-bit range integers are kept in exactly "
        "(-9223372036854775808 to 18446744073709551615); send it as a string"
    )
