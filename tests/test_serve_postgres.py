"""`callboard serve --store postgresql://...`: the actors live in the database,
not in the data directory, and the URL's password shows nowhere."""

from __future__ import annotations

import signal

import trio
from serve_helpers import connect_to, serve_env, serving
from test_store_postgres import with_password


async def test_serve_keeps_its_actors_in_postgresql_and_never_shows_the_password(pg_url, tmp_path):
    url = with_password(pg_url, "hunter2-secret")
    seen: list[str] = []
    with trio.fail_after(30):
        # The URL from the environment, as an operator keeps a password.
        async with serving(
            tmp_path / "one", "--node", "n1", env=serve_env(CALLBOARD_STORE=url)
        ) as served:
            shown = served.line.split(", console at ")[0]  # the console's URL follows
            assert shown.endswith(", actors in " + url.replace("hunter2-secret", "***"))
            async with connect_to(served) as client:
                assert await client.ok("send", to="counter/a", type="add") == {
                    "seq": 1, "duplicate": False,
                }  # fmt: skip
                sub = await client.ok("subscribe", actor="counter/a", after=0)
                while (await client.events(sub["sub"], 1))[0]["type"] != "counted":
                    pass
            served.process.send_signal(signal.SIGTERM)
            assert await served.process.wait() == 0
            seen += [served.line, *served.stderr]
        # Another data directory, the same database (--store this time): the
        # actor and its state are there.
        async with serving(tmp_path / "two", "--store", url) as again:
            async with connect_to(again) as client:
                view = await client.ok("inspect", actor="counter/a")
            again.process.send_signal(signal.SIGINT)
            assert await again.process.wait() == 0
            seen += [again.line, *again.stderr]
    assert (view["state"], view["cursor"]) == ({"count": 1}, 1)
    assert not [line for line in seen if "hunter2-secret" in line]
