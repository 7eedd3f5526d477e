"""Headless Chromium driven over the Chrome DevTools Protocol on a pipe, shared by the browser tests
(``tests/test_report_browser.py``: the static report; ``tests/test_ui_browser.py``: ``agent-rl ui``).

Chromium is Debian's ``/usr/bin/chromium`` (or ``$AGENT_RL_CHROMIUM``), installed by
``scripts/install_chromium.sh`` when missing (apt, as root); :func:`chromium` skips the calling
test, with the reason, only when that is impossible.

The protocol runs over ``--remote-debugging-pipe`` (file descriptors 3 and 4, NUL-separated
JSON), so no websocket client is needed. Every background network feature is off and host
resolution is disabled (``--host-resolver-rules``), so a page reaches nothing but its own file;
with :data:`LOOPBACK_FLAGS`, nothing but that and 127.0.0.1 (a server the test started).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = ROOT / "scripts" / "install_chromium.sh"
CHROMIUM = os.environ.get("AGENT_RL_CHROMIUM", "/usr/bin/chromium")

#: Requests a page may make without it counting as a problem: its own file and inline data.
LOCAL_URLS = ("file://", "data:", "about:")
#: The loopback address a local server (``agent-rl ui``) listens on: the only host name resolved
#: by a browser started with :data:`LOOPBACK_FLAGS`.
LOOPBACK = "127.0.0.1"

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # No background network: updates, sync, metrics, safe browsing, translation, DNS.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--metrics-recording-only",
    "--no-pings",
    "--no-first-run",
    "--no-default-browser-check",
    "--safebrowsing-disable-auto-update",
    "--password-store=basic",
    "--use-mock-keychain",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,"
    "CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,DialMediaRouteProvider",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
    "--window-size=1280,900",
    "--remote-debugging-pipe",
]


# -- Chromium ----------------------------------------------------------------------------------


def chromium() -> str:
    """The Chromium binary, installed with scripts/install_chromium.sh when missing."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    try:
        result = subprocess.run(
            ["sh", str(INSTALL_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "CHROMIUM": CHROMIUM},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"chromium is not installed and {INSTALL_SCRIPT.name} could not run: {exc}")
    if result.returncode != 0 or not os.access(CHROMIUM, os.X_OK):
        reason = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        pytest.skip(f"chromium is not installed and cannot be installed here: {reason}")
    return CHROMIUM


class Browser:
    """Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``)."""

    def __init__(self, binary: str, profile: Path, flags: list[str] | None = None) -> None:
        to_chrome_r, self._write = os.pipe()
        self._read, from_chrome_w = os.pipe()
        # The child's ends at fd >= 10; bash (sh may only take single-digit fds) moves them to 3
        # and 4, where Chromium expects them, before exec: no Python runs in the child (no
        # preexec_fn while other threads run).
        child_in = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        child_out = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        move = f'exec 3<&{child_in} 4>&{child_out} {child_in}<&- {child_out}>&-; exec "$@"'
        self.process = subprocess.Popen(
            [
                shutil.which("bash") or "/bin/bash",
                "-c",
                move,
                "bash",
                binary,
                *(FLAGS if flags is None else flags),
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(child_in, child_out),
        )
        os.close(child_in)
        os.close(child_out)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    # protocol

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self._read], [], [], remaining)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium exited: {self.stderr_tail()}")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30.0) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for index, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self.events.pop(index)
        while True:
            event = self._receive(deadline)
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    def drain(self, seconds: float) -> None:
        """Collect the events that arrive in the next ``seconds``."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._receive(deadline))
        except TimeoutError:
            pass

    # pages

    def open(self) -> str:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        return session

    def navigate(self, session: str, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session)
        self.drain(0.5)

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=session
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluation failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, path: Path, clip: dict[str, float]) -> Path:
        data = self.send(
            "Page.captureScreenshot",
            {"format": "png", "clip": {**clip, "scale": 1}, "captureBeyondViewport": True},
            session=session,
        )
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def problems(self, allowed_urls: tuple[str, ...] = LOCAL_URLS) -> list[str]:
        """Console errors, uncaught exceptions, browser-log errors and requests for anything but
        ``allowed_urls`` (prefixes; by default the page's own file and inline data) so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(
                    "console: " + " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
                )
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(
                    "exception: " + str(details.get("exception", {}).get("description") or details.get("text"))
                )
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append("log: " + entry.get("text", "") + (f" ({entry['url']})" if entry.get("url") else ""))
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                if not url.startswith(allowed_urls):
                    found.append("request: " + url)
        return found

    def stderr_tail(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - the browser may already be gone
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.process.stderr:
            self.process.stderr.close()


#: :data:`FLAGS` for pages served on :data:`LOOPBACK`: every other host still fails to resolve.
LOOPBACK_FLAGS = [
    f"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE {LOOPBACK}" if flag.startswith("--host-resolver-rules=") else flag
    for flag in FLAGS
]
