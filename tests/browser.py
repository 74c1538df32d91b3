"""Debian's headless Chromium, driven through chromium-driver's W3C WebDriver HTTP API with plain requests (no
client library: four endpoints are all a test needs). Each session gets a fresh profile folder."""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from devtools.builders import wait_until
from tests.waker_process import free_port

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class Browser:
    def __init__(self, driver: str, session: str) -> None:
        self.base = f"{driver}/session/{session}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = requests.request(method, self.base + path, json=body, timeout=120)
        resp.raise_for_status()
        return resp.json()["value"]

    def open(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def source(self) -> str:
        return str(self._call("GET", "/source"))

    def url(self) -> str:
        return str(self._call("GET", "/url"))

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))


@contextlib.contextmanager
def chromium(profile: Path, *, resolve: dict[str, str]) -> Iterator[Browser]:
    """A headless Chromium session; `resolve` maps host names to addresses (`--host-resolver-rules`)."""
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed (apt-get install chromium "
                    "chromium-driver)")
    port = free_port()
    driver = subprocess.Popen([DRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{url}/status", timeout=2).json()["value"]["ready"], timeout=60,
                   what="chromedriver")
        rules = ",".join(f"MAP {host} {address}" for host, address in resolve.items())
        args = [*FLAGS, f"--user-data-dir={profile}", f"--host-resolver-rules={rules}"]
        resp = requests.post(f"{url}/session", timeout=120, json={"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}})
        resp.raise_for_status()
        session = resp.json()["value"]["sessionId"]
        try:
            yield Browser(url, session)
        finally:
            requests.delete(f"{url}/session/{session}", timeout=60)
    finally:
        driver.terminate()
        driver.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)
