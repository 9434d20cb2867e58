"""The console's tests: its URL from `callboard serve`'s line, plain HTTP requests
written byte for byte (so a path reaches the server exactly as given), and a
real headless Chromium driven by selenium, waited on from trio (the fixtures
``driver``, one browser per test module, and ``browser``, one page per test).

With ``CONSOLE_SCREENSHOTS=DIR`` in the environment the browser tests save
the main views there as PNG (docs/console/ holds the ones the README shows)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from scripted_model import ScriptedModel
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait
from serve_helpers import Serving, serving

__all__ = [
    "ANSWER",
    "WATCH_STREAMING",
    "Browser",
    "Reply",
    "browser",
    "chromium",
    "console",
    "console_url",
    "driver",
    "http_request",
    "shoot",
]

CONSOLE = re.compile(r"console at (http://127\.0\.0\.1:(\d+)/)#token=(\S+)$")
WAIT = 60.0  # seconds a page condition may take on a slow, shared machine


def console_url(line: str) -> tuple[str, int, str]:
    """(URL, port, token) of the console named in serve's first line."""
    match = CONSOLE.search(line)
    assert match is not None, line
    return match.group(1), int(match.group(2)), match.group(3)


@attrs.frozen
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


async def http_request(port: int, path: str, *, host: str | None = None,
                       method: str = "GET", raw: bytes | None = None) -> Reply:  # fmt: skip
    """One request to 127.0.0.1:port with ``path`` sent as is; the whole answer."""
    request = raw or (
        f"{method} {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n\r\n".encode()
    )
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request)
            data = b""
            while chunk := await stream.receive_some(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(int(status_line.split()[1]), headers, body)


@attrs.define
class Browser:
    """A Chromium page; each wait polls the DOM in a worker thread, so trio runs meanwhile."""

    driver: WebDriver

    async def run(self, fn: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(fn)

    async def until(self, condition: Callable[[WebDriver], Any], what: str) -> Any:
        """The first truthy value of ``condition``, polled until `WAIT` runs out."""
        # The page redraws what changed: an element found may be replaced before it is read.
        wait = WebDriverWait(
            self.driver, WAIT, poll_frequency=0.1,
            ignored_exceptions=(StaleElementReferenceException,),
        )  # fmt: skip
        return await self.run(lambda: wait.until(condition, f"waited {WAIT} s for {what}"))

    async def element(self, css: str, text: str | None = None) -> WebElement:
        """The first element matching ``css`` (whose text contains ``text``), once shown."""
        return await self.until(lambda d: _shown(d, css, text), _what(css, text))

    async def click(self, css: str, text: str | None = None) -> None:
        """Click the element once it is shown (found again if it was redrawn meanwhile)."""

        def clicked(driver: WebDriver) -> bool:
            element = _shown(driver, css, text)
            if element is None:
                return False
            element.click()
            return True

        await self.until(clicked, f"{_what(css, text)} to click")

    async def type(self, css: str, text: str) -> None:
        def typed(driver: WebDriver) -> bool:
            element = _shown(driver, css, None)
            if element is None:
                return False
            element.send_keys(text)
            return True

        await self.until(typed, f"{css!r} to type into")

    async def get(self, url: str) -> None:
        await self.run(lambda: self.driver.get(url))

    async def script(self, source: str) -> Any:
        return await self.run(lambda: self.driver.execute_script(source))

    async def screenshot(self, path: str) -> None:
        await self.run(lambda: self.driver.save_screenshot(path))


def _shown(driver: WebDriver, css: str, text: str | None) -> WebElement | None:
    for element in driver.find_elements("css selector", css):
        if element.is_displayed() and (text is None or text in element.text):
            return element
    return None


def _what(css: str, text: str | None) -> str:
    return f"{css!r}" + (f" with {text!r}" if text else "")


@contextmanager
def chromium(width: int = 1280, height: int = 820) -> Iterator[WebDriver]:
    """Debian's headless Chromium through its chromedriver (as root it needs --no-sandbox)."""
    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver_path, "the console's tests need Debian's chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


SHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
ANSWER = "The note is written: notes/today.txt holds the plan."  # the model's, streamed

# Records every text a streaming bubble showed, so the test can tell that the
# answer arrived piece by piece before it was committed.
WATCH_STREAMING = """
window.__streamed = [];
new MutationObserver(() => {
  for (const bubble of document.querySelectorAll('.msg.assistant.streaming .text')) {
    const seen = window.__streamed, shown = bubble.textContent;
    if (shown && seen[seen.length - 1] !== shown) seen.push(shown);
  }
}).observe(document.body, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def browser(driver: WebDriver) -> Iterator[Browser]:
    yield Browser(driver)
    driver.execute_script("sessionStorage.clear()")  # the next test starts with no token
    driver.get("about:blank")


async def shoot(browser: Browser, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a test's own files)
        await browser.screenshot(str(Path(SHOTS) / f"{name}.png"))


@asynccontextmanager
async def console(tmp_path: Path, model: ScriptedModel, *extra: str) -> AsyncIterator[Serving]:
    """`callboard serve` with its console, the scripted model and the test kinds."""
    async with serving(
        tmp_path / "data", "--console-port", "0", "--model-url", model.base_url, "--model", "m",
        "--kind", "gateway_kinds:Counter", *extra, cwd=tmp_path, kind="console_kinds:Fragile",
    ) as served:  # fmt: skip
        yield served
