"""Persist before ack, under real SIGKILLs of a real runtime process."""

from __future__ import annotations

import random
import re

import trio
from child import Child
from core_kinds import Brittle, Counter

import callboard

ACK = re.compile(r"^ack (\S+) (\d+) (\d+)$")
SENDERS, ACTORS = 8, 5


async def _kill_after_random_acks(
    data: str, cycle: str, acks: int, store: str | None
) -> dict[str, dict[int, int]]:
    child = await Child.start(["send", data, cycle, str(SENDERS), str(ACTORS)], store=store)
    try:
        await child.wait_for_line("ready")
        seen = 0
        while seen < acks and (line := await child.readline()) is not None:
            seen += line.startswith("ack ")
    finally:
        await child.kill()
    acked: dict[str, dict[int, int]] = {}
    for line in child.lines:
        if match := ACK.match(line):
            acked.setdefault(match[1], {})[int(match[2])] = int(match[3])
    return acked


async def test_every_acknowledged_message_survives_sigkill_and_is_applied_exactly_once(
    tmp_path, request, store_url
):
    cycles = 150 if request.config.getoption("--longrun") else 4
    rng = random.Random()
    data = str(tmp_path / "data")
    acked: dict[str, dict[int, int]] = {}
    with trio.fail_after(60 + cycles * 10):
        for cycle in range(cycles):
            acked.update(
                await _kill_after_random_acks(data, f"c{cycle}", rng.randint(1, 400), store_url)
            )
        async with callboard.open_runtime(data, kinds=[Counter, Brittle], store=store_url) as rt:
            applied: dict[str, list[str]] = {}
            for n in range(ACTORS):
                address = f"counter/a{n}"
                view = await rt.inspect(address)
                await rt.wait_handled(address, view.cursor + view.mailbox)
                applied[address] = (await rt.inspect(address)).state["seen"]

            assert await rt.dead_letters() == [], "a message was set aside instead of applied"
            everything = [msg_id for seen in applied.values() for msg_id in seen]
            assert len(everything) == len(set(everything)), "a message was applied twice"
            for sender, numbers in acked.items():
                for n, seq in numbers.items():
                    address = f"counter/a{(int(sender.rsplit('s', 1)[1]) + n) % ACTORS}"
                    assert f"{sender}-{n}" in applied[address]
                    # The same key again, after the crash: the first ack, not delivered again.
                    again = await rt.send(
                        address, "add", {"id": f"{sender}-{n}"}, key=f"{sender}-{n}"
                    )
                    assert again == callboard.Ack(seq, duplicate=True)
            for address, seen in applied.items():
                for sender in acked:
                    mine = [int(m.rsplit("-", 1)[1]) for m in seen if m.startswith(f"{sender}-")]
                    assert mine == sorted(mine), f"{sender}'s messages to {address} out of order"
            assert sum(len(s) for s in applied.values()) == len(everything)
            assert sum(len(v) for v in acked.values()) > 0
    told = sum(len(v) for v in acked.values())
    print(f"SIGKILL at random: {cycles} kills, {told} acked, 0 lost, 0 applied twice")


async def test_a_message_that_kills_the_process_is_dead_lettered_after_three_deaths(
    tmp_path, store_url
):
    data = str(tmp_path / "data")
    deaths = 0
    with trio.fail_after(60):
        child = await Child.start(["poison", data], store=store_url)
        while await child.wait() == 17:
            deaths += 1
            child = await Child.start(["drain", data], store=store_url)
        assert child.process.returncode == 0 and child.lines[-1] == "idle"
        async with callboard.open_runtime(data, kinds=[Counter, Brittle], store=store_url) as rt:
            [dead] = await rt.dead_letters("brittle/p")
            view = await rt.inspect("brittle/p")
    assert deaths == 3
    assert (dead.type, dead.seq, dead.attempts) == ("die", 1, 3)
    assert dead.error.type == "ProcessDied"
    assert view.state["handled"] == ["ok:{'n': 2}"]
    assert (view.cursor, view.mailbox) == (2, 0)
