"""The report in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``) opens the
HTML file with every background network feature off and host resolution disabled, and the test
checks, over the Chrome DevTools Protocol:

* no console error, no uncaught exception, no error in the browser log (CSP violations, failed
  loads), and no request for anything but the file itself;
* every plot rendered: each ``figure.plot`` holds an SVG with a nonzero box and drawn text and
  shapes, and the report's own script marked it ``data-rendered="1"``;
* every ``#anchor`` resolves, and following a link to a rollout opens its ``<details>`` trace;
* the hostile rollout ran no script (``window.__xss`` stays undefined);
* the empty-database page loads cleanly too.

It saves a screenshot (the path is printed); with ``AGENT_RL_SAVE_SCREENSHOT=1`` it is also
copied to ``docs/assets/report-screenshot.png`` (and a trace to ``report-trace.png``).

Chromium is installed by ``scripts/install_chromium.sh`` when missing (apt, as root); the test
is skipped, with the reason, only when that is impossible.

The protocol runs over ``--remote-debugging-pipe`` (file descriptors 3 and 4, NUL-separated
JSON), so no websocket client is needed.
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

pytest.importorskip("matplotlib")

from agent_rl_plugin.report import build_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
INSTALL_SCRIPT = ROOT / "scripts" / "install_chromium.sh"
CHROMIUM = os.environ.get("AGENT_RL_CHROMIUM", "/usr/bin/chromium")
DOCS_SCREENSHOT = ROOT / "docs" / "assets" / "report-screenshot.png"
DOCS_TRACE = ROOT / "docs" / "assets" / "report-trace.png"

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
        result = subprocess.run(["sh", str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=900,
                                env={**os.environ, "CHROMIUM": CHROMIUM})
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"chromium is not installed and {INSTALL_SCRIPT.name} could not run: {exc}")
    if result.returncode != 0 or not os.access(CHROMIUM, os.X_OK):
        reason = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        pytest.skip(f"chromium is not installed and cannot be installed here: {reason}")
    return CHROMIUM


class Browser:
    """Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``)."""

    def __init__(self, binary: str, profile: Path) -> None:
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
            [shutil.which("bash") or "/bin/bash", "-c", move, "bash", binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
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
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
        return session

    def navigate(self, session: str, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session)
        self.drain(0.5)

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                           session=session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluation failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, path: Path, clip: dict[str, float]) -> Path:
        data = self.send("Page.captureScreenshot",
                         {"format": "png", "clip": {**clip, "scale": 1}, "captureBeyondViewport": True}, session=session)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, browser-log errors and non-file requests so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append("exception: " + str(details.get("exception", {}).get("description") or details.get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append("log: " + params["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                if not url.startswith(("file://", "data:", "about:")):
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


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def binary() -> str:
    return chromium()


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    from test_report import make_report_db

    from agent_rl_plugin.store import ensure_schema

    folder = tmp_path_factory.mktemp("browser")
    db = make_report_db(folder / "store.duckdb")
    build_report(str(db), folder / "report.html")
    ensure_schema(folder / "empty.duckdb")
    build_report(str(folder / "empty.duckdb"), folder / "empty.html")
    return {"full": folder / "report.html", "empty": folder / "empty.html", "folder": folder}


@pytest.fixture(scope="module")
def browser(binary, tmp_path_factory):
    instance = Browser(binary, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield instance
    finally:
        instance.close()


CHECK = """
(() => {
  const plots = [...document.querySelectorAll('figure.plot')].map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    return {id: f.id, marked: svg ? svg.getAttribute('data-rendered') : null, width: box.width, height: box.height,
            drawn: svg ? svg.getBBox().width : 0, texts: svg ? svg.querySelectorAll('text').length : 0,
            shapes: svg ? svg.querySelectorAll('path, rect, use, line, polyline').length : 0};
  });
  const links = [...document.querySelectorAll('a[href^="#"]')].map(a => decodeURIComponent(a.getAttribute('href').slice(1)));
  return {
    plots, links: links.length, missing: links.filter(id => !document.getElementById(id)),
    checked: document.body.dataset.checked, rendered: document.body.dataset.plotsRendered,
    errors: document.getElementById('report-errors').textContent, xss: typeof window.__xss,
    scripts: document.scripts.length, traces: document.querySelectorAll('details.trace').length,
    sections: [...document.querySelectorAll('section')].map(s => s.id),
    height: document.documentElement.scrollHeight, text: document.body.innerText.slice(0, 20000),
  };
})()
"""

FOLLOW_LINK = """
(async () => {
  const link = document.querySelector('#worst a[href^="#rollout-"]');
  const target = document.getElementById(decodeURIComponent(link.getAttribute('href').slice(1)));
  const before = target.open;
  link.click();
  await new Promise(resolve => setTimeout(resolve, 200));
  return {before, after: target.open, hash: location.hash, top: Math.round(target.getBoundingClientRect().top)};
})()
"""

OPEN_SHOP_TRACE = """
(async () => {
  const trace = [...document.querySelectorAll('details.trace')].find(d => d.querySelector('summary').textContent.includes('shop-'));
  location.hash = '#' + trace.id;
  await new Promise(resolve => setTimeout(resolve, 200));
  window.scrollTo(0, 0);
  const box = trace.getBoundingClientRect();
  return {open: trace.open, x: box.left + window.scrollX, y: box.top + window.scrollY, width: box.width, height: box.height};
})()
"""


# -- the tests ---------------------------------------------------------------------------------


def test_report_renders_without_errors(browser, reports, capsys):
    session = browser.open()
    browser.navigate(session, reports["full"].as_uri())
    state = browser.evaluate(session, CHECK)
    assert browser.problems() == []
    assert state["errors"] == ""
    assert state["checked"] == "1"
    # Every plot rendered: a nonzero box, drawn content, text and shapes, and marked by the page.
    assert len(state["plots"]) >= 12
    for plot in state["plots"]:
        assert plot["marked"] == "1", plot
        assert plot["width"] > 200 and plot["height"] > 100, plot
        assert plot["drawn"] > 0 and plot["texts"] >= 3 and plot["shapes"] >= 5, plot
    assert state["rendered"] == str(len(state["plots"]))
    # Anchors resolve; the hostile rollout ran nothing; only the report's script exists.
    assert state["links"] > 10 and state["missing"] == []
    assert state["xss"] == "undefined"
    assert state["scripts"] == 1
    assert state["traces"] >= 10
    assert state["sections"] == ["overview", "health", "rollouts", "rewards", "groups", "tools", "tokens", "coordination",
                                 "training", "worst"]
    assert "<script>window.__xss=1</script> result" not in state["text"]  # closed traces are not visible text...
    # ... but once opened, the payloads read as text.
    followed = browser.evaluate(session, FOLLOW_LINK)
    assert followed["before"] is False and followed["after"] is True, followed
    assert followed["hash"].startswith("#rollout-")
    opened = browser.evaluate(session, "document.querySelector('details.trace[open]').innerText")
    assert "<script>window.__xss=1</script> result" in opened
    assert browser.evaluate(session, "typeof window.__xss") == "undefined"
    assert browser.problems() == []

    # Screenshots: the top of the report, and one rollout's trace.
    browser.evaluate(session, "history.replaceState(null, '', location.pathname); window.scrollTo(0, 0); 0")
    shot = browser.screenshot(session, reports["folder"] / "report-screenshot.png",
                              {"x": 0, "y": 0, "width": 1280, "height": min(1700, state["height"])})
    trace_box = browser.evaluate(session, OPEN_SHOP_TRACE)
    assert trace_box["open"] is True
    trace = browser.screenshot(session, reports["folder"] / "report-trace.png",
                               {"x": max(0, trace_box["x"] - 8), "y": max(0, trace_box["y"] - 8),
                                "width": min(1280, trace_box["width"] + 16), "height": min(1400, trace_box["height"] + 16)})
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert trace.stat().st_size > 10_000
    with capsys.disabled():
        print(f"\nreport screenshot: {shot}\ntrace screenshot: {trace}")
    if os.environ.get("AGENT_RL_SAVE_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_SCREENSHOT)
        shutil.copyfile(trace, DOCS_TRACE)
        with capsys.disabled():
            print(f"copied to {DOCS_SCREENSHOT} and {DOCS_TRACE}")


def test_empty_report_renders_without_errors(browser, reports):
    session = browser.open()
    browser.navigate(session, reports["empty"].as_uri())
    state = browser.evaluate(session, CHECK)
    assert browser.problems() == []
    assert state["errors"] == "" and state["checked"] == "1"
    assert state["plots"] == [] and state["missing"] == []
    assert "Nothing recorded yet" in state["text"]


def test_the_page_catches_script_errors(browser, reports, tmp_path):
    """The checks above can fail: a report whose script is broken shows up as problems."""
    broken = tmp_path / "broken.html"
    text = reports["empty"].read_text(encoding="utf-8")
    # A second, foreign script: the Content-Security-Policy refuses it, and the browser logs that.
    broken.write_text(text.replace("</main>", "<script>window.__xss = 1</script></main>"), encoding="utf-8")
    session = browser.open()
    browser.navigate(session, broken.as_uri())
    assert browser.evaluate(session, "typeof window.__xss") == "undefined"
    problems = browser.problems()
    assert problems and any("Content Security Policy" in p or "Content-Security-Policy" in p for p in problems), problems
