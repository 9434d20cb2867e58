"""``callboard output job/ID [--follow]``: what a background job wrote, while it runs and after.

The job actor keeps its output in the store, up to its output cap
(``callboard.jobs``), so this reads it through the gateway's ``output`` op
from byte ``--after`` (default 0) on. Without ``--follow`` it prints what is
held now and exits 0; with it, it waits for more (a ``job.output`` event
says when) until the job has ended and all of it is printed. The text is
written as the job wrote it (the REPL writes whole lines). With ``--json``,
one object per read: ``text``, ``next``, ``running``, ``truncated``,
``capped``. A job that wrote past its cap gets one line on stderr saying so.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import attrs

from ..client import Client, ConnectionFailed
from ..views import OutputPage
from ._commands import add_common, run_command
from ._render import LineWriter
from ._verbs import Output, Verb, whole_number

__all__ = ["OUTPUT", "add_parsers", "read_all"]


def _job(text: str) -> str:
    """An argparse ``type``: ``job/ID`` or ``ID`` as the address ``job/ID``."""
    return text if "/" in text else f"job/{text}"


def _output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", metavar="JOB", type=_job, help="the job, job/ID or ID")
    p.add_argument("--after", metavar="BYTES", type=whole_number, default=0,
                   help="start at this byte of the output (default 0: from the start)")  # fmt: skip
    p.add_argument("--follow", action="store_true",
                   help="wait for more until the job has ended")  # fmt: skip


async def read_all(client: Client, job: str, after: int, show: Any, *, follow: bool) -> OutputPage:
    """Hand each read of ``job``'s output from ``after`` to ``show``; return the last.

    Reads until what is held is all read; with ``follow``, then waits for a
    ``job.output`` (or any other) event of the job and reads again, until
    the job has ended. Subscribed before the first read, so no event that
    announces more output can fall between a read and the wait; from the
    job's last stored event, so that one stored while the connection was
    being healed (its end) is replayed rather than missed.
    """
    if not follow:
        return await _read_held(client, job, after, show)
    head = (await client.inspect(job)).head
    async with client.subscribe(job, after=head) as events:
        page = await _read_held(client, job, after, show)
        while page.running:
            async for _ in events:
                break  # something happened: read again
            else:
                raise ConnectionFailed(f"the events of {job} ended before it did")
            page = await _read_held(client, job, page.next, show)
        return page


async def _read_held(client: Client, job: str, after: int, show: Any) -> OutputPage:
    """Every read from ``after`` up to the end of what is held now."""
    page = await client.output(job, after)
    show(page)
    while page.truncated:
        page = await client.output(job, page.next)
        show(page)
    return page


async def _output(client: Client, args: argparse.Namespace, out: Output) -> None:
    lines = LineWriter(out.write) if out.raw is None else None
    write = out.raw or lines or out.write

    def show(page: OutputPage) -> None:
        if out.json:
            out.emit("", attrs.asdict(page))
        elif page.text:
            write(page.text)

    try:
        page = await read_all(client, args.job, args.after, show, follow=args.follow)
    finally:
        if lines is not None:
            lines.flush()
    if page.capped:
        print(
            f"callboard: {args.job} wrote more than its output cap; what came after "
            f"byte {page.next} was not kept",
            file=sys.stderr,
            flush=True,
        )


OUTPUT = Verb("output", "print a job's output (--follow: as it comes, until the job ends)",
              _output_args, _output)  # fmt: skip


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(OUTPUT.name, help=OUTPUT.summary, description=OUTPUT.summary)
    OUTPUT.add_arguments(parser)
    add_common(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object per read")
    parser.set_defaults(func=lambda args: run_command(OUTPUT, args))
