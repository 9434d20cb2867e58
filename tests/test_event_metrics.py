"""`AgentMetrics` counts what the events of deadlines and compaction record.

The scrape of a real serve is in test_service_metrics.py; these feed the
tap the events those features commit, in the order they commit them.
"""

from __future__ import annotations

from callboard.cli._event_metrics import TAPPED, AgentMetrics
from callboard.mailbox import Event

S = "session/s1"


def _event(seq: int, type_: str, data: dict[str, object], at: float = 100.0) -> Event:
    return Event(S, seq, type_, data, at)


def test_an_approval_whose_deadline_passed_counts_as_expired_once():
    metrics = AgentMetrics()
    metrics.observe(_event(1, "turn.started", {"turn_id": "t1"}))
    metrics.observe(_event(2, "approval.requested", {"call_id": "c1"}))
    metrics.observe(_event(3, "approval.expired", {"call_id": "c1", "approved": False}))
    # The turn then ends: the expired call is not counted a second time.
    metrics.observe(_event(4, "turn.completed", {"turn_id": "t1"}, at=103.0))
    assert "approval.expired" in TAPPED
    assert (metrics.approvals_requested, metrics.approvals_expired) == (1, 1)
    assert sum(metrics.approvals_answered.values()) == 0


def test_the_summarising_call_of_a_compaction_is_a_model_call_with_its_tokens():
    metrics = AgentMetrics()
    usage = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}
    metrics.observe(_event(1, "conversation.compacted", {"usage": usage, "elapsed": 1.5}))
    metrics.observe(
        _event(2, "assistant.message", {"usage": {"prompt_tokens": 100, "completion_tokens": 7}})
    )
    assert "conversation.compacted" in TAPPED
    assert (metrics.model_calls, metrics.tokens_in, metrics.tokens_out) == (2, 1000, 47)
    assert metrics.model_seconds.count == 1


def test_a_budget_breach_counts_once_by_limit_and_policy_and_an_odd_label_is_other():
    metrics = AgentMetrics()
    breach = {"turn_id": "t1", "limit": "max_tokens", "policy": "pause"}
    metrics.observe(_event(1, "budget.exceeded", breach))
    metrics.observe(_event(2, "budget.exceeded", {**breach, "limit": "max_tool_calls"}))
    metrics.observe(_event(3, "budget.exceeded", {**breach, "limit": "x" * 200, "policy": 7}))
    assert "budget.exceeded" in TAPPED
    assert dict(metrics.budget_breaches) == {
        ("max_tokens", "pause"): 1,
        ("max_tool_calls", "pause"): 1,
        ("other", "other"): 1,
    }


def test_each_park_of_a_turn_through_an_outage_counts_as_one_wait():
    metrics = AgentMetrics()
    for seq, attempt in enumerate([1, 2, 3], 1):
        metrics.observe(
            _event(seq, "turn.waiting_for_model", {"turn_id": "t1", "attempt": attempt})
        )
    metrics.observe(_event(4, "assistant.message", {"usage": None}))
    assert "turn.waiting_for_model" in TAPPED
    assert (metrics.outage_waits, metrics.model_calls) == (3, 1)
