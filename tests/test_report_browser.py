"""The report in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``) opens the
HTML file with every background network feature off and host resolution disabled, and the test
checks, over the Chrome DevTools Protocol:

* no console error, no uncaught exception, no error in the browser log (CSP violations, failed
  loads), and no request for anything but the file itself;
* every plot rendered: each ``figure.plot`` holds an SVG with a nonzero box and drawn text and
  shapes, and the report's own script marked it ``data-rendered="1"``;
* every ``#anchor`` resolves, and following a link to a rollout opens its ``<details>`` trace;
* the hostile rollout ran no script (``window.__xss`` stays undefined);
* the empty-database page loads cleanly too;
* tick labels are plain numbers (no ``$\\mathdefault{10^{2}}$`` mathtext markup on log axes),
  "Worst rollouts" lists exactly the 20 lowest rewards of a store with more than 20 rollouts, the
  training plots' log-probability panels say which quantity they plot (a KTO ``logps/*`` sum, an
  offline GRPO ``logp/*`` per-token mean) and plot the stored numbers, and the page uses the whole
  width at 1920, 1280 and 800 px without scrolling sideways.

It saves a screenshot (the path is printed); with ``AGENT_RL_SAVE_SCREENSHOT=1`` it is also
copied to ``docs/assets/report-screenshot.png`` (and a trace to ``report-trace.png``).

Chromium is installed by ``scripts/install_chromium.sh`` when missing (apt, as root); the test
is skipped, with the reason, only when that is impossible. The browser itself (the DevTools
protocol over ``--remote-debugging-pipe``) is ``tests/browser_harness.py``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from browser_harness import ROOT, Browser, chromium  # noqa: E402

from agent_rl_plugin.report import build_report  # noqa: E402

DOCS_SCREENSHOT = ROOT / "docs" / "assets" / "report-screenshot.png"
DOCS_TRACE = ROOT / "docs" / "assets" / "report-trace.png"

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


#: Rollouts in the store of the "worst" and log-axis tests: more than the report's 20 worst.
MANY = 30
#: Of those, the failed ones (every fifth), plus rollouts that failed before any reward.
UNREWARDED_FAILURES = 3


def make_many_db(path: Path) -> Path:
    """A store of ``MANY`` rewarded rollouts (distinct rewards, every fifth failed, tool latencies
    from 0.5 ms to 1.1 s: a log axis) and ``UNREWARDED_FAILURES`` failed rollouts without one."""
    import agent_rl_plugin as arl
    from agent_rl_plugin import plugins, tracing

    previous = plugins.get_plugin_manager()
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        tracing.configure(db_path=str(path), export_delay_ms=50)
        for i in range(MANY + UNREWARDED_FAILURES):
            try:
                with arl.rollout(task_id=f"task-{i % 6}", group_id=f"g{i % 6}", rollout_id=f"many-{i:02d}"):
                    arl.record_tool_call("lookup", arguments={"i": i}, result=i, duration_s=0.0005 * 3 ** (i % 8))
                    if i < MANY:
                        arl.emit_reward(((i * 7) % MANY) / MANY, name="correct")
                    if i % 5 == 0 or i >= MANY:
                        raise RuntimeError("the agent failed")
            except RuntimeError:
                pass
        assert arl.flush()
        arl.shutdown()
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(previous)
    return path


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("many")
    db = make_many_db(folder / "many.duckdb")
    build_report(str(db), folder / "many.html")
    return {"db": db, "report": folder / "many.html"}


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
    assert state["sections"] == [
        "overview",
        "health",
        "rollouts",
        "rewards",
        "groups",
        "tools",
        "tokens",
        "coordination",
        "training",
        "worst",
    ]
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
    shot = browser.screenshot(
        session,
        reports["folder"] / "report-screenshot.png",
        {"x": 0, "y": 0, "width": 1280, "height": min(1700, state["height"])},
    )
    trace_box = browser.evaluate(session, OPEN_SHOP_TRACE)
    assert trace_box["open"] is True
    trace = browser.screenshot(
        session,
        reports["folder"] / "report-trace.png",
        {
            "x": max(0, trace_box["x"] - 8),
            "y": max(0, trace_box["y"] - 8),
            "width": min(1280, trace_box["width"] + 16),
            "height": min(1400, trace_box["height"] + 16),
        },
    )
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
    assert problems and any("Content Security Policy" in p or "Content-Security-Policy" in p for p in problems), (
        problems
    )


# -- axes, the worst rollouts, the width ----------------------------------------------------------

#: Per plot, per axes: each axis (x first) with its label and ticks (label text, and the tick mark's
#: position), the legend's texts, and each plotted line's marker positions (SVG coordinates).
AXES = """
(() => [...document.querySelectorAll('figure.plot')].map(figure => ({
  id: figure.id,
  axes: [...figure.querySelectorAll('svg g[id]')].filter(g => /-axes_\\d+$/.test(g.id)).map(ax => ({
    axes: [...ax.querySelectorAll('g[id]')].filter(g => /-matplotlib\\.axis_\\d+$/.test(g.id)).map(axis => ({
      label: [...axis.children].filter(c => /-text_\\d+$/.test(c.id)).map(c => c.textContent.trim()).join(' '),
      ticks: [...axis.children].filter(c => /-[xy]tick_\\d+$/.test(c.id)).map(tick => {
        const text = tick.querySelector('text'), mark = tick.querySelector('use');
        return {text: text ? text.textContent : '', x: mark ? +mark.getAttribute('x') : null,
                y: mark ? +mark.getAttribute('y') : null};
      }),
    })),
    legend: [...ax.querySelectorAll('g[id]')].filter(g => /-legend_\\d+$/.test(g.id))
      .flatMap(g => [...g.querySelectorAll('text')].map(t => t.textContent)),
    lines: [...ax.children].filter(c => /-line2d_\\d+$/.test(c.id))
      .map(line => [...line.querySelectorAll('use')].map(u => [+u.getAttribute('x'), +u.getAttribute('y')])),
  })),
})))()
"""


def number(text: str) -> float:
    """A tick label as a number (thousands commas and matplotlib's minus sign allowed)."""
    return float(text.replace(",", "").replace("\u2212", "-"))


def plots_axes(browser: Browser, url: str, width: int = 1280) -> list[dict]:
    session = browser.open()
    if width != 1280:
        set_width(browser, session, width)
    browser.navigate(session, url)
    assert browser.problems() == []
    return browser.evaluate(session, AXES)


def set_width(browser: Browser, session: str, width: int) -> None:
    browser.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        session=session,
    )


