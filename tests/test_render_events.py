"""What `tail` and `task run` print for the events of steering, deadlines and compaction."""

from __future__ import annotations

from callboard.cli._render import Printer
from callboard.mailbox import Event


def _shown(*events: tuple[str, dict[str, object]]) -> str:
    out: list[str] = []
    printer = Printer(out.append)
    for seq, (type_, data) in enumerate(events, 1):
        printer.show(Event("session/s1", seq, type_, data, 0.0))
    printer.close()
    return "".join(out)


def test_a_steer_an_interrupt_an_expiry_and_a_compaction_each_read_as_one_line():
    shown = _shown(
        ("turn.started", {"prompt": "fix the test"}),
        ("turn.steered", {"text": "and keep it short"}),
        ("turn.interrupted", {"by": "p3", "reason": "interrupted by p3"}),
        ("approval.expired", {"call_id": "c1", "name": "shell_run", "approved": False}),
        ("conversation.compacted", {"turns": 6}),
    )
    assert shown == (
        "> fix the test\n"
        ">> and keep it short  [steered into the running turn]\n"
        "[interrupted by p3]\n"
        "[approval] shell_run expired: denied\n"
        "[6 earlier turns summarised to fit the model's context]\n"
    )


def test_an_interrupt_a_restart_cut_off_is_left_to_everything():
    assert _shown(("turn.interrupted", {"reason": "the server restarted"})) == ""


def test_a_budget_breach_says_how_each_policy_lets_the_turn_go_on_and_a_raise_says_the_limits():
    breach = {"limit": "max_tokens", "error": "budget exceeded: max_tokens is 12 and 12 was used"}
    shown = _shown(
        ("budget.exceeded", {**breach, "policy": "pause"}),
        ("budget.raised", {"by": "raise_budget", "limits": {"max_tokens": 100, "max_cost": None}}),
        ("budget.exceeded", {**breach, "policy": "ask"}),
        ("budget.exceeded", {**breach, "policy": "fail"}),
    )
    assert shown == (
        "[budget] budget exceeded: max_tokens is 12 and 12 was used; the turn waits (resume "
        "does not lift it): callboard send session/s1 raise_budget '{\"max_tokens\": NEW}'\n"
        "[budget] limits now max_tokens 100; the turn goes on\n"
        "[budget] budget exceeded: max_tokens is 12 and 12 was used; the turn waits: "
        "callboard approve session/s1 budget (or deny ... --reason TEXT)\n"
        "[budget] budget exceeded: max_tokens is 12 and 12 was used\n"
    )
