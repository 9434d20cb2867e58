"""How much disk a long run takes with retention on: a session loop and a ticker.

``python benchmarks/soak.py [--seconds 600] [--turn-every 0.5] [--config '{...}']``

One runtime on a fresh data directory runs, for ``seconds``:

- a session whose every prompt gets a turn from a scripted model endpoint on
  loopback (the test suite's, ``tests/scripted_model.py``): a prompt every
  ``turn_every`` seconds (or as soon as the last turn completed, if later),
  each answer about 1 KB. The conversation is kept whole by design (a
  session's log is pruned only with the session), so it grows by about
  2 KB a turn whatever the retention;
- a ticker: an actor that schedules its next ``tick`` 20 ms after each one
  (a durable timer) and emits an event of about 1 KB per tick.

Every 10 s it notes the bytes of every file in the data directory (the
database, its WAL), and at the end prints one JSON line: the samples, the
largest total, turns and ticks done. ``--config`` holds `RuntimeConfig`
fields (retention among them) as JSON.

A standalone script, not a scenario of ``python -m benchmarks``: it
measures a bound over time, not a rate.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scripted_model import ScriptedModel, text

import callboard
from callboard.agent import Session

_PAD = "x" * 1000


class Ticker(callboard.Actor):
    """Ticks every 20 ms, for good, through a durable timer each time."""

    kind = "ticker"
    virtual = True

    async def handle(self, ctx: callboard.Context, message: callboard.Message) -> None:
        self.state["ticks"] = self.state.get("ticks", 0) + 1
        ctx.emit("ticked", {"n": self.state["ticks"], "pad": _PAD})
        ctx.schedule(0.02, "tick", {})


def _bytes(data: Path) -> dict[str, int]:
    sizes = {p.name: p.stat().st_size for p in data.rglob("*") if p.is_file()}
    return {"total": sum(sizes.values()), **{k: v for k, v in sizes.items() if "sqlite" in k}}


async def _soak(
    data: Path, seconds: float, turn_every: float, config: dict[str, Any]
) -> dict[str, Any]:
    workspace = data.parent / "ws"
    workspace.mkdir()
    samples: list[dict[str, Any]] = []
    turns = 0
    with ScriptedModel([text(_PAD) for _ in range(200_000)]) as model:
        settings = {"model_url": model.base_url, "model": "m"}
        async with callboard.open_runtime(
            data, kinds=[Session, Ticker], settings=settings,
            config=callboard.RuntimeConfig(**config),
        ) as rt:  # fmt: skip
            spec = {"workspace": str(workspace), "approvals": "always"}
            await rt.spawn("session", spec, "s1")
            await rt.send("ticker/t", "tick", {})
            started = time.monotonic()
            with trio.move_on_after(seconds):
                async with trio.open_nursery() as nursery:

                    async def sample() -> None:
                        while True:
                            samples.append({"t": round(time.monotonic() - started), **_bytes(data)})
                            await trio.sleep(10)

                    nursery.start_soon(sample)
                    async with rt.subscribe("session/s1") as events:
                        while True:
                            due = trio.current_time() + turn_every
                            await rt.send("session/s1", "prompt", {"text": f"turn {turns}"})
                            async for event in events:
                                if event.type == "turn.completed":
                                    turns += 1
                                    break
                            await trio.sleep_until(due)
            ticks = (await rt.inspect("ticker/t")).state.get("ticks", 0)
    samples.append({"t": round(time.monotonic() - started), **_bytes(data)})
    return {
        "seconds": seconds,
        "turn_every": turn_every,
        "config": config,
        "turns": turns,
        "ticks": ticks,
        "largest_total_bytes": max(s["total"] for s in samples),
        "final_total_bytes": samples[-1]["total"],
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--turn-every", type=float, default=0.5)
    parser.add_argument("--config", default="{}", help="RuntimeConfig fields as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="callboard-soak-") as tmp:
        config = json.loads(args.config)
        result = trio.run(_soak, Path(tmp) / "data", args.seconds, args.turn_every, config)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
