"""``agent-rl report`` and :func:`agent_rl_plugin.report.build_report`: one self-contained HTML
file with a section per topic, every plot an inline SVG, working anchors from the worst
rollouts to their step-by-step traces, untrusted content escaped, an empty store, a store with
no training runs, and ``--where``.

The store is built once per module (about 10 s): the demo agent in GRPO groups (tool calls,
some failing), a multi-agent rollout with votes and a restart, a rollout whose every piece of
content is hostile HTML, a failed rollout, the built-in reward plugins, and two recorded
training runs with per-step metrics. ``tests/test_report_browser.py`` opens the same report in
a headless Chromium.
"""

from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

pytest.importorskip("matplotlib")

import agent_rl_plugin as arl  # noqa: E402
from agent_rl_plugin import plugins, tracing  # noqa: E402
from agent_rl_plugin.report import SECTIONS, ReportError, build_report  # noqa: E402
from agent_rl_plugin.report.html import anchor_id  # noqa: E402

#: A rollout id full of characters that are not allowed in an HTML id unescaped.
XSS_ROLLOUT = 'xss"><script>window.__xss=9</script>'
#: Payloads: if any of them reaches the page unescaped, ``window.__xss`` is set (or an
#: ``<img onerror>`` fires) when a browser opens it.
SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'


# -- building the store ------------------------------------------------------------------------


def _record_extras() -> None:
    """A multi-agent rollout, a hostile rollout and a failed one (tracing must be configured)."""
    with arl.rollout(task_id="debate-1", group_id="debate/g0", metadata={"multi_agent": True}):
        arl.record_llm_call("judge-model", "Which is larger, 41 or 42?", "42", input_tokens=20, output_tokens=3)
        arl.record_event("new_answer", round=0, agent_id="alice", content="42")
        arl.record_event("new_answer", round=0, agent_id="bob", content="41")
        arl.record_event("vote", round=0, agent_id="alice", target="alice", reason="mine is right")
        arl.record_event("vote", round=0, agent_id="bob", target="bob")
        arl.record_event("restart", round=1, agent_id="bob", reason="disagreement")
        arl.record_event("vote", round=1, agent_id="alice", target="alice")
        arl.record_event("vote", round=1, agent_id="bob", target="alice", reason="convinced")
        arl.record_event("final_answer", round=1, agent_id="alice", content="42")
        arl.emit_reward(1.0, name="correct", reason="agreed on 42")
    with arl.rollout(task_id=f"task {SCRIPT}", group_id=f"g {IMG}", rollout_id=XSS_ROLLOUT):
        arl.record_llm_call(
            f"model {SCRIPT}",
            [{"role": "system", "content": IMG}, {"role": "user", "content": f"</pre>{SCRIPT}"}],
            f"</div></details>{SCRIPT}",
            tool_calls=[{"id": "c1", "name": f"search{SCRIPT}", "arguments": {"q": IMG}}],
            input_tokens=7,
            output_tokens=5,
            reasoning=f"thinking {SCRIPT}",
        )
        arl.record_tool_call(f"search {SCRIPT}", arguments={"q": IMG}, result=f"{SCRIPT} result")
        arl.record_tool_call("fetch", arguments={"url": "x"}, error=f"ValueError: {SCRIPT}")
        arl.record_event(f"note{SCRIPT}", agent_id=IMG, content=SCRIPT, reason=IMG, extra=SCRIPT)
        arl.emit_reward(-5.0, name="correct", reason=SCRIPT)
        arl.emit_reward(-1.0, name="correct", step=1, reason=IMG)
    try:
        with arl.rollout(task_id="crash-1", group_id="crash/g0"):
            arl.record_tool_call("lookup", arguments={"item": "?"}, error="KeyError: '?'")
            raise RuntimeError("the agent crashed")
    except RuntimeError:
        pass


