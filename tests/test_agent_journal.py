"""The turn journal as a pure state machine: steps, records and recovery, no trio."""

from __future__ import annotations

import json

import attrs
import pytest

from callboard.agent import (
    CANCELLED_RESULT,
    INTERRUPTED_RESULT,
    NOT_RUN_RESULT,
    AskModel,
    AwaitApproval,
    Refuse,
    ReportInterrupted,
    RequestApproval,
    RunTool,
    TurnJournal,
    answer_approval,
    begin_turn,
    close_turn,
    conversation,
    next_step,
    record_approval,
    record_approval_asked,
    record_reply,
    record_result,
    record_started,
)
from callboard.codec import converter


@attrs.frozen
class Call:
    id: str
    name: str
    arguments: str


WRITE = Call("call_1", "write_file", json.dumps({"path": "note.txt", "content": "once"}))
READ = Call("call_2", "read_file", json.dumps({"path": "note.txt"}))


def always(name: str) -> str:
    return "always"


def restored(turn: TurnJournal) -> TurnJournal:
    """The journal as the next activation finds it: through the snapshot's JSON."""
    return converter.structure(json.loads(json.dumps(converter.unstructure(turn))), TurnJournal)


def test_a_new_turn_logs_its_prompt_once_and_asks_the_model():
    turn, items = begin_turn("turn-1", "write the note", prompt_id="p1", log_length=4)
    assert items == [{"role": "user", "content": "write the note"}]
    assert (turn.phase, turn.started_at, turn.prompt_id) == ("model", 4, "p1")
    assert next_step(turn, always) == AskModel()


def test_a_text_answer_ends_the_turn():
    turn, _ = begin_turn("turn-1", "hi")
    items = record_reply(turn, "hello")
    assert items == [{"role": "assistant", "content": "hello"}]
    assert (turn.phase, turn.answer, turn.responses) == ("answered", "hello", 1)
    assert next_step(turn, always) is None


def test_tool_calls_start_a_round_that_runs_them_in_order():
    turn, _ = begin_turn("turn-1", "write then read")
    (message,) = record_reply(turn, "", [WRITE, READ])
    assert message["content"] is None
    assert [c["id"] for c in message["tool_calls"]] == ["call_1", "call_2"]
    assert next_step(turn, always) == RunTool(turn.call("call_1"))
    record_started(turn, "call_1")
    assert record_result(turn, "call_1", "created") == [
        {"role": "tool", "tool_call_id": "call_1", "content": "created"}
    ]
    assert next_step(turn, always) == RunTool(turn.call("call_2"))
    record_started(turn, "call_2")
    record_result(turn, "call_2", "once")
    assert turn.phase == "model"
    assert next_step(turn, always) == AskModel()


def test_empty_or_repeated_call_ids_are_made_unique():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [Call("", "list_dir", "{}"), Call("a", "list_dir", "{}"),
                            Call("a", "list_dir", "{}")])  # fmt: skip
    assert [c.id for c in turn.calls] == ["call_1_0", "a", "call_1_2"]


def test_a_never_policy_refuses_the_call_without_running_it():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE])
    step = next_step(turn, lambda name: "never")
    assert isinstance(step, Refuse) and "never allows write_file" in step.reason
    record_result(turn, "call_1", step.reason)
    assert turn.call("call_1").status == "done"


def test_an_ask_policy_waits_for_an_answer_recorded_in_the_journal():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE])
    assert next_step(turn, lambda name: "ask") == RequestApproval(turn.call("call_1"))
    record_approval_asked(turn, "call_1")
    turn = restored(turn)
    assert next_step(turn, lambda name: "ask") == AwaitApproval(turn.call("call_1"))
    assert turn.awaiting_approval() == [turn.call("call_1")]
    assert record_approval(turn, "call_1", True)
    assert not record_approval(turn, "call_1", True), "answered once"
    assert next_step(turn, lambda name: "ask") == RunTool(turn.call("call_1"))


def test_an_answer_names_its_call_or_takes_the_only_one_waiting_and_says_why_it_cannot_apply():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE])
    record_approval_asked(turn, "call_1")
    with pytest.raises(ValueError) as not_bool:
        answer_approval(turn, None, "yes")
    with pytest.raises(ValueError) as unknown:
        answer_approval(turn, "call_9", True)
    with pytest.raises(ValueError) as no_turn:
        answer_approval(None, "call_1", True)
    answered = answer_approval(turn, None, False)
    with pytest.raises(ValueError) as twice:
        answer_approval(turn, "call_1", True)
    assert str(not_bool.value) == "'approved' must be true or false, got 'yes'"
    assert str(unknown.value) == "no tool call 'call_9' is waiting for approval; waiting: 'call_1'"
    assert str(no_turn.value) == "no tool call 'call_1' is waiting for approval"
    assert answered == "call_1"
    assert turn.call("call_1").approval == "denied"
    assert str(twice.value) == "no tool call 'call_1' is waiting for approval"