def test_tick_labels_read_as_numbers(browser, many):
    """Log axes (tool latency from 0.5 ms to 1.1 s) label their ticks 1, 10, 100, 1,000: not the
    raw mathtext ``$\\mathdefault{10^{2}}$`` that matplotlib writes when mathtext is off."""
    plots = plots_axes(browser, many["report"].as_uri())
    labels = [tick["text"] for plot in plots for ax in plot["axes"] for axis in ax["axes"] for tick in axis["ticks"]]
    assert len(labels) > 50
    assert not [text for text in labels if "$" in text or "mathdefault" in text]
    latency = [
        axis
        for plot in plots
        if plot["id"] == "plot-tools"
        for ax in plot["axes"]
        for axis in ax["axes"]
        if axis["label"] == "latency (ms)"
    ]
    assert len(latency) == 1
    shown = [tick["text"] for tick in latency[0]["ticks"] if tick["text"]]
    values = [number(text) for text in shown]  # every label reads as a number
    assert {1.0, 10.0, 100.0, 1000.0} <= set(values), shown
    # In order along the axis: a log axis, labelled where its ticks are.
    positions = [tick["x"] for tick in latency[0]["ticks"] if tick["text"]]
    assert positions == sorted(positions) and values == sorted(values)


def test_worst_rollouts_are_the_twenty_lowest(browser, many):
    """More than 20 rollouts, some failed: the list has exactly the 20 lowest combined rewards."""
    import duckdb

    connection = duckdb.connect(str(many["db"]), read_only=True)
    try:
        expected = [
            r[0]
            for r in connection.execute(
                "select rollout_id from rollouts where total_reward is not null order by total_reward, rollout_id limit 20"
            ).fetchall()
        ]
        total = connection.execute("select count(*) from rollouts").fetchone()[0]
    finally:
        connection.close()
    assert total == MANY + UNREWARDED_FAILURES and len(expected) == 20
    session = browser.open()
    browser.navigate(session, many["report"].as_uri())
    state = browser.evaluate(
        session,
        """(() => ({
      rows: [...document.querySelector('#worst > .table-wrap table').tBodies[0].rows]
        .map(tr => tr.querySelector('[title]').getAttribute('title')),
      traces: [...document.querySelectorAll('details.trace')].length,
      intro: document.querySelector('#worst p.intro').textContent,
    }))()""",
    )
    assert browser.problems() == []
    assert state["rows"] == expected
    assert state["traces"] == 20
    assert state["intro"].startswith("The 20 rollouts with the lowest combined reward")