def _training_runs(path: str) -> list[str]:
    from agent_rl_plugin.train import record_training_run

    kto = [
        {
            "step": s,
            "epoch": s / 10,
            "loss": 0.7 - 0.04 * s,
            "kl": 0.01 * s,
            "rewards/chosen": 0.1 * s,
            "rewards/rejected": -0.05 * s,
            "logps/chosen": -40 + s,
            "learning_rate": 1e-4,
            "grad_norm": 1.0 / s,
        }
        for s in range(1, 11)
    ]
    grpo = [
        {
            "step": s,
            "loss": 0.2 / s,
            "logp/positive": -3 + 0.1 * s,
            "logp/negative": -3 - 0.1 * s,
            "reward": 0.3 + 0.02 * s,
        }
        for s in range(1, 9)
    ]
    ids = []
    for method, history in (("kto", kto), ("offline_grpo", grpo)):
        result = SimpleNamespace(
            metrics={"train_loss": history[-1]["loss"]},
            log_history=history + [{"step": len(history), "train_loss": 0.5}],
            seconds=3.0,
        )
        ids.append(
            record_training_run(path, result, {"model": "tiny", "lr": 1e-4}, "status = 'ok'", method=method, n_rows=12)
        )
    return ids


def make_report_db(path: Path, *, training: bool = True) -> Path:
    """Record, score and train into ``path`` (see the module docstring); returns ``path``."""
    from score_support import record_demo

    from agent_rl_plugin.rewards.runner import score

    previous = plugins.get_plugin_manager()
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        tracing.configure(db_path=str(path), export_delay_ms=50)
        record_demo(tasks=3, group_size=3, seed=2)
        tracing.configure(db_path=str(path), export_delay_ms=50)
        _record_extras()
        assert arl.flush()
        arl.shutdown()
        score(str(path), workers=0)
        if training:
            _training_runs(str(path))
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(previous)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return make_report_db(tmp_path_factory.mktemp("report") / "store.duckdb")


