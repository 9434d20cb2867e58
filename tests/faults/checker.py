"""A queue checker in the manner of Jepsen's: what each send was told, against
what the data directory holds after the fault and a restart.

Every acknowledged message must be applied exactly once; a send told
"failed" (nothing accepted) must not be applied at all; a send told
"unknown" may be either, and is counted. `Tally.check` says what broke.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import attrs
from core_kinds import Counter as CounterKind

import callboard

__all__ = ["Tally", "applied", "outcomes"]


def outcomes(lines: list[str]) -> dict[str, str]:
    """Each key's last answer (an unknown outcome is retried, so it may be followed)."""
    told: dict[str, str] = {}
    for line in lines:
        if line.startswith('{"key"'):
            item = json.loads(line)
            if item["outcome"] == "unknown" and item["key"] in told:
                continue
            told[item["key"]] = item["outcome"]
    return told


async def applied(data: Path) -> Counter[str]:
    """How many times each key was applied, after a restart on ``data`` handles
    whatever the killed process left."""
    async with callboard.open_runtime(data, kinds=[CounterKind]) as rt:
        seen: Counter[str] = Counter()
        for info in await rt.list():
            view = await rt.inspect(info.actor)
            await rt.wait_handled(info.actor, view.cursor + view.mailbox)
            view = await rt.inspect(info.actor)
            seen.update(view.state["seen"])
        return seen


@attrs.define
class Tally:
    """Counts over all trials of one fault, for the note and the assertion."""

    trials: int = 0
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    false_failures: int = 0
    unknown: int = 0
    refused: int = 0  # told "failed": nothing accepted

    def add(self, told: dict[str, str], unknown_seen: int, seen: Counter[str]) -> None:
        self.trials += 1
        self.unknown += unknown_seen
        for key, outcome in told.items():
            times = seen.get(key, 0)
            if outcome == "acked":
                self.acked += 1
                self.lost += times == 0
                self.duplicated += times > 1
            elif outcome == "failed":
                self.refused += 1
                self.false_failures += times > 0
        self.duplicated += sum(1 for key, times in seen.items() if times > 1 and key not in told)

    def check(self) -> None:
        assert (self.lost, self.duplicated, self.false_failures) == (0, 0, 0), self

    def line(self, fault: str) -> str:
        return (
            f"{fault}: {self.trials} trials, {self.acked} acked, {self.lost} lost, "
            f"{self.duplicated} duplicated, {self.false_failures} false failures, "
            f"{self.unknown} unknown outcomes, {self.refused} refused"
        )
