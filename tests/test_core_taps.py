"""`Runtime.tap`: a hook that hears each committed event of the tapped types once,
right after its commit, with or without subscribers, and never a replay: not
a subscriber's replay, not the events a restarted runtime finds stored."""

from __future__ import annotations

import trio
from core_kinds import Counter

import callboard


async def test_a_tap_hears_each_committed_event_once_and_never_a_replay_or_a_restart(
    tmp_path, store_url
):
    heard: list[tuple[str, int | None, dict]] = []
    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=[Counter], store=store_url) as rt:
            rt.tap(["counted"], lambda e: heard.append((e.actor, e.seq, e.data)))
            for i in range(3):  # no one subscribes: the events are built for the tap
                ack = await rt.send("counter/a", "add", {"id": f"m{i}"})
            await rt.wait_handled("counter/a", ack.seq)
            async with rt.subscribe("counter/a", after=0) as replay:
                async for event in replay:  # reads the stored events again
                    if event.type == "counted" and event.data["id"] == "m2":
                        break
        first_life = list(heard)
        async with callboard.open_runtime(tmp_path, kinds=[Counter], store=store_url) as rt:
            rt.tap(["counted"], lambda e: heard.append((e.actor, e.seq, e.data)))
            ack = await rt.send("counter/a", "add", {"id": "m3"})
            await rt.wait_handled("counter/a", ack.seq)
    ids = [data["id"] for _, _, data in heard]
    assert [data["id"] for _, _, data in first_life] == ["m0", "m1", "m2"]
    assert ids == ["m0", "m1", "m2", "m3"]
    assert all(actor == "counter/a" and seq is not None for actor, seq, _ in heard)


async def test_a_tap_that_raises_is_logged_and_the_commit_stands(tmp_path, store_url, caplog):
    def broken(event: callboard.Event) -> None:
        raise RuntimeError("the tap has a bug")

    with trio.fail_after(20):
        async with callboard.open_runtime(tmp_path, kinds=[Counter], store=store_url) as rt:
            rt.tap(["counted"], broken)
            ack = await rt.send("counter/a", "add", {"id": "m0"})
            await rt.wait_handled("counter/a", ack.seq)
            view = await rt.inspect("counter/a")
    assert view.state["seen"] == ["m0"]
    assert view.restarts == 0
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        "a tap of counted events failed on counter/a"
    ]
