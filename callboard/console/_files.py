"""The console's files: read once from the package, answered by exact name only.

Nothing here joins a request's path to a directory: the files are read into
a table when the server starts, and a request is answered only if its path
is one of the table's keys. So ``/../`` and its encodings, absolute paths,
symbolic links and files added later reach nothing.

Every answer carries the same headers: no caching (the page must never be
served stale next to a newer gateway), ``nosniff``, no framing, no referrer,
and a Content-Security-Policy that allows scripts and styles from the
console's own origin only (no inline script) and connections to the gateway
only. The page learns the gateway's URL from a ``<meta>`` tag filled in
here, not from a second request, so ``connect-src`` names nothing but the
gateway. Pure: no I/O after `read_files`.
"""

from __future__ import annotations

import re
from importlib import resources

import attrs

__all__ = ["GATEWAY_PLACEHOLDER", "Answer", "ConsoleFiles", "read_files"]

GATEWAY_PLACEHOLDER = b"__CALLBOARD_GATEWAY__"
"""Where index.html takes the gateway's URL (in its ``callboard-gateway`` meta tag)."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*\.(html|css|js|svg)$")


@attrs.frozen
class Answer:
    """One HTTP answer: status, headers and body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def read_files() -> dict[str, bytes]:
    """The packaged files of ``callboard/console/static``, by URL path (``/app.js``)."""
    static = resources.files("callboard.console") / "static"
    return {
        f"/{entry.name}": entry.read_bytes()
        for entry in static.iterdir()
        if entry.is_file() and _NAME.match(entry.name)
    }


def _policy(gateway_url: str) -> str:
    scheme, _, rest = gateway_url.partition("://")
    origin = f"{scheme}://{rest.partition('/')[0]}"
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        f"connect-src {origin}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


@attrs.frozen
class ConsoleFiles:
    """The console's files with the gateway's URL in index.html, and how each is answered."""

    files: dict[str, bytes]
    gateway_url: str

    @classmethod
    def for_gateway(cls, files: dict[str, bytes], gateway_url: str) -> ConsoleFiles:
        if not re.fullmatch(r"wss?://[A-Za-z0-9.:\[\]-]+/v1", gateway_url):
            raise ValueError(f"the console needs a gateway at ws://HOST:PORT/v1: {gateway_url!r}")
        filled = dict(files)
        index = filled.get("/index.html")
        if index is None or GATEWAY_PLACEHOLDER not in index:
            raise ValueError("the console's index.html is missing or has no gateway placeholder")
        filled["/index.html"] = index.replace(GATEWAY_PLACEHOLDER, gateway_url.encode())
        return cls(filled, gateway_url)

    def headers(self, content_type: str, length: int) -> tuple[tuple[str, str], ...]:
        return (
            ("Content-Type", content_type),
            ("Content-Length", str(length)),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Content-Security-Policy", _policy(self.gateway_url)),
            ("X-Frame-Options", "DENY"),
            ("Referrer-Policy", "no-referrer"),
            ("Connection", "close"),
        )

    def answer(self, method: str, target: str) -> Answer:
        """The answer to ``method target`` (the Host was checked before)."""
        if method not in ("GET", "HEAD"):
            return self._text(405, f"the console answers GET and HEAD, not {method[:20]}\n")
        path = target.partition("?")[0].partition("#")[0]
        if path == "/":
            path = "/index.html"
        body = self.files.get(path)
        if body is None:
            return self._text(404, "there is no such file in the console\n")
        suffix = path[path.rindex(".") :]
        headers = self.headers(_TYPES[suffix], len(body))
        return Answer(200, headers, b"" if method == "HEAD" else body)

    def refusal(self, status: int, why: str) -> Answer:
        return self._text(status, why)

    def _text(self, status: int, text: str) -> Answer:
        body = text.encode()
        headers = self.headers("text/plain; charset=utf-8", len(body))
        if status == 405:
            headers = (*headers, ("Allow", "GET, HEAD"))
        return Answer(status, headers, body)
