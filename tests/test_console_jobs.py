"""The console's background jobs, in a real headless Chromium against a real
`callboard serve`: a job's output while it runs and after it exits (the
gateway's ``output`` op, docs/protocol.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import trio
from console_helpers import browser, console, console_url, driver
from scripted_model import ScriptedModel, text, tool_call
from serve_helpers import connect_to

__all__ = ["browser", "driver"]  # the fixtures, for pytest to find here


RELEASE = "while [ ! -e release ]; do sleep 0.05; done"  # the job waits for the test


@contextlib.contextmanager
def _released(workspace: Path) -> Iterator[None]:
    """Let the job end whatever happens: a detached job outlives its server by
    design, and one left waiting would run on after a failed test."""
    try:
        yield
    finally:
        (workspace / "release").touch()


async def test_a_background_job_shows_its_output_while_it_runs_and_after_it_exits(
    tmp_path, browser
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = f"echo first line; {RELEASE}; echo last line"
    script = [
        tool_call("shell_run", {"command": command, "background": True}, call_id="call_j"),
        text("It runs in the background."),
        text("The job has finished."),
    ]
    with ScriptedModel(script) as model, trio.fail_after(180), _released(workspace):
        async with console(tmp_path, model) as served, connect_to(served) as wire:
            spec = {"workspace": str(workspace), "approvals": "always"}
            await wire.ok("spawn", kind="session", name="s4", spec=spec)
            await wire.ok("send", to="session/s4", type="prompt", body={"text": "run it"})
            url, _, token = console_url(served.line)
            await browser.get(url + f"#token={token}")
            await browser.click('nav a[href="#/jobs"]')
            await browser.element("#jobs .card .status", "active")
            await browser.click("#jobs .card summary", "output")
            await browser.element('#jobs .job-output[data-state="running"] .output', "first line")
            running = await browser.run(
                lambda: browser.driver.find_element("css selector", "#jobs .output").text
            )
            (workspace / "release").touch()
            await browser.element('#jobs .job-output[data-state="exited"] .output', "last line")
            await browser.element("#jobs .card .status", "exited")
            job = await browser.run(
                lambda: browser.driver.find_element("css selector", "#jobs .card").get_attribute(
                    "data-actor"
                )
            )
            # The job's own page, after the job's files are gone: its output is kept.
            await browser.click(f'#jobs a[href="#/actor/{job}"]')
            await browser.element('.side .job-output[data-state="exited"] .output', "last line")
            kept = await browser.run(
                lambda: browser.driver.find_element("css selector", ".side .output").text
            )
            await browser.element('.marker[data-type="job.finished"]')
    assert running == "first line"
    assert kept == "first line\nlast line"
