"""``callboard repl``: a prompt for poking actors, as its own gateway client.

prompt_toolkit runs in a worker thread beside trio (its async mode is
asyncio-only): ``session.prompt`` blocks that thread while trio keeps the
connection, the ``tail`` tasks and the commands going. Under
``patch_stdout(raw=True)`` whatever trio prints lands above the prompt, so
tailed events scroll by while a command is being typed.

When stdin is not a terminal there is no prompt, no completion and no
history: lines are read plainly, so ``printf 'ls\\nquit\\n' | callboard repl``
scripts it; the exit code is then 1 if any command failed.

Ctrl-C at the prompt clears the line; while a command runs it cancels that
command; Ctrl-D or ``quit`` leaves.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging
import os
import shlex
import signal
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import trio

from .._version import __version__
from ..client import Backoff, Client, ConnectionFailed, connect
from ..errors import CallboardError
from ._commands import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    add_common,
    token_of,
)
from ._jobs import JOBS
from ._nodes import NODES
from ._output import OUTPUT
from ._tailing import tail
from ._task_verbs import TASK
from ._verbs import VERBS as _CLI_VERBS
from ._verbs import Output
from ._verbs_attach import ATTACH
from ._verbs_operator import ADDRESS_FIRST, OPERATOR_VERBS

# The REPL offers every verb the command line has, jobs included.
VERBS = {**_CLI_VERBS, JOBS.name: JOBS, NODES.name: NODES, **OPERATOR_VERBS}
VERBS[OUTPUT.name] = OUTPUT
VERBS[TASK.name] = TASK
VERBS.update(ATTACH)

__all__ = ["add_parsers"]

PROMPT = "callboard> "
_ADDRESS_FIRST = {"send", "inspect", "stop", "tail", "untail", "output", *ADDRESS_FIRST}
_ADDRESS_FIRST |= set(ATTACH)
_EXTRA_HELP = {
    "untail": ("untail [ADDRESS]", "stop printing an actor's events (all, without ADDRESS)"),
    "help": ("help [COMMAND]", "list the commands, or explain one"),
    "quit": ("quit", "leave the REPL (Ctrl-D too)"),
}


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "repl",
        help="an interactive prompt for poking actors over the gateway",
        description="An interactive prompt: the verbs of the small commands, tab "
        "completion of commands and live actor addresses, history in ~/.callboard_history "
        "($CALLBOARD_HISTORY), and tail that prints events above the prompt.",
    )
    add_common(parser)
    parser.set_defaults(func=run_repl)


def run_repl(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(logging.Formatter("callboard: %(message)s"))
    logging.getLogger("callboard").addHandler(handler)
    args.history = os.path.expanduser(os.environ.get("CALLBOARD_HISTORY", "~/.callboard_history"))
    if sys.stdin.isatty() and importlib.util.find_spec("prompt_toolkit") is None:
        print(
            "callboard: the REPL on a terminal needs prompt_toolkit (pip install prompt_toolkit); "
            "piped input works without it",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        return trio.run(_main, args)
    except KeyboardInterrupt:
        return EXIT_OK


class _Stderr:
    """Looks ``sys.stderr`` up on every write, so log lines follow ``patch_stdout``."""

    def write(self, text: str) -> None:
        sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _Usage(Exception):
    """A command line the REPL cannot parse; the message says why."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports instead of exiting: a typo must not end the REPL."""

    def error(self, message: str) -> Any:
        raise _Usage(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise _Usage(message.strip() if message else "")


def _parsers() -> dict[str, _Parser]:
    parsers: dict[str, _Parser] = {}
    for verb in VERBS.values():
        parser = _Parser(prog=verb.name, description=verb.summary)
        verb.add_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print JSON instead of columns")
        parsers[verb.name] = parser
    return parsers


class Repl:
    """The commands, the running tails and the address cache behind one prompt."""

    def __init__(self, client: Client, nursery: trio.Nursery) -> None:
        self.client = client
        self.addresses: list[str] = []
        self.failed = False
        self._nursery = nursery
        self._parsers = _parsers()
        self._tails: dict[str, trio.CancelScope] = {}
        self._running: trio.CancelScope | None = None

    @property
    def tails(self) -> list[str]:
        return sorted(self._tails)

    async def refresh_addresses(self) -> list[str]:
        """The live addresses, from ``list``; the old ones if the server is slow or away."""
        with trio.move_on_after(1.0):
            try:
                self.addresses = sorted(a.actor for a in await self.client.list())
            except CallboardError:
                pass
        return self.addresses

    async def execute(self, line: str) -> bool:
        """Run one line; False means leave. Errors are printed, never raised."""
        try:
            words = shlex.split(line)
        except ValueError as exc:
            return self._fail(f"cannot split that line: {exc}")
        if not words:
            return True
        name, rest = words[0], words[1:]
        if name in ("quit", "exit"):
            return False
        with trio.CancelScope() as scope:
            self._running = scope
            try:
                await self._dispatch(name, rest)
            except _Usage as exc:
                if str(exc):
                    self._fail(str(exc))
            except CallboardError as exc:
                self._fail(str(exc))
            finally:
                self._running = None
        if scope.cancelled_caught:
            _say(f"{name}: interrupted")
        return True

    def interrupt(self) -> bool:
        """Cancel the running command; False when none runs."""
        if self._running is None:
            return False
        self._running.cancel()
        return True

    async def _dispatch(self, name: str, rest: list[str]) -> None:
        if name == "help":
            self._help(rest)
        elif name == "untail":
            self._untail(rest)
        elif name not in self._parsers:
            raise _Usage(f"unknown command {name!r}; type help for the list")
        else:
            args = self._parsers[name].parse_args(rest)
            out = Output(write=_say, json=args.json)
            if name == "tail":
                await self._start_tail(args, out)
            else:
                if await VERBS[name].run(self.client, args, out):
                    self.failed = True  # the verb's outcome was no success (task wait)
                if name in ("spawn", "stop", "delete"):
                    await self.refresh_addresses()

    async def _start_tail(self, args: argparse.Namespace, out: Output) -> None:
        if args.address in self._tails:
            raise _Usage(f"already tailing {args.address}")
        await self._nursery.start(self._tail, args, out)

    async def _tail(
        self, args: argparse.Namespace, out: Output, *, task_status: trio.TaskStatus[None]
    ) -> None:
        address = args.address
        started = False

        def subscribed() -> None:
            nonlocal started
            task_status.started()
            started = True
            _say(f"tailing {address}; untail {address} to stop")

        with trio.CancelScope() as scope:
            self._tails[address] = scope
            try:
                await tail(self.client, address, args.after, out, subscribed=subscribed)
                _say(f"stopped tailing {address}: it has ended")
            except CallboardError as exc:
                if not started:
                    raise  # the tail command itself failed: execute() reports it
                self._fail(f"tail {address}: {exc}")
            finally:
                del self._tails[address]

    def _untail(self, rest: list[str]) -> None:
        for address in rest or self.tails:
            scope = self._tails.get(address)
            if scope is None:
                raise _Usage(f"not tailing {address}")
            scope.cancel()
            _say(f"stopped tailing {address}")

    def _help(self, rest: list[str]) -> None:
        if not rest:
            rows = [(_usage(p), p.description or "") for p in self._parsers.values()]
            rows += list(_EXTRA_HELP.values())
            width = max(len(usage) for usage, _ in rows)
            for usage, summary in rows:
                _say(f"  {usage.ljust(width)}  {summary}")
            _say("help COMMAND explains one; Tab completes commands and addresses")
        elif rest[0] in self._parsers:
            _say(self._parsers[rest[0]].format_help().rstrip())
        elif rest[0] in _EXTRA_HELP:
            usage, summary = _EXTRA_HELP[rest[0]]
            _say(f"usage: {usage}\n\n{summary}")
        else:
            raise _Usage(f"no command {rest[0]!r}; type help for the list")

    def _fail(self, message: str) -> bool:
        self.failed = True
        print(f"error: {message}", file=sys.stderr, flush=True)
        return True

    def commands(self) -> list[str]:
        return sorted([*self._parsers, *_EXTRA_HELP])

    def completions(self, words: list[str], current: str) -> Iterator[str]:
        """Candidates for the word being typed, ``words`` being the ones before it."""
        if not words:
            candidates: Iterable[str] = self.commands()
        elif words[0] == "help" and len(words) == 1:
            candidates = self.commands()
        elif words[0] == "untail" and len(words) >= 1:
            candidates = self.tails
        elif words[0] in _ADDRESS_FIRST and len(words) == 1:
            candidates = self._live_addresses()
        elif words[0] == "spawn" and len(words) == 1:
            candidates = sorted({a.split("/", 1)[0] for a in self._live_addresses()})
        else:
            candidates = ()
        return (c for c in candidates if c.startswith(current))

    def _live_addresses(self) -> list[str]:
        # Called in the prompt's thread on Tab: ask trio for a fresh list.
        try:
            return trio.from_thread.run(self.refresh_addresses)
        except (RuntimeError, trio.Cancelled):
            return self.addresses


def _usage(parser: argparse.ArgumentParser) -> str:
    return parser.format_usage().removeprefix("usage: ").replace("[-h] ", "").strip()


def _say(text: str) -> None:
    print(text, flush=True)


async def _main(args: argparse.Namespace) -> int:
    interactive = sys.stdin.isatty()
    failed = False
    try:
        async with connect(
            args.url,
            token_of(args),
            client_name=f"callboard-repl/{__version__}",
            reconnect=Backoff(),
        ) as client:
            async with trio.open_nursery() as nursery:
                repl = Repl(client, nursery)
                nursery.start_soon(_interrupts, repl, nursery.cancel_scope)
                if interactive:
                    await _prompt_loop(repl, args.history)
                else:
                    await _line_loop(repl)
                failed = repl.failed
                nursery.cancel_scope.cancel()
    except ConnectionFailed as exc:
        print(f"callboard: {exc}", file=sys.stderr, flush=True)
        return EXIT_UNREACHABLE
    return EXIT_ERROR if failed and not interactive else EXIT_OK


async def _interrupts(repl: Repl, main: trio.CancelScope) -> None:
    """SIGINT (a Ctrl-C while no prompt is up) cancels the running command, or leaves."""
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            if not repl.interrupt():
                main.cancel()


async def _line_loop(repl: Repl) -> None:
    while True:
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line or not await repl.execute(line.strip()):
            return


async def _prompt_loop(repl: Repl, history: str) -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.patch_stdout import patch_stdout

    session: PromptSession[str] = PromptSession(
        history=FileHistory(history),
        completer=_completer(repl),
        complete_while_typing=False,
    )
    with patch_stdout(raw=True):
        _say(f"connected to {repl.client.url}; help lists the commands, quit leaves")
        while True:
            await repl.refresh_addresses()
            prompt = functools.partial(session.prompt, PROMPT)
            try:
                line = await trio.to_thread.run_sync(prompt, abandon_on_cancel=True)
            except KeyboardInterrupt:
                continue
            except EOFError:
                return
            if not await repl.execute(line):
                return


def _completer(repl: Repl) -> Any:
    """Commands first, then live addresses (or kinds for spawn, or tails for untail)."""
    from prompt_toolkit.completion import Completer, Completion

    class ReplCompleter(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Iterator[Completion]:
            text = document.text_before_cursor
            words = text.split()
            current = "" if not words or text.endswith(" ") else words.pop()
            for candidate in repl.completions(words, current):
                # A trailing space, as a shell adds: the next word can follow at once.
                yield Completion(candidate + " ", -len(current), display=candidate)

    return ReplCompleter()
