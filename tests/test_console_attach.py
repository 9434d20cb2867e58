"""Live attach from the console, in a real headless Chromium against a real
`callboard serve`: an actor paused from its page holds what is sent to it,
is stepped one message at a time, has its committed state replaced (a state
that does not fit its type is refused, naming the field) and is resumed.
The page reads the gateway's ops ``pause``, ``step``, ``state``,
``set_state`` and ``resume`` (docs/protocol.md, "Live attach"). A session's
own hold on its queue (its ``pause`` message) is another button, and another
pause: the session still handles what it is sent."""

from __future__ import annotations

import trio
from console_helpers import browser, console, console_url, driver, shoot
from scripted_model import ScriptedModel, text
from serve_helpers import connect_to

__all__ = ["browser", "driver"]  # the fixtures, for pytest to find here

LEDGER = ("--kind", "console_kinds:Ledger")


async def test_an_actor_paused_from_its_page_is_stepped_edited_and_resumed(tmp_path, browser):
    with ScriptedModel([]) as model, trio.fail_after(180):
        async with console(tmp_path, model, *LEDGER) as served, connect_to(served) as wire:
            await wire.ok("send", to="ledger/l1", type="add", body={"n": 2, "note": "first"})
            url, _, token = console_url(served.line)
            await browser.get(url + f"#token={token}")
            await browser.click('a[href="#/actor/ledger/l1"]')
            await browser.element('.marker[data-type="added"]')
            await browser.element("#actor-state", '"total": 2')

            await browser.click("#pause-actor")
            await browser.element("#actor-status", "paused")
            paused_notice = await text_of(browser, await browser.element(".notice .ok", "paused"))
            held = await wire.ok("send", to="ledger/l1", type="add", body={"n": 5, "note": "held"})
            # Nothing is handled, and the page (asking again while paused) shows it waiting.
            await browser.element("#actor-facts div", "mailbox 1")
            seen_paused = await wire.ok("inspect", actor="ledger/l1")
            stop_shown = await browser.script("return !document.getElementById('stop').hidden")

            await browser.click("#step-actor")
            stepped = await browser.element(".notice .ok", "step: handled seq")
            step_notice = await text_of(browser, stepped)
            await browser.element("#actor-state", '"total": 7')
            await browser.element("#actor-facts div", "mailbox 0")
            await browser.click("#step-actor")
            await browser.element(".notice .ok", "step: nothing waits")
            after_steps = await wire.ok("state", actor="ledger/l1")

            await browser.click("#edit-state")
            editor = await browser.element("#state-input")
            offered = await browser.run(lambda: editor.get_attribute("value"))
            await replace_text(browser, '{"total": "5", "entries": []}')
            await browser.click("#save-state")
            refused = await browser.element("#state-error", "$.total")
            refusal = await text_of(browser, refused)
            after_refusal = await wire.ok("state", actor="ledger/l1")
            await shoot(browser, "attach")
            await replace_text(browser, '{"total": 40, "entries": ["edited"]}')
            await browser.click("#save-state")
            replaced = await browser.element(".notice .ok", "state replaced")
            replace_notice = await text_of(browser, replaced)
            await browser.element("#actor-state", '"total": 40')
            editor_hidden = await browser.script(
                "return document.getElementById('state-form').hidden"
            )

            await browser.click("#resume-actor")
            await browser.element(".notice .ok", "resumed: ledger/l1 is active")
            await browser.until(
                lambda d: d.find_element("id", "actor-status").text != "paused",
                "the page to show the actor resumed",
            )
            step_hidden = await browser.script(
                "return document.getElementById('step-actor').hidden"
            )
            await wire.ok("send", to="ledger/l1", type="add", body={"n": 1, "note": "after"})
            await browser.element("#actor-state", '"total": 41')
            final = await wire.ok("state", actor="ledger/l1")
    assert paused_notice == "paused: ledger/l1 handles nothing until it is resumed or stepped"
    assert (seen_paused["status"], seen_paused["mailbox"]) == ("paused", 1)
    assert stop_shown is True  # a paused actor can still be stopped
    assert step_notice == f"step: handled seq {held['seq']}"
    assert after_steps["state"] == {"total": 7, "entries": ["first", "held"]}
    assert '"total": 7' in offered and '"held"' in offered
    assert refusal == (
        "bad_request: the new state of 'ledger/l1': $.total would be stored as 5 (a number), "
        'not "5" (a string): give it as Books holds it; nothing was changed'
    )
    assert after_refusal["state"] == after_steps["state"]
    assert replace_notice.startswith("state replaced (seq ")
    assert editor_hidden is True
    assert step_hidden is True
    assert final["state"] == {"total": 41, "entries": ["edited", "after"]}


async def text_of(browser, element) -> str:
    return await browser.run(lambda: element.text)


async def replace_text(browser, text: str) -> None:
    await browser.run(lambda: browser.driver.find_element("id", "state-input").clear())
    await browser.type("#state-input", text)


async def test_a_sessions_queue_held_from_its_page_takes_prompts_and_runs_them_once_released(
    tmp_path, browser
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ScriptedModel([text("released and answered")]) as model, trio.fail_after(180):
        async with console(tmp_path, model) as served, connect_to(served) as wire:
            await wire.ok("spawn", kind="session", name="s1", spec={"workspace": str(workspace)})
            url, _, token = console_url(served.line)
            await browser.get(url + f"#token={token}")
            await browser.click('a[href="#/actor/session/s1"]')
            await browser.click("#hold-queue")
            await browser.element("#queue-held", "held")
            await browser.type("#prompt", "wait for it")
            await browser.click("#send-prompt")
            # Handled (queued and announced) while held, but no turn starts from it.
            await browser.element('#queue li[data-prompt-id="p1"]', "wait for it")
            await browser.element("#actor-state", '"text": "wait for it"')
            held = await wire.ok("inspect", actor="session/s1")
            asked_while_held = len(model.requests)
            await browser.click("#release-queue")
            await browser.element(".msg.assistant:not(.streaming) .text", "released and answered")
            await browser.until(
                lambda d: not d.find_elements("css selector", "#queue li"), "the queue to empty"
            )
            await browser.element("#hold-queue")
            held_note_hidden = await browser.script(
                "return document.getElementById('queue-held').hidden"
            )
    assert held["state"]["paused"] is True  # the session's hold, not live attach's pause
    assert held["status"] != "paused"
    assert [prompt["text"] for prompt in held["state"]["queue"]] == ["wait for it"]
    assert asked_while_held == 0
    assert len(model.requests) == 1
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "wait for it"}
    assert held_note_hidden is True
