"""What a scrape of ``callboard serve --metrics-port`` reads, sampled on the trio thread.

Each sample is a `Sample`: a counter, a gauge or a histogram, with labelled
values where it has labels. `families` turns them into prometheus_client's
metric families in the exposition thread.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import attrs

from ..gateway import Gateway
from ..runtime import Runtime
from ..store import Histogram
from ._event_metrics import AgentMetrics

__all__ = ["Sample", "families", "sample"]

Value = float | Histogram


@attrs.frozen
class Sample:
    """One metric: ``values`` maps label values (``()`` with no labels) to a number,
    or to a `Histogram` for a histogram."""

    kind: Literal["counter", "gauge", "histogram"]
    name: str
    help: str
    values: dict[tuple[str, ...], Value]
    labels: tuple[str, ...] = ()


def _one(kind: Literal["counter", "gauge", "histogram"], name: str, text: str,
         value: Value) -> Sample:  # fmt: skip
    return Sample(kind, name, text, {(): value})


def _by(kind: Literal["counter", "gauge"], name: str, text: str, labels: tuple[str, ...],
        values: dict[Any, int]) -> Sample:  # fmt: skip
    keyed: dict[tuple[str, ...], Value] = {
        (k if isinstance(k, tuple) else (k,)): float(v) for k, v in values.items()
    }
    return Sample(kind, name, text, keyed, labels)


async def sample(rt: Runtime, gateway: Gateway, agent: AgentMetrics) -> list[Sample]:
    """Every metric of the runtime, its store, its gateway and its agents, now."""
    stats = rt.statistics()
    gw = gateway.statistics()
    c: Final = "counter"
    g: Final = "gauge"
    h: Final = "histogram"
    samples = [
        _one(c, "callboard_messages_accepted", "Messages acknowledged (all senders)",
             stats.messages_accepted),
        _one(c, "callboard_gateway_sends_accepted", "Messages acknowledged to gateway clients",
             gw.sends_accepted_total),
        _one(c, "callboard_actor_commits", "Actor steps committed", stats.commits),
        _one(c, "callboard_store_commits", "Store transactions (one fsync each)",
             stats.store_batches),
        _one(c, "callboard_store_operations", "Writes in those transactions",
             stats.store_operations),
        _one(g, "callboard_store_batch_size_max", "Largest group commit so far",
             stats.store_largest_batch),
        _one(c, "callboard_store_commit_seconds", "Time in transactions, fsync included",
             stats.store_seconds),
        _one(g, "callboard_store_healthy",
             "1 while the store takes writes; 0 from an I/O error until it has recovered",
             int(stats.store_healthy)),
        _one(c, "callboard_store_recoveries", "Fail-stops the store recovered from",
             stats.store_recoveries),
        _one(g, "callboard_actors_active", "Actors in memory", stats.active),
        _by(g, "callboard_actors", "Actors by stored status", ("status",),
            await rt.actor_counts()),
        _one(c, "callboard_actor_activations", "Actors brought into memory", stats.activations),
        _one(c, "callboard_actor_passivations", "Idle actors dropped from memory",
             stats.passivations),
        _one(g, "callboard_actors_resting", "Actors in memory with no task (idle)",
             stats.resting),
        _one(c, "callboard_actor_restarts", "Restarts after crashes", stats.restarts),
        _one(g, "callboard_dead_letters", "Messages in the dead letters",
             await rt.dead_letter_count()),
        _one(c, "callboard_messages_dead_lettered",
             "Messages moved to the dead letters by this process", stats.dead_letters),
        _one(c, "callboard_lagged_subscriptions", "Subscriptions that fell behind",
             stats.lagged),
        _one(c, "callboard_retention_passes", "Retention passes finished",
             stats.retention_passes),
        _one(c, "callboard_events_pruned", "Events removed by retention", stats.events_pruned),
        _one(c, "callboard_actors_removed", "Stopped actors removed by retention",
             stats.actors_removed),
        _one(c, "callboard_dead_letters_expired", "Dead letters removed by retention",
             stats.dead_letters_expired),
        _one(c, "callboard_store_pages_freed", "Free pages given back to the file system",
             stats.pages_freed),
        _one(g, "callboard_subscribers", "Event subscriptions in the hub", stats.subscribers),
        _one(g, "callboard_gateway_connections", "Open gateway connections", gw.connections),
        _one(c, "callboard_gateway_connections_accepted", "Connections accepted",
             gw.connections_total),
        _one(c, "callboard_gateway_lagged", "Subscriptions ended with lagged", gw.lagged_total),
        _one(c, "callboard_gateway_dropped", "Connections dropped for not reading",
             gw.dropped_total),
        _one(g, "callboard_gateway_queued_frames", "Frames waiting to be written",
             gw.queued_frames),
        # What the agents' actors recorded (see _event_metrics).
        _one(c, "callboard_model_calls", "Model answers recorded", agent.model_calls),
        _one(c, "callboard_model_tokens_in", "Prompt tokens the model reported",
             agent.tokens_in),
        _one(c, "callboard_model_tokens_out", "Completion tokens the model reported",
             agent.tokens_out),
        _one(h, "callboard_model_call_seconds",
             "From asking the model to its whole answer, retries included",
             agent.model_seconds),
        _by(c, "callboard_tool_calls", "Tool calls finished, by tool and outcome",
            ("tool", "outcome"), dict(agent.tool_calls)),
        _one(c, "callboard_approvals_requested", "Tool calls that asked for approval",
             agent.approvals_requested),
        _by(c, "callboard_approvals_answered", "Approvals answered, by the answer",
            ("approved",), dict(agent.approvals_answered)),
        _one(c, "callboard_approvals_expired",
             "Approvals whose deadline passed, or whose turn ended, before they were answered",
             agent.approvals_expired),
        _by(c, "callboard_turns", "Turns ended, by outcome", ("outcome",), dict(agent.turns)),
        _by(c, "callboard_budget_breaches", "Budget limits reached, by limit and policy",
            ("limit", "policy"), dict(agent.budget_breaches)),
        _one(c, "callboard_model_outage_waits",
             "Turns parked to ask the model again later (one per failed ask)",
             agent.outage_waits),
        _one(h, "callboard_turn_seconds", "From a turn's start to its end",
             agent.turn_seconds),
    ]  # fmt: skip
    timings = stats.store_histograms
    if timings is not None:
        samples += [
            _one(h, "callboard_store_ack_seconds",
                 "Per group commit: from its oldest write being queued to the acks",
                 timings.ack_seconds),
            _one(h, "callboard_store_commit_latency_seconds",
                 "Per group commit: the transaction, its fsync included",
                 timings.commit_seconds),
            _one(h, "callboard_store_batch_size", "Writes per group commit",
                 timings.batch_size),
        ]  # fmt: skip
    return samples


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(float(value))


def families(samples: list[Sample]) -> list[Any]:
    """prometheus_client metric families for ``samples`` (imported here: an optional
    dependency, needed only with ``--metrics-port``)."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    kinds = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily,
             "histogram": HistogramMetricFamily}  # fmt: skip
    out = []
    for s in samples:
        family = kinds[s.kind](s.name, s.help, labels=list(s.labels))
        for labels, value in sorted(s.values.items(), key=lambda item: item[0]):
            if isinstance(value, Histogram):
                buckets = [(_bound(b), float(n)) for b, n in value.cumulative()]
                family.add_metric(list(labels), buckets, value.sum)
            else:
                family.add_metric(list(labels), value)
        out.append(family)
    return out