def test_log_probability_panels_label_what_they_plot(browser, reports):
    """KTO's ``logps/*`` are a completion's log-probability summed over its tokens, offline GRPO's
    ``logp/*`` the mean per token: each panel's y label names its quantity, and the points it
    draws, read back through the axis' ticks, are the numbers stored in ``training_metrics``."""
    import duckdb

    connection = duckdb.connect(str(reports["folder"] / "store.duckdb"), read_only=True)
    try:
        stored: dict[str, list[float]] = {}
        for name, value in connection.execute(
            "select name, value from training_metrics where name like 'logp%' order by name, step"
        ).fetchall():
            stored.setdefault(name, []).append(value)
    finally:
        connection.close()
    assert set(stored) == {"logps/chosen", "logp/positive", "logp/negative"}
    plots = plots_axes(browser, reports["full"].as_uri())
    panels = {
        name: ax
        for plot in plots
        if plot["id"].startswith("plot-training-")
        for ax in plot["axes"]
        for name in ax["legend"]
        if name.startswith("logp")
    }
    assert set(panels) == set(stored)
    for name, ax in panels.items():
        label = ax["axes"][1]["label"]
        if name.startswith("logps/"):
            assert "sum" in label and "per token" not in label, label
        else:
            assert "per token" in label and "sum" not in label, label
        ticks = [(number(t["text"]), t["y"]) for t in ax["axes"][1]["ticks"] if t["text"]]
        (v0, y0), (v1, y1) = ticks[0], ticks[-1]
        points = ax["lines"][ax["legend"].index(name)]
        drawn = [v0 + (y - y0) * (v1 - v0) / (y1 - y0) for _, y in points]
        assert drawn == pytest.approx(stored[name], abs=0.01 * (abs(v1 - v0) or 1)), (name, label)


WIDTH_CHECK = """
(() => {
  const main = document.querySelector('main').getBoundingClientRect();
  const svgs = [...document.querySelectorAll('figure.plot svg')].map(svg => ({
    id: svg.closest('figure').id, wide: svg.closest('figure').classList.contains('wide'),
    width: svg.getBoundingClientRect().width, natural: svg.width.baseVal.value}));
  return {main: main.width, viewport: window.innerWidth, scroll: document.documentElement.scrollWidth, svgs};
})()
"""


@pytest.mark.parametrize("width", [1280, 1920, 800])
def test_the_page_uses_the_full_width(browser, reports, width):
    """The main column fills the window (no fixed maximum width), wide plots span it, and on a
    narrow window nothing makes the page scroll sideways and no plot shrinks below 3/4 of its size."""
    session = browser.open()
    set_width(browser, session, width)
    browser.navigate(session, reports["full"].as_uri())
    state = browser.evaluate(session, WIDTH_CHECK)
    assert browser.problems() == []
    assert state["viewport"] == width
    assert state["main"] >= 0.9 * width, state["main"]
    assert state["scroll"] <= width  # no sideways scrolling of the page
    wide = [svg for svg in state["svgs"] if svg["wide"]]
    assert wide
    for svg in state["svgs"]:
        assert svg["width"] >= 0.74 * svg["natural"], svg
    if width >= 1280:
        for svg in wide:
            assert svg["width"] >= 0.85 * width, svg
