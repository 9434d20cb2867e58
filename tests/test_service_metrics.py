"""What an operator graphs and alerts on: a real `callboard serve` with its metrics
port, driven through a scripted session (approval asked and given, tool calls,
a turn cancelled while it waits for an approval) and a message that goes to the
dead letters, then scraped."""

from __future__ import annotations

import threading
import urllib.request
from typing import Any

import trio
from prometheus_client.parser import text_string_to_metric_families
from scripted_model import ScriptedModel, status, text, tool_call
from serve_helpers import serving

from callboard.client import connect

WRITE_NOTE = tool_call("write_file", {"path": "note.txt", "content": "once"})
READ_MISSING = tool_call("read_file", {"path": "missing.txt"})
SPEC_APPROVALS = {"*": "always", "write_file": "ask"}
CRASHY = """
from callboard import Actor, Supervision

class Crashy(Actor):
    kind = "crashy"
    virtual = True
    supervision = Supervision(max_attempts=2, backoff_initial=0.001, backoff_max=0.01)

    async def handle(self, ctx, message):
        raise ValueError("every message breaks me")
"""


def scrape(url: str, token: str | None) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def samples(page: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition, by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }


def one(found: dict, name: str, **labels: str) -> float:
    return found[name, frozenset(labels.items())]


async def wait_for(events, type: str) -> dict:
    async for event in events:
        if event.type == type:
            return event.data
    raise AssertionError(f"the stream ended before {type}")


async def test_a_scripted_session_turn_shows_in_the_histograms_and_counters(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "crashy.py").write_text(CRASHY)
    script = [WRITE_NOTE, READ_MISSING, text("done"), WRITE_NOTE]
    with ScriptedModel(script) as model, trio.fail_after(60):
        extra = ["--metrics-port", "0", "--model-url", model.base_url, "--model", "m",
                 "--sandbox", "none", "--kind", "crashy:Crashy"]  # fmt: skip
        async with serving(tmp_path / "data", *extra, cwd=tmp_path) as served:
            metrics_url = served.line.split("metrics at ")[1]
            async with connect(served.url, token=served.token) as client:
                spec = {"workspace": str(workspace), "approvals": SPEC_APPROVALS}
                await client.spawn("session", spec, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "write the note"})
                    asked = await wait_for(events, "approval.requested")
                    await client.send("session/s1", "approve", {"call_id": asked["call_id"]})
                    await wait_for(events, "turn.completed")
                    # The second turn asks again and is cancelled unanswered: expired.
                    await client.send("session/s1", "prompt", {"text": "write it again"})
                    await wait_for(events, "approval.requested")
                    await client.send("session/s1", "cancel")
                    await wait_for(events, "turn.cancelled")
                await client.send("crashy/c1", "boom")
                await served.wait_logged("moved to the dead letters")
            page = await trio.to_thread.run_sync(scrape, metrics_url, served.token)
    found = samples(page)
    assert one(found, "callboard_model_calls_total") == 4
    assert one(found, "callboard_model_tokens_in_total") == 4 * 7  # DEFAULT_USAGE
    assert one(found, "callboard_model_tokens_out_total") == 4 * 5
    assert one(found, "callboard_model_call_seconds_count") == 4
    assert one(found, "callboard_tool_calls_total", tool="write_file", outcome="ok") == 1
    assert one(found, "callboard_tool_calls_total", tool="read_file", outcome="error") == 1
    assert one(found, "callboard_approvals_requested_total") == 2
    assert one(found, "callboard_approvals_answered_total", approved="true") == 1
    assert one(found, "callboard_approvals_expired_total") == 1
    assert one(found, "callboard_turns_total", outcome="completed") == 1
    assert one(found, "callboard_turns_total", outcome="cancelled") == 1
    assert one(found, "callboard_turn_seconds_count") == 2
    assert one(found, "callboard_turn_seconds_bucket", le="+Inf") == 2
    # One observation per group commit in each store histogram, and the batch
    # sizes add up to the writes.
    commits = one(found, "callboard_store_commits_total")
    assert commits > 0
    for name in ("callboard_store_ack_seconds", "callboard_store_commit_latency_seconds",
                 "callboard_store_batch_size"):  # fmt: skip
        assert one(found, f"{name}_count") == commits
        assert one(found, f"{name}_bucket", le="+Inf") == commits
    assert one(found, "callboard_store_batch_size_sum") == one(
        found, "callboard_store_operations_total"
    )
    assert one(found, "callboard_store_batch_size_bucket", le="1.0") >= 1
    assert one(found, "callboard_messages_dead_lettered_total") == 1
    assert one(found, "callboard_dead_letters") == 1
    assert one(found, "process_resident_memory_bytes") > 0
    assert one(found, "process_cpu_seconds_total") > 0
    assert (workspace / "note.txt").read_text() == "once"


async def test_a_budget_breach_and_a_turn_parked_through_an_outage_are_counted_once_each(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    back = threading.Event()
    down = status(503, {"error": {"message": "restarting"}}, headers={"Retry-After": "0"})

    def answer(body: dict) -> Any:
        return text("one") if back.is_set() else down

    with ScriptedModel([answer] * 50) as model, trio.fail_after(60):
        extra = ["--metrics-port", "0", "--model-url", model.base_url, "--model", "m",
                 "--sandbox", "none"]  # fmt: skip
        async with serving(tmp_path / "data", *extra, cwd=tmp_path) as served:
            metrics_url = served.line.split("metrics at ")[1]
            async with connect(served.url, token=served.token) as client:
                spec = {"workspace": str(workspace), "max_model_calls": 1, "on_budget": "fail"}
                await client.spawn("session", spec, name="s1")
                async with client.subscribe("session/s1", after=0) as events:
                    await client.send("session/s1", "prompt", {"text": "hello"})
                    parked = await wait_for(events, "turn.waiting_for_model")
                    back.set()
                    # Ask again now rather than after the backoff.
                    await client.send("session/s1", "outage.retry", {"turn_id": parked["turn_id"]})
                    await wait_for(events, "turn.completed")
                    # The second turn finds its one model call spent.
                    await client.send("session/s1", "prompt", {"text": "again"})
                    await wait_for(events, "budget.exceeded")
                    await wait_for(events, "turn.failed")
            page = await trio.to_thread.run_sync(scrape, metrics_url, served.token)
    found = samples(page)
    assert one(found, "callboard_model_outage_waits_total") == 1
    breaches = {k: v for k, v in found.items() if k[0] == "callboard_budget_breaches_total"}
    assert breaches == {
        ("callboard_budget_breaches_total",
         frozenset({("limit", "max_model_calls"), ("policy", "fail")})): 1.0,
    }  # fmt: skip
    assert one(found, "callboard_turns_total", outcome="failed") == 1
    assert one(found, "callboard_model_calls_total") == 1