def test_a_denied_call_is_refused():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE])
    record_approval_asked(turn, "call_1")
    assert record_approval(turn, "call_1", False)
    step = next_step(turn, lambda name: "ask")
    assert isinstance(step, Refuse) and step.reason.startswith("denied")


def test_an_answer_without_a_call_id_says_none_waits_or_names_the_several_that_do():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE, READ])
    with pytest.raises(ValueError) as none_yet:
        answer_approval(turn, None, True)
    with pytest.raises(ValueError) as no_turn:
        answer_approval(None, None, True)
    record_approval_asked(turn, "call_1")
    record_approval_asked(turn, "call_2")
    with pytest.raises(ValueError) as several:
        answer_approval(turn, None, True)
    assert str(none_yet.value) == "no tool call is waiting for approval"
    assert str(no_turn.value) == "no tool call is waiting for approval"
    assert str(several.value) == (
        "2 tool calls are waiting for approval ('call_1', 'call_2'): name one with 'call_id'"
    )
    assert [c.approval for c in turn.calls] == ["asked", "asked"]


def test_a_denial_with_a_reason_tells_the_model_the_reason_and_survives_a_restart():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE])
    record_approval_asked(turn, "call_1", at=1_800_000_000.5)
    assert answer_approval(turn, "call_1", False, "not on main, use a branch") == "call_1"
    turn = restored(turn)
    step = next_step(turn, lambda name: "ask")
    assert step == Refuse(
        turn.call("call_1"),
        "denied: the user did not approve this write_file call. "
        "Their reason: not on main, use a branch",
    )
    assert turn.call("call_1").asked_at == 1_800_000_000.5


def test_an_answer_for_an_unknown_call_changes_nothing():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE])
    assert not record_approval(turn, "call_9", True)
    assert not record_approval(turn, "call_1", True), "not asked yet"
    assert turn.call("call_1").approval == "none"


def test_a_call_found_started_after_a_restart_is_reported_interrupted_not_run_again():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE, READ])
    record_started(turn, "call_1")
    turn = restored(turn)  # the process died while the write ran
    step = next_step(turn, always)
    assert step == ReportInterrupted(turn.call("call_1"))
    items = record_result(turn, "call_1", INTERRUPTED_RESULT, interrupted=True)
    assert items[0]["content"] == INTERRUPTED_RESULT
    assert turn.call("call_1").status == "interrupted"
    assert next_step(turn, always) == RunTool(turn.call("call_2"))


def test_a_turn_continued_mid_round_runs_only_the_calls_without_a_result():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE, READ])
    record_started(turn, "call_1")
    record_result(turn, "call_1", "created")
    turn = restored(turn)
    assert next_step(turn, always) == RunTool(turn.call("call_2"))


def test_a_turn_continued_after_its_round_asks_the_model_with_the_prompt_once():
    log: list[dict] = []
    turn, items = begin_turn("turn-1", "write the note")
    log += items
    log += record_reply(turn, "", [WRITE])
    record_started(turn, "call_1")
    log += record_result(turn, "call_1", "created 'note.txt': 4 bytes")
    turn = restored(turn)  # the process died while the model answered the result
    assert next_step(turn, always) == AskModel()
    messages = conversation("be brief", log)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert json.dumps(messages).count("write the note") == 1


def test_a_turn_that_recorded_only_its_prompt_asks_the_model_again():
    turn, _ = begin_turn("turn-1", "x")
    turn = restored(turn)
    assert next_step(turn, always) == AskModel()
    assert turn.responses == 0


def test_closing_a_turn_answers_every_open_call_so_the_conversation_stays_well_formed():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE, READ, Call("call_3", "list_dir", "{}")])
    record_started(turn, "call_1")
    record_result(turn, "call_1", "created")
    record_started(turn, "call_2")
    items = close_turn(turn)
    assert items == [
        {"role": "tool", "tool_call_id": "call_2", "content": CANCELLED_RESULT},
        {"role": "tool", "tool_call_id": "call_3", "content": NOT_RUN_RESULT},
    ]
    assert turn.phase == "model"
    assert close_turn(turn) == [], "closing twice adds nothing"


def test_closing_a_turn_waiting_for_the_model_adds_nothing():
    turn, _ = begin_turn("turn-1", "x")
    assert close_turn(turn) == []


def test_out_of_order_records_are_refused():
    turn, _ = begin_turn("turn-1", "x")
    record_reply(turn, "", [WRITE])
    with pytest.raises(ValueError, match="not waiting for the model"):
        record_reply(turn, "again")
    record_started(turn, "call_1")
    with pytest.raises(ValueError, match="is started, not pending"):
        record_started(turn, "call_1")
    record_result(turn, "call_1", "ok")
    with pytest.raises(ValueError, match="already has its result"):
        record_result(turn, "call_1", "ok")
    with pytest.raises(KeyError, match="no tool call 'nope'"):
        turn.call("nope")


def test_the_journal_module_imports_no_trio():
    import ast
    import pathlib

    import callboard.agent._journal as journal

    tree = ast.parse(pathlib.Path(journal.__file__).read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}  # fmt: skip
    modules |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m.split(".")[0] for m in modules} & {"trio", "httpx"}
