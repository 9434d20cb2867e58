"""The web console in a real headless Chromium, against a real `callboard serve`
and the scripted model endpoint: what an operator does with it, click by click.

Every wait is selenium's WebDriverWait on a condition of the page (polled in a
worker thread, so trio runs meanwhile), bounded by `console_helpers.WAIT`.
With ``CONSOLE_SCREENSHOTS=DIR`` in the environment the main views are saved
there as PNG (docs/console/ holds the ones the README shows).
"""

from __future__ import annotations

import signal
import socket

import trio
from console_helpers import ANSWER, WATCH_STREAMING, browser, console, console_url, driver, shoot
from scripted_model import ScriptedModel, hold, text, tool_call
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select
from serve_helpers import connect_to

__all__ = ["browser", "driver"]  # the fixtures, for pytest to find here


async def test_an_operator_prompts_a_session_approves_its_tool_and_reads_the_streamed_answer(
    tmp_path, browser
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [
        tool_call("write_file", {"path": "notes/today.txt", "content": "plan"}, call_id="call_1"),
        text(ANSWER, pieces=6),
    ]
    with ScriptedModel(script) as model, trio.fail_after(180):
        async with console(tmp_path, model) as served, connect_to(served) as wire:
            spec = {"workspace": str(workspace), "approvals": "ask"}
            await wire.ok("spawn", kind="session", name="s1", spec=spec)
            await wire.ok("send", to="counter/c1", type="add", body={"n": 2})
            url, _, token = console_url(served.line)
            await browser.get(url + f"#token={token}")

            # The token leaves the address bar at once and stays in this tab only.
            await browser.element('#actors tr[data-actor="session/s1"]')
            address = await browser.script("return location.href")
            kept = await browser.script("return sessionStorage.getItem('callboard.token')")
            await browser.element('#actors tr[data-actor="counter/c1"] td', "counted")
            await shoot(browser, "actors")
            await browser.type("#search", "s1")
            await browser.until(
                lambda d: not d.find_elements("css selector", 'tr[data-actor="counter/c1"]'),
                "the search to hide counter/c1",
            )
            await browser.run(lambda: browser.driver.find_element("id", "search").clear())
            await browser.run(lambda: choose(browser.driver, "filter-kind", "counter"))
            await browser.element("#actors-note", "1 of 1 actors")
            by_kind = await browser.script(ROWS)
            await browser.run(lambda: choose(browser.driver, "filter-kind", ""))
            await browser.run(lambda: choose(browser.driver, "filter-status", "active"))
            await browser.element("#actors-note", "2 of 2 actors")
            await browser.run(lambda: browser.driver.find_element("id", "search").send_keys("s"))
            await browser.element("#actors-note", "1 of 2 actors")
            by_status_and_search = await browser.script(ROWS)

            await browser.click('a[href="#/actor/session/s1"]')
            await browser.element("#prompt")
            await browser.script(WATCH_STREAMING)
            await browser.type("#prompt", "write today's plan into notes/today.txt")
            await browser.click("#send-prompt")

            waiting = '.tool[data-call-id="call_1"][data-status="awaiting approval"]'
            await browser.element(waiting)
            on_disk_before = (workspace / "notes" / "today.txt").exists()
            await browser.type(f"{waiting} .reason", "fine, it is a note")
            await browser.click(f"{waiting} button.approve")

            result = await browser.element('.tool[data-call-id="call_1"][data-status="ok"] .result')
            answer = await browser.element(".msg.assistant:not(.streaming) .text", ANSWER)
            await browser.element('.marker[data-type="turn.completed"]')
            await browser.element("#actor-state", '"active": null')  # the turn's end, committed
            await shoot(browser, "session")
            shown_spec = await browser.script(
                "return document.getElementById('actor-spec').textContent"
            )
            shown = await browser.run(lambda: (result.text, answer.text))
            streamed = await browser.script("return window.__streamed")
            arguments = await browser.run(
                lambda: (
                    browser.driver.find_element(
                        "css selector", '.tool[data-call-id="call_1"] .arguments'
                    ).text
                )
            )
    assert "#token" not in address and address.endswith("#/actors")
    assert (by_kind, by_status_and_search) == (["counter/c1"], ["session/s1"])
    assert kept == token
    assert not on_disk_before
    assert (workspace / "notes" / "today.txt").read_text() == "plan"
    assert shown == ("created 'notes/today.txt': 4 bytes", ANSWER)
    assert '"path": "notes/today.txt"' in arguments
    assert '"approvals": "ask"' in shown_spec  # the spec it was spawned with, beside its state
    # The answer was shown while it streamed, in more than one piece, each a prefix of it.
    assert len(streamed) >= 2 and all(ANSWER.startswith(piece) for piece in streamed)
    assert model.requests[1]["messages"][-1]["role"] == "tool"


async def test_the_page_opened_without_a_token_asks_for_it_and_a_wrong_one_is_refused(
    tmp_path, browser
):
    with ScriptedModel([]) as model, trio.fail_after(120):
        async with console(tmp_path, model) as served:
            url, _, token = console_url(served.line)
            await browser.get(url)
            dialog = await browser.element("#token-dialog[open] #token-input")
            listed_before = await browser.script("return document.querySelectorAll('tr').length")
            await browser.type("#token-input", "not-the-token")
            await browser.click("#token-form button[type=submit]")
            refused = await browser.element("#token-error", "refused that token")
            refusal = await browser.run(lambda: refused.text)
            await browser.type("#token-input", token)
            await browser.click("#token-form button[type=submit]")
            await browser.element("#actors")
            await browser.element('#connection[data-state="connected"]')
            open_after = await browser.script("return document.getElementById('token-dialog').open")
    assert dialog is not None
    assert listed_before == 0
    assert "unauthorized" not in refusal and "The gateway refused that token" in refusal
    assert open_after is False


async def test_queued_prompts_are_reordered_and_removed_and_a_running_turn_is_cancelled(
    tmp_path, browser
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [hold(first_delta="Thinking about the first"), text("third answered"),
              text("second answered")]  # fmt: skip
    with ScriptedModel(script) as model, trio.fail_after(180):
        async with console(tmp_path, model) as served, connect_to(served) as wire:
            await wire.ok("spawn", kind="session", name="s2", spec={"workspace": str(workspace)})
            url, _, token = console_url(served.line)
            await browser.get(url + f"#token={token}")
            await browser.click('a[href="#/actor/session/s2"]')
            for prompt in ("first", "second", "third", "fourth"):
                await browser.type("#prompt", prompt)
                await browser.click("#send-prompt")
                await browser.until(
                    lambda d: (
                        d.find_element("css selector", "#prompt").get_attribute("value") == ""
                    ),
                    f"the prompt box to empty after {prompt!r} was sent",
                )
            await browser.element(".msg.assistant.streaming .text", "Thinking about the first")
            await browser.element("#queue li[data-prompt-id=p4]")
            await browser.click('#queue li[data-prompt-id="p3"] button[title="earlier"]')
            await browser.until(lambda d: queue_of(d) == ["third", "second", "fourth"],
                                "third to move before second")  # fmt: skip
            await browser.click('#queue li[data-prompt-id="p4"] button.remove')
            await browser.until(lambda d: queue_of(d) == ["third", "second"], "fourth to go")
            await browser.click("#cancel-turn")
            await browser.element('.marker[data-type="turn.cancelled"]')
            await browser.element(".msg.assistant.cut .text", "Thinking about the first")
            await browser.element(".msg.assistant:not(.streaming) .text", "second answered")
            await browser.until(lambda d: queue_of(d) == [], "the queue to empty")
            prompts = await browser.run(
                lambda: [
                    e.text for e in browser.driver.find_elements("css selector", ".msg.user .text")
                ]
            )
    assert prompts == ["first", "third", "second"]
    asked = [request["messages"][-1]["content"] for request in model.requests]
    assert asked[0] == "first" and asked[1:] == ["third", "second"]
    assert len(model.requests) == 3


ROWS = "return [...document.querySelectorAll('#actors tbody tr')].map(r => r.dataset.actor)"


def choose(driver: WebDriver, select: str, value: str) -> None:
    Select(driver.find_element("id", select)).select_by_value(value)


def queue_of(driver: WebDriver) -> list[str]:
    return [e.text for e in driver.find_elements("css selector", "#queue li .text")]


async def test_an_actors_page_resumes_by_seq_after_the_server_restarts_and_can_stop_it(
    tmp_path, browser
):
    ports = ("--port", str(free_port()), "--console-port", str(free_port()))
    with ScriptedModel([]) as model, trio.fail_after(180):
        async with console(tmp_path, model, *ports) as served:
            async with connect_to(served) as wire:
                await wire.ok("send", to="counter/c1", type="add", body={"n": 1})
                await wire.ok("send", to="counter/c1", type="add", body={"n": 2})
            url, _, token = console_url(served.line)
            await browser.get(url + f"#token={token}")
            await browser.click('a[href="#/actor/counter/c1"]')
            await browser.element('.marker[data-type="counted"][data-seq="3"]')
            served.process.send_signal(signal.SIGTERM)
            await browser.element('#connection[data-state="reconnecting"]')
            assert await served.process.wait() == 0
        async with console(tmp_path, model, *ports) as again:
            await browser.element('#connection[data-state="connected"]')
            async with connect_to(again) as wire:
                await wire.ok("send", to="counter/c1", type="add", body={"n": 4})
            await browser.element('.marker[data-type="counted"]', '"count": 7')
            seqs = await browser.script(
                "return [...document.querySelectorAll('.marker')].map(m => m.dataset.seq)"
            )
            await browser.click("#stop")
            await browser.run(lambda: browser.driver.switch_to.alert.accept())
            await browser.element("#actor-status", "stopped")
            stop_hidden = await browser.script("return document.getElementById('stop').hidden")
    assert seqs == [str(seq) for seq in range(1, len(seqs) + 1)]  # no gap, no duplicate
    assert stop_hidden is True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_prompt_sent_to_steer_joins_the_running_turn_at_its_next_model_call(
    tmp_path, browser
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [
        tool_call("write_file", {"path": "a.txt", "content": "a"}, call_id="call_s"),
        text("Written, and kept short."),
    ]
    with ScriptedModel(script) as model, trio.fail_after(180):
        async with console(tmp_path, model) as served, connect_to(served) as wire:
            spec = {"workspace": str(workspace), "approvals": "ask"}
            await wire.ok("spawn", kind="session", name="s5", spec=spec)
            url, _, token = console_url(served.line)
            await browser.get(url + f"#token={token}")
            await browser.click('a[href="#/actor/session/s5"]')
            await browser.type("#prompt", "write a.txt")
            await browser.click("#send-prompt")
            waiting = '.tool[data-call-id="call_s"][data-status="awaiting approval"]'
            await browser.element(waiting)
            await browser.run(
                lambda: Select(browser.driver.find_element("id", "prompt-mode")).select_by_value(
                    "steer"
                )
            )
            await browser.type("#prompt", "and keep it short")
            await browser.click("#send-prompt")
            await browser.element('.marker[data-type="steer.accepted"]')
            await browser.click(f"{waiting} button.approve")
            await browser.element('.msg.user[data-type="turn.steered"] .text', "and keep it short")
            await browser.element(".msg.assistant:not(.streaming) .text", "kept short")
            turns = await browser.script(
                "return document.querySelectorAll('.msg.user[data-type=\"turn.started\"]').length"
            )
    assert turns == 1
    assert len(model.requests) == 2
    assert model.requests[1]["messages"][-1] == {"role": "user", "content": "and keep it short"}
