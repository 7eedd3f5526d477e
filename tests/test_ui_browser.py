"""``agent-rl ui`` in a real browser: the test builds a store (``tests/ui_store.py``), starts
``agent-rl ui --db <store> --port 0 --json --labeller tester`` as a subprocess, and drives headless
Chromium (``tests/browser_harness.py``, the DevTools protocol over a pipe) through the page with
real key events (``Input.dispatchKeyEvent``):

* the rollouts list shows the store's rollouts; Enter opens the selected one (facts, span tree
  with timing bars, a span's attributes); ``g`` opens its group (best first); Escape goes back;
* keyboard labelling: ``j u j d j 4`` writes three ``labels`` rows (good, bad, score 4, by
  "tester"), each shown at once in the row's label cell, the selection moving on by itself; in
  the rollout view ``]`` selects a step, then ``u`` labels that step and ``n`` + text + Enter
  writes a note;
* the SQL console runs a query (Ctrl+Enter) into a table and a chart; a cookbook query runs in
  one click; a bad ``where`` and a refused query show their error and hint;
* a rollout recorded while the page is open appears in the list without a reload (the
  selection stays where it was);
* the hostile rollout (script tags and ``<img onerror>`` in its name, output, tool arguments and
  reward reasons) runs nothing and reads as text;
* a training run shows one SVG line chart per metric, loss first;
* at 800 px wide no view scrolls sideways; no console error, exception or failed request
  anywhere, and no request leaves 127.0.0.1.

With ``AGENT_RL_SAVE_SCREENSHOT=1`` the screenshots are copied to ``docs/assets/ui-*.png``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from browser_harness import LOOPBACK, LOOPBACK_FLAGS, ROOT, Browser, chromium
from ui_store import build_ui_store

DOCS_ASSETS = ROOT / "docs" / "assets"
#: Requests the page may make: the server under test, and inline data (the empty favicon).
ALLOWED_URLS = (f"http://{LOOPBACK}:", "data:", "about:")
KEY_CODES = {"Enter": 13, "Escape": 27, "[": 219, "]": 221, "?": 191}
#: What the browser logs for an API answer that is an error on purpose (a bad query, a refused one).
EXPECTED_ERROR = "Failed to load resource: the server responded with a status of 4"


# -- the server and the page -------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict[str, Any]:
    return build_ui_store(tmp_path_factory.mktemp("ui-store") / "store.duckdb")


@pytest.fixture(scope="module")
def server(store, tmp_path_factory) -> dict[str, Any]:
    log = tmp_path_factory.mktemp("ui-server") / "stderr.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_rl_plugin", "ui", "--db", str(store["db"]), "--port", "0", "--json"]
        + ["--labeller", "tester"],
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        cwd=ROOT,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 60)
        line = process.stdout.readline() if ready else b""
        if not line:
            process.kill()
            pytest.fail(f"agent-rl ui printed no URL: {log.read_text(errors='replace')[-2000:]}")
        announced = json.loads(line)
        assert announced["url"].startswith(f"http://{LOOPBACK}:") and "/ui/?token=" in announced["url"]
        yield {"url": announced["url"], "base": announced["url"].split("?", 1)[0], "process": process, "log": log}
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def parse_view(hash_: str) -> str:
    """The view a hash shows (``#/rollout/x`` -> ``rollout``)."""
    return hash_.lstrip("#/").split("?")[0].split("/")[0] or "rollouts"


class Page:
    """One tab of the browser, with waits and real key presses."""

    def __init__(self, browser: Browser, folder: Path) -> None:
        self.browser = browser
        self.session = browser.open()
        self.folder = folder

    def js(self, expression: str) -> Any:
        return self.browser.evaluate(self.session, expression)

    def wait(self, expression: str, timeout: float = 10.0) -> None:
        """Until ``expression`` is truthy in the page (an element counts: it is not sent back)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.js(f"!!({expression})"):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for: {expression}\npage: {self.text()[:1500]}")
            self.browser.drain(0.05)

    def text(self) -> str:
        return self.js("document.getElementById('main').innerText")

    def go(self, hash_: str, view: str) -> None:
        """Follow an in-app link (the hash) and wait until the view has loaded its data."""
        target = json.dumps(hash_)
        self.js(
            f"if (location.hash !== {target}) {{ document.getElementById('main').dataset.ready = ''; location.hash = {target}; }} 0"
        )
        self.wait(f"document.getElementById('main').dataset.ready === {json.dumps(view)}")

    def reload(self, hash_: str | None = None) -> None:
        """Load the page afresh (at ``hash_``), forgetting the events so far."""
        if hash_ is not None:
            self.js(f"history.replaceState(null, '', {json.dumps(hash_)}); 0")
        self.browser.events.clear()
        self.browser.send("Page.reload", {"ignoreCache": True}, session=self.session)
        self.browser.wait_for("Page.loadEventFired", self.session)
        view = json.dumps(parse_view(self.js("location.hash")))
        self.wait(f"document.getElementById('main').dataset.ready === {view}")

    def key(self, key: str, modifiers: int = 0) -> None:
        """A real key press (keyDown with its text, keyUp), as a keyboard sends it."""
        code = KEY_CODES.get(key, ord(key.upper()) if len(key) == 1 else 0)
        text = "\r" if key == "Enter" else (key if len(key) == 1 else "")
        down = {"type": "keyDown" if text else "rawKeyDown", "key": key, "windowsVirtualKeyCode": code}
        if text and not modifiers:
            down["text"] = text
        self.browser.send("Input.dispatchKeyEvent", {**down, "modifiers": modifiers}, session=self.session)
        up = {"type": "keyUp", "key": key, "windowsVirtualKeyCode": code, "modifiers": modifiers}
        self.browser.send("Input.dispatchKeyEvent", up, session=self.session)
        self.browser.drain(0.05)

    def type(self, text: str) -> None:
        self.browser.send("Input.insertText", {"text": text}, session=self.session)

    def width(self, width: int) -> None:
        self.browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )
        self.browser.drain(0.2)

    def problems(self) -> list[str]:
        return self.browser.problems(ALLOWED_URLS)

    def forget_expected_errors(self, count: int | None = None) -> None:
        """After a step that makes the server answer 4xx on purpose: the only problems so far are
        ``count`` such answers (any number when None); then forget them."""
        self.browser.drain(0.2)
        if count is not None:
            found = self.problems()
            assert len(found) == count and all(EXPECTED_ERROR in p for p in found), found
        self.browser.events.clear()

    def screenshot(self, name: str, height: int = 1100) -> Path:
        self.js("window.scrollTo(0, 0); 0")
        width = self.js("window.innerWidth")
        full = self.js("document.documentElement.scrollHeight")
        path = self.browser.screenshot(
            self.session, self.folder / f"ui-{name}.png", {"x": 0, "y": 0, "width": width, "height": min(height, full)}
        )
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
        if os.environ.get("AGENT_RL_SAVE_SCREENSHOT") == "1":
            DOCS_ASSETS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS_ASSETS / path.name)
        return path

    def blur(self) -> None:
        self.js("document.activeElement && document.activeElement.blur(); 0")

    def selected_row(self) -> str:
        return self.js("document.querySelector('#rollouts-table tbody tr[aria-selected=\"true\"]').dataset.rolloutId")

    def query(self, sql: str) -> dict[str, Any]:
        """Run SQL through the UI's own api/query (the store's read-only path)."""
        return self.js(
            "fetch('api/query', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Agent-RL-UI': '1'},"
            f" body: JSON.stringify({{sql: {json.dumps(sql)}, max_rows: 1000}})}}).then(r => r.json())"
        )


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    browser = Browser(chromium(), tmp_path_factory.mktemp("ui-chromium-profile"), flags=LOOPBACK_FLAGS)
    try:
        page = Page(browser, tmp_path_factory.mktemp("ui-screenshots"))
        browser.navigate(page.session, server["url"])  # the printed link: it sets the cookie
        page.wait("document.getElementById('main').dataset.ready === 'rollouts'", timeout=20)
        assert page.problems() == []
        yield page
    finally:
        browser.close()


@pytest.fixture()
def clean(page, server):
    """Each test starts on the list at 1280 px, and ends without a console error or failed request."""
    page.width(1280)
    page.reload("#/rollouts")
    yield page
    page.browser.drain(0.3)
    assert page.problems() == [], server["log"].read_text(errors="replace")[-3000:]


LIST_IDS = "[...document.querySelectorAll('#rollouts-table tbody tr[data-rollout-id]')].map(tr => tr.dataset.rolloutId)"


# -- the tests ---------------------------------------------------------------------------------


def test_list_rollout_and_group(clean, store, server):
    page = clean
    assert page.js("location.href").startswith(server["base"])  # the token left the address bar
    assert "token=" not in page.js("location.href")
    shown = page.js(LIST_IDS)
    assert sorted(shown) == sorted(store["rollout_ids"])
    header = page.js("document.querySelector('header').innerText")
    assert str(Path(store["db"]).name) in header
    assert page.js("document.getElementById('labeller').value") == "tester"
    page.screenshot("list")

    # Sorting by reward (a header button) puts the best first, and the URL says so.
    page.js("document.querySelector('#rollouts-table th button[data-sort=\"total_reward\"]').click(); 0")
    page.wait("location.hash.includes('sort=total_reward')")
    page.wait('document.querySelector(\'#rollouts-table th[aria-sort="descending"] button[data-sort="total_reward"]\')')
    rewards = page.js(
        "[...document.querySelectorAll('#rollouts-table tbody tr')].map(tr => tr.querySelector('td.reward').textContent)"
        ".filter(t => t !== '').map(Number)"
    )
    assert rewards == sorted(rewards, reverse=True) and len(rewards) >= 3

    # A filter lives in the URL and survives a reload.
    page.go(f"#/rollouts?group={store['group_id']}", "rollouts")
    page.wait(f"document.getElementById('f-group').value === {json.dumps(store['group_id'])}")
    members = page.js(LIST_IDS)
    assert len(members) >= 3
    assert page.problems() == []  # (the reload forgets the events so far)
    page.reload()
    assert sorted(page.js(LIST_IDS)) == sorted(members)

    # Keyboard: j moves the selection, Enter opens the rollout.
    first = page.selected_row()
    page.key("j")
    second = page.selected_row()
    assert second != first and second == members[1]
    page.key("Enter")
    page.wait("document.getElementById('main').dataset.ready === 'rollout'")
    assert page.js("decodeURIComponent(location.hash)") == f"#/rollout/{second}"
    facts = page.js("document.querySelector('dl.facts').innerText")
    assert store["group_id"] in facts and "Reward" in facts and "Tokens" in facts
    bars = page.js(
        "[...document.querySelectorAll('.span-tree .bar')].map(b => [parseFloat(b.style.left), parseFloat(b.style.width)])"
    )
    assert bars and all(0 <= left <= 100 and 0 < width <= 100 for left, width in bars), bars
    assert max(width for _, width in bars) > 90  # the root span covers the timeline
    page.js("document.querySelectorAll('button.span-row')[1].click(); 0")
    page.wait("document.querySelector('.span-details table.attrs')")
    assert page.js("document.querySelector('button.span-row[aria-pressed=\"true\"]') !== null")
    page.screenshot("rollout", height=1500)

    # g: the group, best first; Escape: back to the filtered list.
    page.key("g")
    page.wait("document.getElementById('main').dataset.ready === 'group'")
    rows = page.js(
        "[...document.querySelectorAll('#group-table tbody tr')].map(tr => ({id: tr.dataset.rolloutId,"
        " total: tr.querySelector('td strong').textContent}))"
    )
    assert sorted(r["id"] for r in rows) == sorted(members)
    totals = [float(r["total"]) for r in rows if r["total"]]
    assert totals == sorted(totals, reverse=True)
    page.screenshot("group")

    # Best first, in a group whose rewards differ.
    mixed = page.query(
        "select group_id from rollouts group by 1 having count(*) >= 2 and max(total_reward) > min(total_reward)"
        " order by 1 limit 1"
    )["rows"]
    assert mixed, "the store needs a group whose rollouts' rewards differ"
    page.go("#/group/" + page.js(f"encodeURIComponent({json.dumps(mixed[0][0])})"), "group")
    totals = page.js(
        "[...document.querySelectorAll('#group-table tbody tr')].map(tr => Number(tr.querySelector('td strong').textContent))"
    )
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[-1], totals
    page.key("Escape")
    page.key("Escape")
    page.wait("document.getElementById('main').dataset.ready === 'rollouts'")
    assert page.js("location.hash").startswith("#/rollouts?group=")


def test_keyboard_labelling(clean, store):
    page = clean
    page.go("#/rollouts?sort=start_time&order=asc", "rollouts")
    page.blur()
    ids = page.js(LIST_IDS)
    expected = []
    for move, label_key, label, value, score in (
        ("j", "u", "good", 1.0, None),
        ("j", "d", "bad", 0.0, None),
        ("j", "4", "score", 0.75, 4),
    ):
        page.key(move)
        target = page.selected_row()
        # Shown at once: when the toast appears, the row's label cell already says it (before any
        # live refresh could), and the selection has moved on to the next row.
        cell = (
            "[...document.querySelectorAll('#rollouts-table tbody tr')]"
            f".find(tr => tr.dataset.rolloutId === {json.dumps(target)}).querySelector('td.label-cell').textContent"
        )
        page.js(
            "window.__shown = new Promise(resolve => { const observer = new MutationObserver(records => {"
            " if (!records.some(r => r.addedNodes.length)) return;"
            f" observer.disconnect(); resolve({cell}); }});"
            " observer.observe(document.getElementById('toasts'), {childList: true}); }); 0"
        )
        page.key(label_key)
        assert ("score 4" if score else label) in page.js("window.__shown")
        assert page.selected_row() == ids[ids.index(target) + 1]
        expected.append((target, label, value, score))
    assert [t for t, *_ in expected] == [ids[1], ids[3], ids[5]]
    stored = page.query(
        "select rollout_id, label, value, score, labeller, step_index from labels order by created_at, rollout_id"
    )
    assert stored.get("rows") is not None, stored
    rows = {row[0]: row[1:] for row in stored["rows"]}
    for target, label, value, score in expected:
        assert rows[target] == [label, value, score, "tester", None], (target, rows[target])

    # The queue of unlabelled rollouts leaves them out (chosen in its select, kept in the URL).
    page.js(
        "const q = document.getElementById('f-queue'); q.value = 'unlabelled'; q.dispatchEvent(new Event('change')); 0"
    )
    page.wait(
        "location.hash.includes('queue=unlabelled') && document.getElementById('main').dataset.ready === 'rollouts'"
    )
    page.wait(f"({LIST_IDS}).length === {len(ids) - 3}")
    assert set(page.js(LIST_IDS)) == set(ids) - {t for t, *_ in expected}

    # The rollout view: ] selects step 0, u labels that step; n + text + Enter writes a note.
    page.go(f"#/rollout/{ids[0]}", "rollout")
    page.blur()
    page.key("]")
    page.wait("document.querySelector('.label-bar.step-target')")
    assert "step 0" in page.js("document.querySelector('.label-bar .target').textContent")
    page.key("u")
    page.wait("[...document.querySelectorAll('table.labels tbody tr')].some(tr => tr.textContent.includes('good'))")
    page.key("n")
    assert page.js("document.activeElement.classList.contains('note')")
    page.key("u")  # typing in the note box: a letter, not a label
    assert page.js("document.activeElement.value") == "u"
    page.js("document.activeElement.value = ''; 0")
    page.type("needs a look")
    page.key("Enter")
    page.wait(
        "[...document.querySelectorAll('table.labels tbody tr')].some(tr => tr.textContent.includes('needs a look'))"
    )
    notes = page.query(
        f"select label, step_index, note, labeller from labels where rollout_id = '{ids[0]}' order by created_at"
    )
    assert notes["rows"] == [["good", 0, None, "tester"], ["note", 0, "needs a look", "tester"]], notes

    # ? opens the key help; Escape closes it.
    page.blur()
    page.key("?")
    page.wait("document.querySelector('.overlay') && !document.querySelector('.overlay').hidden")
    page.key("Escape")
    page.wait("document.querySelector('.overlay').hidden")


def test_console_query_and_errors(clean):
    page = clean
    page.go("#/console", "console")
    page.js("document.getElementById('sql').focus(); document.getElementById('sql').value = ''; 0")
    page.type("select task_id, count(*) as n from rollouts group by 1 order by 1")
    page.key("Enter", modifiers=2)  # Ctrl+Enter
    page.wait("document.querySelector('#query-result tbody tr')")
    table = page.js(
        "({head: [...document.querySelectorAll('#query-result th')].map(th => th.textContent),"
        " rows: [...document.querySelectorAll('#query-result tbody tr')].map(tr => [...tr.cells].map(c => c.textContent))})"
    )
    assert table["head"] == ["task_id", "n"]
    assert len(table["rows"]) >= 3 and all(row[1].isdigit() for row in table["rows"])
    assert "rows in" in page.js("document.querySelector('.query-status').textContent")
    # The quick chart: bars for string x values, one per row.
    assert page.js("document.querySelectorAll('figure.quick-chart svg rect.bar').length") == len(table["rows"])
    page.blur()
    page.screenshot("console", height=1000)

    # A cookbook query: one click loads and runs it.
    page.js("document.querySelector('.cookbook button').click(); 0")
    page.wait("document.querySelector('.query-status').textContent.includes('rows in')")
    assert page.js("document.getElementById('sql').value") == page.js(
        "document.querySelector('.cookbook button').title"
    )

    # Errors show with their hint; writes are refused.
    page.js("document.getElementById('sql').value = 'delete from labels'; 0")
    page.js("document.querySelector('.toolbar button').click(); 0")
    page.wait("document.querySelector('.query-error .error-box')")
    page.forget_expected_errors(1)
    page.go("#/rollouts?where=" + "no_such_column%20%3E%201", "rollouts")
    page.wait("document.querySelector('.where-error .error-box')")
    assert "no_such_column" in page.js("document.querySelector('.where-error').textContent")
    assert page.js("document.getElementById('f-where').value") == "no_such_column > 1"
    page.forget_expected_errors(1)


def test_new_rollout_appears_without_reload(clean, store):
    page = clean
    page.js("window.__same_page = 1; 0")
    page.key("j")
    page.key("j")
    selected = page.selected_row()
    page.key("n")
    page.type("half-written note")  # typed text survives the refresh, and keeps the focus
    new_id = store["record_one"](store["db"])
    page.wait(f"({LIST_IDS}).includes({json.dumps(new_id)})", timeout=12)
    assert page.js("window.__same_page") == 1  # no reload
    assert page.selected_row() == selected
    assert page.js("document.activeElement.value") == "half-written note"
    page.key("Escape")
    assert page.js("document.activeElement === document.body")


def test_hostile_rollout_runs_nothing(clean, store):
    page = clean
    hostile = store["hostile_rollout_id"]
    assert page.js(f"({LIST_IDS}).includes({json.dumps(hostile)})")
    page.go("#/rollout/" + page.js(f"encodeURIComponent({json.dumps(hostile)})"), "rollout")
    # Open every span's attributes, the folded messages and the group.
    page.js("for (const b of document.querySelectorAll('button.span-row')) b.click(); 0")
    page.js("for (const d of document.querySelectorAll('details')) d.open = true; 0")
    page.browser.drain(0.3)
    text = page.text()
    assert "<script>window.__xss=1</script>" in text
    assert '<img src=x onerror="window.__xss=' in text
    assert page.js("document.querySelectorAll('main img, main script, main iframe').length") == 0
    assert page.js("typeof window.__xss") == "undefined"
    group = page.js("document.querySelector('dl.facts a[href^=\"#/group/\"]')?.getAttribute('href')")
    if group:
        page.go(group, "group")
        assert page.js("typeof window.__xss") == "undefined"
    assert page.js("document.scripts.length") == 1


def test_training_run_charts(clean):
    page = clean
    page.go("#/training", "training")
    page.wait("document.querySelector('figure.loop-chart svg path.line')")
    loop = page.js(
        "(() => { const f = document.querySelector('figure.loop-chart'); return {loop: f.dataset.loop,"
        " lines: f.querySelectorAll('svg path.line').length, points: Number(f.querySelector('svg').dataset.points)}; })()"
    )
    assert loop == {"loop": "loop-ui", "lines": 2, "points": 4}, loop  # train and held-out, 2 rounds each
    page.screenshot("training-loops", height=900)
    runs = page.js("[...document.querySelectorAll('table.runs tbody tr a')].map(a => a.getAttribute('href'))")
    assert runs, page.text()
    page.go(runs[0], "training")
    page.wait("document.querySelector('figure.metric-chart svg path.line')")
    charts = page.js(
        "[...document.querySelectorAll('figure.metric-chart')].map(f => ({metric: f.dataset.metric,"
        " points: Number(f.querySelector('svg').dataset.points || 0), ticks: f.querySelectorAll('text.tick').length,"
        " width: f.querySelector('svg').getBoundingClientRect().width}))"
    )
    assert charts[0]["metric"] == "loss", charts
    assert all(c["ticks"] >= 4 and c["width"] > 200 for c in charts), charts
    assert charts[0]["points"] >= 2
    assert "Config" in page.text()
    page.screenshot("training", height=1300)


@pytest.fixture(scope="module")
def long_rollout(store) -> str:
    """A rollout whose task and group ids are one 300-character word (nothing to wrap at)."""
    return store["record_one"](store["db"], task_id="long-" + "w" * 300)


@pytest.mark.parametrize("view", ["rollouts", "rollout", "group", "console", "training"])
def test_no_sideways_scrolling_at_800_px(clean, long_rollout, view):
    page = clean
    page.width(800)
    page.wait(f"({LIST_IDS}).includes({json.dumps(long_rollout)})", timeout=12)
    hash_ = {
        "rollouts": "#/rollouts?order=desc",
        "rollout": "#/rollout/" + long_rollout,
        "group": "#/group/" + page.js("encodeURIComponent('long-' + 'w'.repeat(300) + '/g0')"),
    }.get(view, f"#/{view}")
    page.go(hash_, view)
    assert page.js("window.innerWidth") == 800
    assert page.js("document.documentElement.scrollWidth") <= 800, page.text()[:300]


def test_without_the_token_the_page_says_how_to_sign_in(page, server):
    """A browser without the cookie (a fresh context): every API answer is 401, and the page
    says to open the printed link instead of failing silently."""
    browser = page.browser
    context = browser.send("Target.createBrowserContext")["browserContextId"]
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank", "browserContextId": context})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.navigate(session, server["base"])
        stranger = Page.__new__(Page)
        stranger.browser, stranger.session, stranger.folder = browser, session, page.folder
        stranger.wait("!document.getElementById('banner').hidden")
        banner = stranger.js("document.getElementById('banner').innerText")
        assert "Not signed in" in banner and "agent-rl ui" in banner and "link" in banner, banner
        problems = stranger.problems()
        assert problems and all("status of 401" in p for p in problems), problems
    finally:
        browser.send("Target.disposeBrowserContext", {"browserContextId": context})
        browser.events.clear()
