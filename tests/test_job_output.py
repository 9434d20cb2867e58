"""A job's output through the gateway's ``output`` op: live while it runs, kept after it ends.

Real jobs under ``/bin/sh``, watched by their ``job`` actors in a real
runtime behind the real gateway; the client is `callboard.client`. Tests
wait on the job's events (``job.output`` once a copy is committed,
``job.finished``), never on time.
"""

from __future__ import annotations

import os

import gateway_wire as wire
import pytest
import trio
from reading_helpers import job_event, serving_with, start_job
from shell_helpers import marked_processes, no_leaked_job_processes  # noqa: F401

import callboard
from callboard.client import connect
from callboard.gateway import add_client_token
from callboard.views import OutputPage

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done; "


async def output_once(client, address, events, want: str) -> OutputPage:
    """The output once it reads ``want``: read again after each ``job.output``."""
    page = await client.output(address)
    while page.text != want:
        await job_event(events, "job.output")
        page = await client.output(address)
    return page


async def test_a_running_jobs_output_is_read_as_it_comes_and_kept_after_its_files_are_gone(
    tmp_path,
):
    with trio.fail_after(30):
        async with serving_with(tmp_path / "data", job_output_interval=0.05) as server:
            assert server.rt is not None
            job = await start_job(
                server.rt, tmp_path, "counter/a", "printf 'one\\n'; " + WAIT_GO + "printf 'two\\n'"
            )
            address = f"job/{job.job_id}"
            async with connect(server.url) as client, client.subscribe(address) as events:
                running = await output_once(client, address, events, "one\n")
                (tmp_path / "go").touch()
                await job_event(events, "job.finished")
                for path in job.files.every_file:  # what is read now comes from the store
                    path.unlink(missing_ok=True)
                ended = await client.output(address)
                rest = await client.output(address, after=4)
                empty = await client.output(address, after=8)
    assert running == OutputPage("one\n", 4, running=True, truncated=False)
    assert ended == OutputPage("one\ntwo\n", 8, running=False, truncated=False)
    assert rest == OutputPage("two\n", 8, running=False, truncated=False)
    assert empty == OutputPage("", 8, running=False, truncated=False)


async def test_output_past_the_cap_is_not_kept_and_pages_never_split_a_character(tmp_path):
    (tmp_path / "big.txt").write_text("é" * 3000)  # 6000 bytes, two to a character
    with trio.fail_after(30):
        async with serving_with(tmp_path / "data", job_output_cap=4096) as server:
            assert server.rt is not None
            async with connect(server.url) as client:
                job = await start_job(server.rt, tmp_path, "counter/a", WAIT_GO + "cat big.txt")
                address = f"job/{job.job_id}"
                async with client.subscribe(address) as events:
                    (tmp_path / "go").touch()
                    await job_event(events, "job.finished")
                pages = [await client.output(address, 0, limit=1001)]
                while pages[-1].truncated:
                    pages.append(await client.output(address, pages[-1].next, limit=1001))
                with pytest.raises(callboard.BadRequest) as past:
                    await client.output(address, after=4097)
    assert [(p.next, p.truncated, p.capped) for p in pages] == [
        (1000, True, True), (2000, True, True), (3000, True, True), (4000, True, True),
        (4096, False, True),
    ]  # fmt: skip
    assert "".join(p.text for p in pages) == "é" * 2048
    assert str(past.value) == (
        f"after=4097 is past the end of the output of 'job/{job.job_id}', which holds 4096 "
        "bytes so far; read from after=4096 or less"
    )


