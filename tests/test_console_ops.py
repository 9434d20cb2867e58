"""The console's views across actors, in a real headless Chromium against a real
`callboard serve`: pending approvals answered there, dead letters re-queued
with one click, an ended actor deleted. They read the gateway's operator ops
(docs/protocol.md: ``approvals``, ``dead_letters``, ``requeue``, ``delete``)."""

from __future__ import annotations

import re
import threading

import trio
from console_helpers import (
    ANSWER,
    WAIT,
    WATCH_STREAMING,
    browser,
    console,
    console_url,
    driver,
    shoot,
)
from scripted_model import ScriptedModel, text, tool_call
from serve_helpers import connect_to

__all__ = ["browser", "driver"]  # the fixtures, for pytest to find here


async def test_an_approval_is_answered_from_the_pending_view_and_a_dead_letter_is_requeued(
    tmp_path, browser
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    gate = threading.Event()  # holds the model's answer until the session's page watches it

    def answer_once_let_through(body: dict) -> text:
        gate.wait(WAIT)
        return text(ANSWER, pieces=6)

    script = [
        tool_call("write_file", {"path": "notes/today.txt", "content": "plan"}, call_id="call_7"),
        answer_once_let_through,
    ]
    with ScriptedModel(script) as model, trio.fail_after(180):
        try:
            async with console(tmp_path, model) as served, connect_to(served) as wire:
                spec = {"workspace": str(workspace), "approvals": "ask"}
                await wire.ok("spawn", kind="session", name="s3", spec=spec)
                # A message that fails goes to the dead letters; the fix comes after it.
                watched = await wire.ok("subscribe", actor="fragile/f1", after=0)
                await wire.ok("send", to="fragile/f1", type="work", body={"job": "the report"})
                dead = await next_of(wire, watched["sub"], "message.dead_lettered")
                url, _, token = console_url(served.line)
                await browser.get(url + f"#token={token}")
                await browser.click('a[href="#/actor/session/s3"]')
                await browser.type("#prompt", "write today's plan into notes/today.txt")
                await browser.click("#send-prompt")
                await browser.element(
                    '.tool[data-call-id="call_7"][data-status="awaiting approval"]'
                )
                await browser.element("#approval-count.some", "1")

                await browser.click('nav a[href="#/approvals"]')
                card = '.approval-card[data-actor="session/s3"][data-call-id="call_7"]'
                await browser.element(f"{card} .arguments", '"content": "plan"')
                await shoot(browser, "approvals")
                await browser.type(f"{card} .reason", "a note is fine")
                await browser.click(f"{card} button.approve")
                approved = await browser.element(
                    ".notice .ok", "approved write_file for session/s3"
                )
                notice = await browser.run(lambda: approved.text)
                await browser.element("#approvals .empty")
                await browser.element("#approval-count", "0")

                await browser.click('nav a[href="#/actors"]')
                await browser.click('a[href="#/actor/session/s3"]')
                await browser.element('.tool[data-call-id="call_7"][data-status="ok"] .result')
                await browser.script(WATCH_STREAMING)
                gate.set()
                await browser.element(".msg.assistant:not(.streaming) .text", ANSWER)
                streamed = await browser.script("return window.__streamed")
                result = await browser.run(
                    lambda: (
                        browser.driver.find_element(
                            "css selector", '.tool[data-call-id="call_7"] .result'
                        ).text
                    )
                )

                await wire.ok("send", to="fragile/f1", type="fix")
                await browser.element("#dead-letter-count.some", "1")
                await browser.click('nav a[href="#/dead-letters"]')
                letter = '.dead-letter[data-actor="fragile/f1"]'
                await browser.element(f"{letter} .error", "cannot do 'the report' before a fix")
                await shoot(browser, "dead-letters")  # the traceback folded: it names paths
                await browser.click(f"{letter} summary", "traceback")
                traceback = await browser.element(f"{letter} .traceback", "RuntimeError")
                shown_traceback = await browser.run(lambda: traceback.text)
                await browser.click(f"{letter} button.requeue")
                requeued = await browser.element(".notice .ok", "re-queued to fragile/f1")
                requeue_notice = await browser.run(lambda: requeued.text)
                await browser.element("#dead-letters .empty")
                await browser.element("#dead-letter-count", "0")
                worked = await next_of(wire, watched["sub"], "worked")

                # Stopped, the actor can be deleted from its page, and leaves the list.
                await browser.click('nav a[href="#/actors"]')
                await browser.click('a[href="#/actor/fragile/f1"]')
                await browser.click("#stop")
                await browser.run(lambda: browser.driver.switch_to.alert.accept())
                await browser.element("#actor-status", "stopped")
                await browser.click("#delete")
                await browser.run(lambda: browser.driver.switch_to.alert.accept())
                await browser.element('#actors tr[data-actor="session/s3"]')
                left = await browser.script(
                    "return document.querySelectorAll('tr[data-actor=\"fragile/f1\"]').length"
                )
                listed = await wire.ok("list", kind="fragile")
        finally:
            gate.set()
    assert dead["data"]["type"] == "work"
    assert notice.startswith("approved write_file for session/s3 (seq ")
    assert result == "created 'notes/today.txt': 4 bytes"
    assert len(streamed) >= 2 and all(ANSWER.startswith(piece) for piece in streamed)
    assert model.requests[1]["messages"][-1]["role"] == "tool"
    assert "Traceback" in shown_traceback and "before a fix" in shown_traceback
    assert re.fullmatch(r"dead letter \d+ re-queued to fragile/f1 as seq \d+", requeue_notice)
    assert worked["data"] == {"job": "the report"}
    assert left == 0
    assert listed == {"actors": []}


async def next_of(wire, sub: str, type_: str) -> dict:
    """The next event of ``type_`` on the subscription (those before it are passed over)."""
    while True:
        (frame,) = await wire.events(sub, 1)
        if frame.get("type") == type_:
            return frame