@pytest.fixture(scope="module")
def report(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "report.html"
    summary = build_report(str(store), out)
    return summary, out.read_text(encoding="utf-8")


# -- parsing the page --------------------------------------------------------------------------


class Page(HTMLParser):
    """Ids, links, scripts, sections, figures and the SVG inside each figure of a page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.links: list[str] = []
        self.scripts: list[str] = []
        self.sections: list[str] = []
        self.figures: list[dict] = []
        self.details: list[str] = []
        self.tags: set[str] = set()
        self.event_handlers: list[tuple[str, str]] = []
        self.text: list[str] = []
        self._in_script = False
        self._figure: dict | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        values = dict(attrs)
        self.tags.add(tag)
        if values.get("id"):
            self.ids.append(values["id"])
        for name, _ in attrs:
            if name.startswith("on"):
                self.event_handlers.append((tag, name))
        if tag == "a" and values.get("href"):
            self.links.append(values["href"])
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        if tag == "section":
            self.sections.append(values.get("id"))
        if tag == "details":
            self.details.append(values.get("id"))
        if tag == "figure" and "plot" in (values.get("class") or ""):
            self._figure = {"id": values.get("id"), "svg": 0, "paths": 0}
            self.figures.append(self._figure)
        if self._figure is not None and tag == "svg":
            self._figure["svg"] += 1
        if self._figure is not None and tag in ("path", "use", "rect", "text"):
            self._figure["paths"] += 1

    def handle_endtag(self, tag):  # noqa: ANN001
        if tag == "script":
            self._in_script = False
        if tag == "figure":
            self._figure = None

    def handle_data(self, data):  # noqa: ANN001
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


# -- the report --------------------------------------------------------------------------------


def test_every_section_is_there(report):
    summary, text = report
    page = Page(text)
    expected = [sid for sid, _ in SECTIONS]
    assert summary.sections == expected
    assert page.sections == expected
    assert summary.counts["rollouts"] == 3 * 3 + 3
    assert summary.counts["training_runs"] == 2
    assert summary.counts["coordination_rollouts"] == 1
    assert summary.counts["tool_errors"] >= 2
    assert not summary.empty
    body = " ".join(page.text)
    for words in (
        "Rollouts over time",
        "Reward names",
        "task_completion",
        "tool_success",
        "Tool calls",
        "Tokens",
        "Consensus",
        "Training",
        "Step by step",
    ):
        assert words in body or words in text, words
    # Coordination: alice won the last round 2 votes to 0 after bob's restart: consensus, 2 rounds.
    assert re.search(r"<td>alice</td>", text)


def test_every_plot_is_an_inline_svg(report):
    summary, text = report
    page = Page(text)
    assert len(page.figures) == len(summary.plots) >= 12
    assert [f["id"] for f in page.figures] == summary.plots
    for figure in page.figures:
        assert figure["svg"] == 1, figure
        assert figure["paths"] > 10, figure
    for plot_id in (
        "plot-rollouts-time",
        "plot-rewards-names",
        "plot-rewards-combined",
        "plot-rewards-groups",
        "plot-tools",
        "plot-tokens",
        "plot-coordination",
        "plot-training-0",
        "plot-training-1",
    ):
        assert plot_id in summary.plots
    # Self-contained: nothing is fetched (no external URL in src/href, no stylesheet link, CSP).
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    assert "<link" not in text
    assert "default-src &#x27;none&#x27;" in text
    # Ids are unique across the inline SVGs (prefixed per plot).
    assert len(page.ids) == len(set(page.ids))


def test_axes_titles_and_units(report):
    _, text = report
    for label in (
        "after the first start",
        "duration (ms)",
        "latency (ms)",
        "reward value",
        "combined reward",
        "optimizer step",
        "tokens",
        "KL divergence",
        "calls",
    ):
        assert f">{label}<" in text or label in text, label
    # Training curves: loss, reward, KL and completion log-prob (summed) panels for KTO; per-token
    # log-probs for the offline GRPO run, each labelled with its quantity.
    for title in ("Loss", "Reward", "KL", "Log-probabilities (per completion)", "Log-probabilities (per token)"):
        assert f">{title}<" in text, title
    assert re.search(r">sum of log p over the completion(&#x27;|')s tokens<", text)
    assert ">mean log p per token<" in text


def test_anchors_resolve_and_traces_expand(report):
    summary, text = report
    page = Page(text)
    ids = set(page.ids)
    internal = [link[1:] for link in page.links if link.startswith("#")]
    assert internal
    for target in internal:
        assert target in ids, target
    traces = [d for d in page.details if d and d.startswith("rollout-")]
    assert len(traces) == summary.traces > 0
    # Every trace the worst table links to exists, and the worst rollout (the hostile one, -5) is first.
    assert traces[0] == anchor_id(XSS_ROLLOUT)
    assert anchor_id(XSS_ROLLOUT).startswith("rollout-h")
    # A trace shows LLM messages, tool arguments, results and errors, events and step rewards.
    start = text.index(f'id="{anchor_id(XSS_ROLLOUT)}"')
    trace = text[start : text.index("</details>\n", start) if "</details>\n" in text[start:] else None]
    for piece in ("arguments", "result", "error", "input: 2 messages", "output", "reasoning", "step 1", "★"):
        assert piece in trace, piece


def test_untrusted_content_is_escaped(report):
    _, text = report
    page = Page(text)
    assert len(page.scripts) == 1  # only the report's own script
    assert "__xss" not in page.scripts[0]
    assert page.event_handlers == []  # no onerror=..., onload=... anywhere
    assert "img" not in page.tags
    assert "<script>window.__xss" not in text
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in text
    # The payloads are shown as text: they are visible to the reader.
    visible = "".join(page.text)
    assert "<script>window.__xss=1</script> result" in visible
    assert IMG in visible


def test_time_axes():
    """Rollouts over hours get dates on the x axis; a burst of seconds gets seconds after the first."""
    from datetime import datetime, timedelta

    from agent_rl_plugin.report import plots

    start = datetime(2026, 1, 5, 8, 0, 0)
    hours = [
        {
            "start_time": start + timedelta(minutes=37 * i),
            "status": "error" if i % 7 == 0 else "ok",
            "duration_ms": 100.0 * (i + 1),
            "reward": i / 50,
        }
        for i in range(50)
    ]
    plot = plots.rollouts_over_time(hours)
    assert ">start time (UTC)<" in plot.svg and "Jan" in plot.svg
    assert plots.reward_over_time(hours) is not None
    assert plots.status_and_duration(hours) is not None  # durations spanning 100x: log axis
    burst = [{"start_time": start + timedelta(seconds=i / 4), "status": "ok"} for i in range(20)]
    assert "seconds after the first start (2026-01-05 08:00:00 UTC)" in plots.rollouts_over_time(burst).svg
    same = [{"start_time": start, "status": "ok"}] * 3
    assert "milliseconds after the first start" in plots.rollouts_over_time(same).svg
    assert plots.rollouts_over_time([]) is None and plots.combined_distribution([]) is None


def test_log_axes_have_plain_number_labels():
    """A log axis labels its ticks 1, 10, 100, 1,000 (mathtext is off, so matplotlib's default
    ``$\\mathdefault{10^{2}}$`` would print as that raw text)."""
    from agent_rl_plugin.report import plots
    from agent_rl_plugin.report.svg import plain_number

    tools = [{"tool_name": "lookup", "calls": 8, "errors": 1, "error_rate": 0.125}]
    svg = plots.tool_calls(tools, {"lookup": [0.5 * 3**i for i in range(8)]}).svg
    assert "mathdefault" not in svg and "$" not in svg
    for label in (">1<", ">10<", ">100<", ">1,000<"):
        assert label in svg, label
    assert [plain_number(v) for v in (1, 20, 1000, 0.05, 2e-5, 3e6, -5, 999999.9999)] == [
        "1",
        "20",
        "1,000",
        "0.05",
        "2e-5",
        "3e6",
        "\u22125",
        "1e6",
    ]


def test_worst_lists_at_most_that_many_lowest_rewards():
    """``worst`` caps the list: the lowest combined rewards, and unrewarded rollouts (failed ones
    first, latest first) only fill the places left when fewer have a reward."""
    from datetime import datetime, timedelta

    from agent_rl_plugin.report.sections import listed

    start = datetime(2026, 1, 5, 8, 0, 0)

    def row(i: int, reward: float | None, status: str = "ok") -> dict:
        return {
            "rollout_id": f"r{i:02d}",
            "reward": reward,
            "status": status,
            "start_time": start + timedelta(seconds=i),
        }

    combined = [row(i, (i * 7) % 30 / 30, "error" if i % 5 == 0 else "ok") for i in range(30)]
    combined += [row(30, None, "error"), row(31, None)]
    chosen = listed(combined, 20)
    lowest = sorted((r for r in combined if r["reward"] is not None), key=lambda r: r["reward"])[:20]
    assert [r["rollout_id"] for r, _ in chosen] == [r["rollout_id"] for r in lowest]
    assert [why for _, why in chosen][:2] == ["lowest reward #1", "lowest reward #2"]
    few = [row(1, 0.5), row(2, 0.1), row(3, None), row(4, None, "error"), row(5, None, "error"), row(6, None)]
    assert [(r["rollout_id"], why) for r, why in listed(few, 4)] == [
        ("r02", "lowest reward #1"),
        ("r01", "lowest reward #2"),
        ("r05", "error, no reward"),
        ("r04", "error, no reward"),
    ]
    assert len(listed(few, 10)) == 6 and listed(few, 0) == []


def test_plots_escape_untrusted_labels():
    from agent_rl_plugin.report import plots

    groups = [
        {
            "group_id": f"${i}^2$ {SCRIPT}",
            "rewards": [0.1, 0.5],
            "min": 0.1,
            "max": 0.5,
            "mean": 0.3,
            "spread": 0.4,
            "rollouts": 2,
        }
        for i in range(3)
    ]
    svg = plots.group_spread(groups).svg
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<script" not in svg and "<!--" not in svg
    # Text stays text (no mathtext: a "$" is a dollar sign), escaped by the SVG writer.
    assert "$0^2$ &lt;script&gt;" in svg


def _counts(path: Path) -> list:
    connection = duckdb.connect(str(path), read_only=True)
    try:
        return connection.execute(
            "select (select count(*) from spans), (select count(*) from rewards), (select count(*) from training_metrics)"
        ).fetchall()
    finally:
        connection.close()


def test_cli_json_where_and_errors(store, tmp_path, plugin_manager):
    from score_support import agent_rl

    import agent_rl_plugin.cli.report as report_cli

    if not plugin_manager.is_registered(report_cli):
        plugin_manager.register(report_cli, name="cli_report_test")
    before = _counts(store)
    out = tmp_path / "sub" / "r.html"
    result = agent_rl("report", "--db", str(store), "--out", str(out), "--where", "task_id like 'shop-%'", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["path"] == str(out.resolve())
    assert data["where"] == "task_id like 'shop-%'"
    assert data["counts"]["rollouts"] == 9
    assert data["counts"]["training_runs"] == 2  # training runs are not filtered by --where
    assert "coordination" not in data["sections"]  # no votes among the shop rollouts
    assert data["sections"][0] == "overview" and "training" in data["sections"] and "worst" in data["sections"]
    assert data["bytes"] == out.stat().st_size
    assert out.stat().st_mode & 0o777 == 0o600  # reports hold prompts and outputs: this user only
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "task_id like &#x27;shop-%&#x27;" in text
    assert "debate-1" not in text
    # Human output: the progress bar (on stderr) goes away; one line says where the file is.
    result = agent_rl("report", "--db", str(store), "-o", str(out), "--where", "task_id = 'crash-1'")
    assert result.exit_code == 0, result.output
    assert "Wrote" in result.stdout and "r.html" in result.stdout and "1 rollouts" in result.stdout
    # Errors are one line and a fix, never a traceback.
    result = agent_rl("report", "--db", str(store), "--out", str(out), "--where", "no_such_column = 1")
    assert result.exit_code == 1
    assert result.stderr.startswith("error:") and "no_such_column" in result.stderr and "fix:" in result.stderr
    assert "Traceback" not in result.output
    result = agent_rl("report", "--db", str(store), "--out", str(out), "--where", "true); drop table spans; select (1")
    assert result.exit_code == 1 and "only reads" in result.stderr
    result = agent_rl("report", "--db", str(tmp_path / "missing.duckdb"), "--out", str(out))
    assert result.exit_code == 1 and "no database" in result.stderr
    # Reading never changed the store.
    assert _counts(store) == before


def test_where_filters_rollouts(store, tmp_path):
    summary = build_report(str(store), tmp_path / "w.html", where="task_id = 'debate-1'", worst=5)
    assert summary.counts["rollouts"] == 1
    assert summary.counts["coordination_rollouts"] == 1
    assert summary.traces == 1
    summary = build_report(str(store), tmp_path / "w3.html", where="task_id = 'nothing'")
    assert summary.empty and summary.counts["rollouts"] == 0
    assert summary.sections == ["overview", "training"]
    assert "No rollouts match" in (tmp_path / "w3.html").read_text(encoding="utf-8")
    with pytest.raises(ReportError, match="SQL error"):
        build_report(str(store), tmp_path / "w4.html", where="task_id = ")
    with pytest.raises(ReportError, match="only reads"):
        build_report(str(store), tmp_path / "w4.html", where="true); delete from spans; select (1")
    with pytest.raises(ReportError, match="empty"):
        build_report(str(store), tmp_path / "w4.html", where="  ")
    assert not (tmp_path / "w4.html").exists()


def test_empty_database(tmp_path):
    from agent_rl_plugin.store import ensure_schema

    path = tmp_path / "empty.duckdb"
    ensure_schema(path)
    summary = build_report(str(path), tmp_path / "empty.html")
    text = (tmp_path / "empty.html").read_text(encoding="utf-8")
    assert summary.empty
    assert summary.sections == ["overview"]
    assert summary.plots == []
    assert "Nothing recorded yet" in text
    assert Page(text).figures == []


def test_no_training_runs(tmp_path):
    """A store with rollouts but no training runs: the training section says so."""
    from agent_rl_plugin.rewards.runner import score

    path = tmp_path / "untrained.duckdb"
    previous = plugins.get_plugin_manager()
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        tracing.configure(db_path=str(path), export_delay_ms=50)
        with arl.rollout(task_id="t1", group_id="g1"):
            arl.record_tool_call("lookup", arguments={"item": "pen"}, result=1.5)
            arl.emit_reward(0.5, name="correct")
        assert arl.flush()
        arl.shutdown()
        score(str(path), rewards=["tool_success"], workers=0)
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(previous)
    summary = build_report(str(path), tmp_path / "u.html")
    text = (tmp_path / "u.html").read_text(encoding="utf-8")
    assert "training" in summary.sections
    assert summary.counts["training_runs"] == 0
    assert "No training runs yet" in text
    assert "No LLM calls recorded" in text  # the tokens section says so too
    assert "plot-tools" in summary.plots


def test_reads_a_store_written_by_a_live_exporter(tmp_path, db_path):
    """In the recording process the report reads through the exporter's connection."""
    with arl.rollout(task_id="live", group_id="g"):
        arl.record_tool_call("lookup", arguments={}, result=1)
    assert arl.flush()
    summary = build_report(str(db_path), tmp_path / "live.html")
    assert summary.counts["rollouts"] == 1


@pytest.mark.slow
def test_demo_database(tmp_path, demo_tour):
    """``agent-rl demo`` (run once per session: tests/demo_tour.py) then ``agent-rl report`` as a
    user would run them."""
    db = demo_tour.copy(tmp_path / "demo.duckdb")
    started = time.perf_counter()
    summary = build_report(str(db), tmp_path / "demo.html")
    assert summary.counts["training_runs"] == 3 and summary.counts["rollouts"] == 16
    assert {"plot-training-0", "plot-training-1", "plot-training-2"} <= set(summary.plots)
    assert time.perf_counter() - started < 600
