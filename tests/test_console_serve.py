"""The web console's server inside a real `callboard serve`: its files and their
headers, what it refuses (other hosts, other paths, other methods), the
gateway's Origin check for the console's origin, and --no-console."""

from __future__ import annotations

import errno
import re
import socket
import sys
from pathlib import Path

import pytest
import trio
from console_helpers import console_url, http_request
from gateway_wire import connect
from serve_helpers import serve_env, serving
from websockets.exceptions import InvalidStatus

from callboard.console import DEFAULT_CONSOLE_PORT

STATIC = Path(__file__).parent.parent / "callboard" / "console" / "static"


async def test_the_console_serves_its_page_with_a_strict_policy_and_no_token_in_it(tmp_path):
    with trio.fail_after(60):
        async with serving(tmp_path / "data", "--console-port", "0") as served:
            _, port, token = console_url(served.line)
            gateway_port = int(re.search(r":(\d+)/v1", served.url).group(1))
            page = await http_request(port, "/")
            files = {path.name: await http_request(port, f"/{path.name}")
                     for path in sorted(STATIC.iterdir())}  # fmt: skip
    assert token == served.token
    assert page.status == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-content-type-options"] == "nosniff"
    policy = page.headers["content-security-policy"].split("; ")
    assert "script-src 'self'" in policy
    assert f"connect-src ws://127.0.0.1:{gateway_port}" in policy
    assert "default-src 'none'" in policy
    assert not any("unsafe" in directive for directive in policy)
    assert f'content="{served.url}"'.encode() in page.body  # the page is told the gateway
    assert b"<script>" not in page.body and b'<script type="module">' not in page.body
    assert {name: reply.status for name, reply in files.items()} == {name: 200 for name in files}
    assert files["app.js"].headers["content-type"] == "text/javascript; charset=utf-8"
    assert files["console.css"].headers["content-type"] == "text/css; charset=utf-8"
    assert all(token.encode() not in reply.body for reply in [page, *files.values()])
    assert all(reply.headers["cache-control"] == "no-store" for reply in files.values())


TRAVERSALS = [
    "/../pyproject.toml",
    "/..%2f_server.py",
    "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/../_server.py",
    "/_server.py",
    "/__init__.py",
    "//etc/passwd",
    "/etc/passwd",
    "/app.js/../_files.py",
    "/app.js%00.html",
    "/./app.js",
    "/APP.JS",
    "http://127.0.0.1/_server.py",
]


async def test_paths_outside_the_packaged_files_are_not_found(tmp_path):
    with trio.fail_after(60):
        async with serving(tmp_path / "data", "--console-port", "0") as served:
            _, port, _ = console_url(served.line)
            replies = {path: await http_request(port, path) for path in TRAVERSALS}
            found = await http_request(port, "/app.js?v=1")
    assert {path: reply.status for path, reply in replies.items()} == {
        path: 404 for path in TRAVERSALS
    }
    assert all(b"import" not in reply.body for reply in replies.values())
    assert found.status == 200


async def test_a_request_for_another_host_another_method_or_no_http_is_refused(tmp_path):
    with trio.fail_after(60):
        async with serving(tmp_path / "data", "--console-port", "0") as served:
            _, port, _ = console_url(served.line)
            rebound = await http_request(port, "/", host=f"evil.example:{port}")
            other_port = await http_request(port, "/", host="127.0.0.1:1")
            localhost = await http_request(port, "/", host=f"localhost:{port}")
            posted = await http_request(port, "/", method="POST")
            garbage = await http_request(port, "/", raw=b"\x16\x03\x01 not http\r\n\r\n")
            no_host = await http_request(port, "/", raw=b"GET / HTTP/1.0\r\n\r\n")
    assert (rebound.status, other_port.status, localhost.status) == (421, 421, 200)
    assert b"is not the console's host" in rebound.body
    assert (posted.status, posted.headers["allow"]) == (405, "GET, HEAD")
    assert garbage.status == 400
    assert no_host.status == 421


async def test_the_gateway_admits_the_console_origin_and_refuses_any_other(tmp_path):
    with trio.fail_after(60):
        async with serving(tmp_path / "data", "--console-port", "0") as served:
            _, port, token = console_url(served.line)
            welcomed = []
            for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
                async with connect(served.url, token=token, header_token=None,
                                   origin=origin) as client:  # fmt: skip
                    welcomed.append((await client.request("ping"))["op"])
            refused = []
            for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}",
                           f"https://127.0.0.1:{port}", "null"):  # fmt: skip
                with pytest.raises(InvalidStatus) as refusal:
                    async with connect(served.url, token=token, origin=origin):
                        pass  # pragma: no cover
                refused.append(refusal.value.response.status_code)
    assert welcomed == ["ok", "ok"]
    assert refused == [403, 403, 403, 403]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_no_console_serves_nothing_and_names_no_console(tmp_path):
    port = _free_port()
    with trio.fail_after(60):
        async with serving(tmp_path / "data", "--no-console", "--console-port", str(port)
                           ) as served:  # fmt: skip
            async with connect(served.url, token=served.token, header_token=None) as client:
                await client.ok("ping")  # the gateway is up
            with socket.socket() as probe:
                refused = probe.connect_ex(("127.0.0.1", port))  # loopback: answered at once
    assert refused == errno.ECONNREFUSED
    assert "console at" not in served.line
    assert not any("callboard.console" in line for line in served.stderr)


async def test_the_default_port_taken_moves_the_console_to_a_free_one(tmp_path):
    holder = socket.socket()
    try:
        try:
            holder.bind(("127.0.0.1", DEFAULT_CONSOLE_PORT))
            holder.listen()
        except OSError as exc:  # another server holds it already: just as taken
            assert exc.errno == errno.EADDRINUSE
        with trio.fail_after(60):
            async with serving(tmp_path / "data") as served:
                _, port, _ = console_url(served.line)
                page = await http_request(port, "/")
                await served.wait_logged(f"port {DEFAULT_CONSOLE_PORT} is in use")
    finally:
        holder.close()
    assert port != DEFAULT_CONSOLE_PORT
    assert page.status == 200


async def test_a_console_port_asked_for_and_taken_ends_serve_naming_it(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, "-m", "callboard", "serve", "--data", str(tmp_path / "data"),
                 "--port", "0", "--console-port", str(port)],
                capture_stdout=True, capture_stderr=True, check=False, env=serve_env(),
                cwd=tmp_path,
            )  # fmt: skip
    last = done.stderr.decode().strip().splitlines()[-1]
    assert done.returncode == 1
    assert last.startswith(f"callboard serve: [Errno {errno.EADDRINUSE}] cannot serve the console")
    assert f"127.0.0.1:{port}" in last and "--console-port" in last
    assert done.stdout == b""


def test_the_packaged_files_hold_no_inline_script_and_load_nothing_remote():
    html = (STATIC / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="app.js">']
    assert re.findall(r"\s on[a-z]+=", html) == []  # no inline handlers: the policy forbids them
    assert re.findall(r"<style|style=", html) == []
    for path in sorted(STATIC.iterdir()):
        text = path.read_text()
        assert re.findall(r"https?://(?!www\.w3\.org/2000/svg)", text) == [], path.name
