"""Power loss, through a VFS that drops, tears or garbles every write not yet synced.

A real runtime child (power_child.py) sends keyed messages with its store's
files on the power-loss VFS (power_loss_vfs.py); the power goes at a random
write or sync of those files, and the child dies with it. Then a runtime
restarts on what is left and the checker holds every answer against it.

With ``synchronous=FULL`` (the store's setting) nothing acknowledged may be
lost. The control runs the same store with ``synchronous=NORMAL``, whose
commits reach the WAL unsynced: it must lose acknowledged messages, or the
harness could not see a loss at all.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path

import attrs
import trio
from checker import Tally, applied
from runner import run_child

CHILD = Path(__file__).parent / "power_child.py"
MESSAGES = 200
# A run of MESSAGES makes about 700 writes and syncs: the power goes anywhere
# in it, or after the last answer (a draw past the end).
LOSS_AT = (50, 800)


@attrs.define
class Losses:
    """Over the trials: the checker's tally, the trials that lost acks, and the
    trials whose power went while some sectors were written but not synced."""

    tally: Tally = attrs.Factory(Tally)
    losing: int = 0
    torn: int = 0
    sectors: Counter[str] = attrs.Factory(Counter)

    def line(self, fault: str) -> str:
        return (
            f"{self.tally.line(fault)}; acks lost in {self.losing} trials, "
            f"{self.torn} losses mid-write ({dict(self.sectors)} sectors)"
        )


async def _trials(tmp_path: Path, synchronous: str, trials: int, seed: str) -> Losses:
    rng = random.Random(seed)
    losses = Losses()
    for trial in range(trials):
        data = tmp_path / f"{synchronous}-{trial}"
        at, fates = rng.randint(*LOSS_AT), rng.randrange(2**32)
        command = [sys.executable, str(CHILD), str(data), str(MESSAGES), synchronous]
        run = await run_child([*command, str(at), str(fates)], kill_when_done=False)
        lost_power = [json.loads(line)["power lost"] for line in run.lines if "power lost" in line]
        assert (run.returncode, len(lost_power)) == (-9, 1), (at, fates, run.errors[-5:])
        lost = losses.tally.lost
        losses.tally.add(run.told, run.unknown, await applied(data))
        losses.losing += losses.tally.lost > lost
        losses.torn += bool(lost_power[0])
        losses.sectors.update(lost_power[0])
    return losses


async def test_power_loss_loses_no_acknowledged_message_with_synchronous_full(tmp_path, request):
    trials = 120 if request.config.getoption("--longrun") else 8
    with trio.fail_after(10 * trials):
        losses = await _trials(tmp_path, "FULL", trials, request.node.name)
    print(losses.line("power loss, synchronous=FULL"))
    losses.tally.check()
    assert losses.tally.acked > 0 and losses.torn > 0, losses  # it lost power mid-write


async def test_power_loss_loses_acknowledged_messages_with_synchronous_normal(tmp_path, request):
    """The control: the same harness sees the loss that FULL prevents."""
    trials = 40 if request.config.getoption("--longrun") else 6
    with trio.fail_after(10 * trials):
        losses = await _trials(tmp_path, "NORMAL", trials, request.node.name)
    print(losses.line("power loss, synchronous=NORMAL (control)"))
    assert (losses.tally.duplicated, losses.tally.false_failures) == (0, 0), losses
    assert losses.tally.lost > 0 and losses.losing > trials // 2, losses