async def test_output_copied_before_a_restart_is_neither_lost_nor_repeated_after_it(tmp_path):
    with trio.fail_after(45):
        async with serving_with(tmp_path / "data", job_output_interval=0.05) as server:
            assert server.rt is not None
            job = await start_job(
                server.rt, tmp_path, "counter/a", "printf 'one\\n'; " + WAIT_GO + "printf 'two\\n'"
            )
            address = f"job/{job.job_id}"
            async with connect(server.url) as client, client.subscribe(address) as events:
                before = await output_once(client, address, events, "one\n")
            await server.restart()  # the job runs on, detached; its actor re-attaches
            async with connect(server.url) as client, client.subscribe(address) as events:
                (tmp_path / "go").touch()
                await job_event(events, "job.finished")
                after = await client.output(address)
    assert before == OutputPage("one\n", 4, running=True, truncated=False)
    assert after == OutputPage("one\ntwo\n", 8, running=False, truncated=False)


async def test_output_is_refused_for_what_is_no_job_and_for_a_job_that_is_not_there(tmp_path):
    with trio.fail_after(20):
        async with serving_with(tmp_path / "data") as server, connect(server.url) as client:
            await client.send("counter/a", "add")
            with pytest.raises(callboard.BadRequest) as not_a_job:
                await client.output("counter/a")
            with pytest.raises(callboard.UnknownActor) as missing:
                await client.output("job/nope")
    assert str(not_a_job.value) == (
        "output reads a job's output; 'counter/a' is a counter, not a job"
    )
    assert str(missing.value) == "there is no actor at 'job/nope'"


async def test_a_stopped_jobs_output_is_kept_with_its_end(tmp_path):
    os.mkfifo(tmp_path / "printed")
    command = "printf 'one\\n'; echo > printed; " + WAIT_GO
    with trio.fail_after(30):
        async with serving_with(tmp_path / "data", job_output_interval=3600) as server:
            assert server.rt is not None
            job = await start_job(server.rt, tmp_path, "counter/a", command)
            address = f"job/{job.job_id}"
            async with connect(server.url) as client:
                # The job has printed once it writes to the fifo; no copy has run yet
                # (the interval is an hour), so the stop is what copies it.
                await trio.to_thread.run_sync(
                    (tmp_path / "printed").read_text, abandon_on_cancel=True
                )
                status = await client.stop(address)
                page = await client.output(address)
    assert status == "stopped"
    assert page == OutputPage("one\n", 4, running=False, truncated=False)


async def test_a_token_that_does_not_reach_the_job_may_not_read_its_output(tmp_path):
    viewer = add_client_token(tmp_path / "data", "viewer", access="read", actors=["counter/*"])
    with trio.fail_after(20):
        async with serving_with(tmp_path / "data") as server:
            async with connect(server.url, token=viewer) as client:
                with pytest.raises(callboard.Forbidden) as refused:
                    await client.output("job/ab12")
    assert str(refused.value) == (
        "the token 'viewer' (read access to counter/*) may not read the output of 'job/ab12'; "
        "ask the operator for a token that reaches it"
    )


async def test_the_output_reply_is_the_frame_docs_protocol_shows(tmp_path):
    with trio.fail_after(30):
        async with serving_with(tmp_path / "data") as server:
            assert server.rt is not None
            job = await start_job(server.rt, tmp_path, "counter/a", WAIT_GO + "printf 'hello'")
            address = f"job/{job.job_id}"
            async with connect(server.url) as client, client.subscribe(address) as events:
                (tmp_path / "go").touch()
                await job_event(events, "job.finished")
            async with wire.connect(server.url) as raw:
                whole = await raw.ok("output", job=address)
                part = await raw.ok("output", job=address, after=1, limit=2)
                null_fields = await raw.ok("output", job=address, after=None, limit=None)
                unknown = await raw.request("output", job="job/nope")
    assert whole == {"text": "hello", "next": 5, "running": False, "truncated": False,
                     "capped": False}  # fmt: skip
    assert part == {"text": "el", "next": 3, "running": False, "truncated": True,
                    "capped": False}  # fmt: skip
    assert null_fields == whole
    assert (unknown["code"], unknown["message"]) == (
        "unknown_actor", "there is no actor at 'job/nope'"
    )  # fmt: skip
