"""``callboard repl`` in a real pseudo-terminal (pexpect), and fed by a pipe.

The gateway runs in the test's process; the REPL is a child process on a
pty. pexpect blocks, so each exchange with the child runs in a worker
thread while trio keeps serving. ``PROMPT_TOOLKIT_NO_CPR=1`` stops
prompt_toolkit from asking the terminal where its cursor is; the REPL
completes only on Tab, so what Tab does is deterministic. A terminal
redraws as it likes, so the assertions look for the text a step must
produce, and the commands' own output proves what was typed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pexpect
import trio
from client_helpers import CALLBOARD, REPO, serving, subprocess_env

from callboard.client import connect

TERMINAL = {"PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}


class Terminal:
    """A ``callboard repl`` child on a pty, driven from trio through worker threads."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child

    async def send(self, text: str) -> None:
        await trio.to_thread.run_sync(self.child.send, text)

    async def expect(self, text: str) -> None:
        await trio.to_thread.run_sync(self.child.expect_exact, text, abandon_on_cancel=True)

    async def exit_status(self) -> int | None:
        await trio.to_thread.run_sync(self.child.expect, pexpect.EOF, abandon_on_cancel=True)
        self.child.close()
        return self.child.exitstatus


@asynccontextmanager
async def terminal(url: str, history: Path) -> AsyncIterator[Terminal]:
    env = subprocess_env(CALLBOARD_HISTORY=str(history), **TERMINAL)
    child = pexpect.spawn(
        CALLBOARD[0],
        [*CALLBOARD[1:], "repl", "--url", url],
        cwd=str(REPO),
        env=env,
        encoding="utf-8",
        timeout=15,
        dimensions=(40, 200),
    )
    try:
        term = Terminal(child)
        await term.expect("help lists the commands, quit leaves")
        await term.expect("callboard>")
        yield term
    finally:
        child.close(force=True)


async def test_tab_completes_a_command_and_an_address_spawned_after_the_repl_started(tmp_path):
    with trio.fail_after(30):
        async with serving(tmp_path / "data") as server:
            async with terminal(server.url, tmp_path / "history") as term:
                async with connect(server.url) as client:
                    await client.spawn("box", name="alpha")
                await term.send("insp\t")
                await term.expect("ect")
                await term.send("box/al\t")
                await term.expect("pha")
                await term.send("\r")
                # Only "inspect box/alpha" in full prints this line.
                await term.expect("actor       box/alpha")
                await term.send("quit\r")
                assert await term.exit_status() == 0


async def test_tail_prints_an_event_above_the_prompt_while_a_command_is_being_typed(tmp_path):
    with trio.fail_after(30):
        async with serving(tmp_path / "data") as server:
            async with terminal(server.url, tmp_path / "history") as term:
                await term.send("tail counter/a\r")
                await term.expect("tailing counter/a; untail counter/a to stop")
                await term.send("ls --ki")
                await term.expect("--ki")
                async with connect(server.url) as client:
                    await client.send("counter/a", "add", {"n": 3})
                await term.expect('counted  {"total":3}')
                # The half-typed line is drawn again below the event, and finishes.
                await term.expect("ls --ki")
                await term.send("nd counter\r")
                await term.expect("counter/a  active")
                await term.send("untail\r")
                await term.expect("stopped tailing counter/a")
                await term.send("quit\r")
                assert await term.exit_status() == 0


async def test_help_lists_every_command_and_explains_one_and_history_is_kept(tmp_path):
    history = tmp_path / "history"
    with trio.fail_after(30):
        async with serving(tmp_path / "data") as server:
            async with terminal(server.url, history) as term:
                await term.send("help\r")
                for usage in [
                    "send [--key K] [--wait] [--json] ADDRESS TYPE [JSON]",
                    "spawn [--name N] [--json] KIND [JSON]",
                    "ls [--kind K] [--status S] [--json]",
                    "inspect [--json] ADDRESS",
                    "stop [--json] ADDRESS",
                    "tail [--after N] [--json] ADDRESS",
                    "ping [--json]",
                    "approvals [--json] [ADDRESS]",
                    "approve [--reason TEXT] [--always] [--json] ADDRESS [CALL_ID]",
                    "deny [--reason TEXT] [--json] ADDRESS [CALL_ID]",
                    "dead-letters [--json] [ADDRESS]",
                    "requeue [--json] ID",
                    "delete [--json] ADDRESS",
                    "untail [ADDRESS]",
                    "help [COMMAND]",
                    "quit",
                ]:
                    await term.expect(usage)
                await term.send("help tail\r")
                await term.expect("usage: tail [-h] [--after N] [--json] ADDRESS")
                await term.expect("first replay every stored event with a seq above N")
                await term.send("quit\r")
                assert await term.exit_status() == 0
    entries = [line for line in history.read_text().splitlines() if line.startswith("+")]
    assert entries == ["+help", "+help tail", "+quit"]


async def test_ctrl_c_clears_the_line_and_ctrl_d_leaves(tmp_path):
    with trio.fail_after(30):
        async with serving(tmp_path / "data") as server:
            async with terminal(server.url, tmp_path / "history") as term:
                await term.send("stop box/never")
                await term.expect("never")
                await term.send("\x03")
                await term.send("ping\r")
                await term.expect("pong from")
                await term.send("\x04")
                assert await term.exit_status() == 0


async def run_piped(url: str, script: bytes) -> tuple[int, list[str], list[str]]:
    done = await trio.run_process(
        [*CALLBOARD, "repl", "--url", url],
        cwd=REPO,
        env=subprocess_env(CALLBOARD_HISTORY=os.devnull),
        stdin=script,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return done.returncode, done.stdout.decode().splitlines(), done.stderr.decode().splitlines()


async def test_piped_lines_run_as_plain_commands_without_a_prompt(tmp_path):
    script = b"spawn box '{\"a\": 1}' --name b1\nls --kind box\nsend box/b1 put\nquit\nls\n"
    with trio.fail_after(30):
        async with serving(tmp_path) as server:
            code, out, err = await run_piped(server.url, script)
    assert (code, err) == (0, [])
    assert out == [
        "box/b1 (spawned)",
        "ACTOR   STATUS  MAILBOX  RESTARTS",
        "box/b1  active  0        0",
        "sent to box/b1 as seq 1",
    ]


async def test_piped_lines_end_at_eof_and_a_failed_command_makes_the_exit_code_1(tmp_path):
    with trio.fail_after(30):
        async with serving(tmp_path) as server:
            script = b"inspect box/nope\ntail box/nope\nbogus\nls\n"
            code, out, err = await run_piped(server.url, script)
    assert (code, out) == (1, ["no actors"])
    assert err == [
        "error: there is no actor at 'box/nope'",
        "error: there is no actor at 'box/nope'; spawn it first",
        "error: unknown command 'bogus'; type help for the list",
    ]
