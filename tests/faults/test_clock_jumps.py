"""The wall clock of a real runtime process jumps back and forward by hours (libfaketime).

The child (clock_child.py) runs under libfaketime, its wall clock offset by
whatever the test writes to a file it reads on every call; trio's monotonic
clock is left alone (``FAKETIME_DONT_FAKE_MONOTONIC``), as a real jump of the
wall clock (NTP, an operator) leaves it. The child arms durable timers, some
due in a moment and some hours ahead, and sends keyed messages; the test
jumps the clock back, then forward past some of the timers, then to now, and
restarts the child past the rest. No timer may ring before its due time by
the wall clock, none twice, none never; and a resend with the same key just
after any jump is a duplicate: no key is forgotten early.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
import trio
from clock_child import KINDS
from runner import Child, open_child

import callboard

CHILD = Path(__file__).parent / "clock_child.py"
LIBFAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), Path("libfaketime.so.1"))
HOUR = 3600.0
SOON = 0.2  # seconds: a timer that rings in real time, showing the timer service is awake
KEYS = 10

needs_faketime = pytest.mark.skipif(
    not LIBFAKETIME.exists() and not os.environ.get("CI"),
    reason="libfaketime is not installed here (CI installs it)",
)


def _set_offset(rc: Path, hours: float) -> None:
    """Move the child's wall clock to ``hours`` from the real time (at once: a rename)."""
    (rc.parent / "next.rc").write_text(f"{hours * HOUR:+.0f}\n")
    os.replace(rc.parent / "next.rc", rc)


def _env(rc: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(rc),
        "FAKETIME_NO_CACHE": "1",  # read the file on every call: a jump is at once
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        # Debian's libfaketime turns this on for our glibc, and with it a timed
        # wait on a condition (a Python lock with a timeout: trio's worker
        # threads) lasts until its timeout, whenever it is woken: 30-80 ms a write.
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
        "NO_FAKE_STAT": "1",
    }


def _rang(child: Child) -> dict[str, int]:
    return Counter(json.loads(line)["rang"] for line in child.lines if '"rang"' in line)


async def _arm(child: Child, timers: dict[str, float]) -> None:
    armed = child.count('"armed"')
    await child.tell({"arm": list(timers.items())})
    await child.wait_until(lambda: child.count('"armed"') == armed + len(timers))


async def _ring_soon(child: Child, timer: str) -> None:
    """Arm ``timer`` due `SOON` and wait for it: the service has read the clock since."""
    await _arm(child, {timer: SOON})
    await child.wait_until(lambda: timer in _rang(child))


async def _send(child: Child, keys: list[str]) -> list[bool]:
    """Send ``keys``; whether each was a duplicate."""
    sent = len(child.lines)
    await child.tell({"send": keys})
    await child.wait_until(lambda: child.count('"outcome"') >= _answers(child, sent) + len(keys))
    answers = [json.loads(line) for line in child.lines[sent:] if '"outcome"' in line]
    assert [a["key"] for a in answers] == keys and {a["outcome"] for a in answers} == {"acked"}
    return [a["duplicate"] for a in answers]


def _answers(child: Child, before: int) -> int:
    return sum('"outcome"' in line for line in child.lines[:before])


async def _trial(data: Path, rc: Path, rng: random.Random) -> tuple[set[str], list[str]]:
    """One child through the jumps, then a restart past every timer: the timers
    armed (every one has rung by the end) and the keys sent."""
    back, forward = rng.uniform(1, 6), rng.uniform(3, 8)
    # Due some hours ahead, none within ten minutes of where the forward jump lands.
    hours = [rng.choice((rng.uniform(0.5, forward - 0.2), rng.uniform(forward + 0.2, 10)))
             for _ in range(5)]  # fmt: skip
    late = {f"h{i}": h * HOUR for i, h in enumerate(hours)}
    keys = [f"k{i}" for i in range(KEYS)]
    more = [f"k{i}" for i in range(KEYS, 2 * KEYS)]
    command = [sys.executable, str(CHILD), str(data)]
    _set_offset(rc, 0)
    async with open_child(command, env=_env(rc), stdin=True) as child:
        await _arm(child, late)
        assert await _send(child, keys) == [False] * KEYS
        await _ring_soon(child, "now")

        _set_offset(rc, -back)
        assert await _send(child, keys) == [True] * KEYS
        await _arm(child, {"back": back / 2 * HOUR})  # due before the real now
        await _ring_soon(child, "after the jump back")
        assert set(_rang(child)) == {"now", "after the jump back"}  # nothing early

        _set_offset(rc, forward)
        assert await _send(child, keys) == [True] * KEYS
        due = {t for t, delay in late.items() if delay < forward * HOUR} | {"back"}
        await child.wait_until(lambda: due <= set(_rang(child)))
        await _ring_soon(child, "after the jump forward")
        assert set(_rang(child)) == due | {"now", "after the jump back", "after the jump forward"}
        assert await _send(child, more) == [False] * KEYS
        assert await _send(child, more) == [True] * KEYS

        _set_offset(rc, 0)
        assert await _send(child, keys + more) == [True] * 2 * KEYS
        await _ring_soon(child, "back to now")
        assert set(_rang(child)) == due | {"now", "after the jump back", "after the jump forward",
                                           "back to now"}  # fmt: skip
        os.kill(child.process.pid, signal.SIGKILL)
    timers = set(_rang(child)) | set(late)
    assert [line for line in child.lines if '"rang"' in line and _early(line)] == []

    # The rest fall due while no runtime runs, and ring once one starts.
    _set_offset(rc, 11)
    async with open_child(command, env=_env(rc), stdin=True) as child:
        await child.wait_until(lambda: set(late) - due <= set(_rang(child)))
        assert await _send(child, keys + more) == [True] * 2 * KEYS
        os.kill(child.process.pid, signal.SIGKILL)
    assert [line for line in child.lines if '"rang"' in line and _early(line)] == []
    return timers, keys + more


def _early(line: str) -> bool:
    ring = json.loads(line)
    return ring["at"] < ring["due"]


@needs_faketime
async def test_a_wall_clock_jump_fires_no_timer_early_or_twice_loses_none_and_forgets_no_key(
    tmp_path, request
):
    trials = 12 if request.config.getoption("--longrun") else 1
    rng = random.Random(request.node.name)
    rang = 0
    with trio.fail_after(30 * trials):
        for trial in range(trials):
            data = tmp_path / f"data-{trial}"
            timers, keys = await _trial(data, tmp_path / "offset.rc", rng)
            async with callboard.open_runtime(data, kinds=KINDS) as rt:
                counter = (await rt.inspect("counter/c")).state["seen"]
                alarm = (await rt.inspect("alarm/a")).state["rang"]
            assert sorted(counter) == sorted(keys)  # each key applied once
            # Each rang once: none lost, none twice (a ring the kill cut off before
            # its commit is handled again, and printed again, but committed once).
            assert Counter(timer for timer, _, _ in alarm) == dict.fromkeys(timers, 1)
            assert [(t, due, at) for t, due, at in alarm if at < due] == []  # none early
            rang += len(timers)
    print(
        f"wall-clock jumps: {trials} trials, {rang} timers rang once each, none early, "
        f"none lost; {trials * 2 * KEYS} keys, each resend after a jump a duplicate"
    )
