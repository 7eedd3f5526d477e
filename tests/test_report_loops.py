"""The report's *Training loops* section (:mod:`agent_rl_plugin.report.loops`) on real DuckDB
files written by :func:`agent_rl_plugin.loop.records.write_round`.

* two methods × two seeds: the chart (one line per loop, the mean and its min–max band per
  method), rounds to 0.8 per loop and their mean, final held-out success, mean seconds per
  phase, and each loop's rounds; a round recorded twice shows its latest row;
* no section (and no error) for a store without the ``loop_rounds`` table or without rows;
* the section sits between *Training* and *Worst rollouts* in a store with rollouts;
* loop ids, policy versions and methods from the store are escaped.
"""

from __future__ import annotations

import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import duckdb
import pytest

pytest.importorskip("matplotlib")

import agent_rl_plugin as arl  # noqa: E402
from agent_rl_plugin import plugins, tracing  # noqa: E402
from agent_rl_plugin.loop.records import LoopRound, write_round  # noqa: E402
from agent_rl_plugin.report import build_report  # noqa: E402
from agent_rl_plugin.report.loops import loop_rounds, summarise  # noqa: E402
from agent_rl_plugin.store import ensure_schema  # noqa: E402
from agent_rl_plugin.store.migrations import MIGRATIONS, migrate  # noqa: E402

#: Held-out success per round of each loop: (loop_id, method, seed) -> curve. Rounds to 0.8:
#: grpo-s0 2, grpo-s1 3 (mean 2.5); rloo-s0 never; rloo-s1 2 only because its round 2 is
#: recorded twice and the second (latest) row says 0.9 where the first said 0.3.
CURVES = {
    ("grpo-s0", "grpo", 0): [0.2, 0.5, 0.8, 0.9],
    ("grpo-s1", "grpo", 1): [0.2, 0.6, 0.7, 0.85],
    ("rloo-s0", "rloo", 0): [0.2, 0.4, 0.5, 0.6],
    ("rloo-s1", "rloo", 1): [0.1, 0.3, 0.9, 0.7],
}
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"


def _round(loop_id: str, method: str, seed: int, number: int, success: float, **extra: Any) -> LoopRound:
    seconds = {"eval": 1.0} if number == 0 else {"rollouts": 2.0 + number, "train": 10.0 * number, "eval": 1.0}
    fields: dict[str, Any] = {
        "policy_version": f"{loop_id}@{number}",
        "train_success": None if number == 0 else success - 0.1,
        "training_run_id": None if number == 0 else f"run-{loop_id}-{number}-abcdef",
    }
    fields.update(extra)
    return LoopRound(
        loop_id=loop_id, round=number, status="done", env="grid", method=method, seed=seed,
        heldout_success=success, seconds=seconds, **fields,
    )  # fmt: skip


def _write_loops(path: Path) -> None:
    for (loop_id, method, seed), curve in CURVES.items():
        for number, success in enumerate(curve):
            if loop_id == "rloo-s1" and number == 2:
                write_round(path, _round(loop_id, method, seed, number, 0.3, policy_version="stale"))
                time.sleep(0.002)  # created_at: the second row is strictly later
            write_round(path, _round(loop_id, method, seed, number, success))


class Tables(HTMLParser):
    """The section ids, the ``<h4>`` titles and the tables (rows of cell texts) of the
    ``loops`` section, and the nav links."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []
        self.nav: list[str] = []
        self.titles: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.summaries: list[str] = []
        self._in_loops = False
        self._in_nav = False
        self._in: str | None = None
        self._cell: list[str] | None = None
        self._buffer: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "section":
            self.sections.append(str(values.get("id")))
            self._in_loops = values.get("id") == "loops"
        if tag == "nav":
            self._in_nav = True
        if tag == "a" and self._in_nav:
            self.nav.append(str(values["href"])[1:])
        if not self._in_loops:
            return
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in ("h4", "summary"):
            self._in, self._buffer = tag, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._in_loops = False
        if tag == "nav":
            self._in_nav = False
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        if tag == self._in:
            (self.titles if tag == "h4" else self.summaries).append("".join(self._buffer))
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in is not None:
            self._buffer.append(data)


def _by_first_cell(table: list[list[str]]) -> dict[str, dict[str, str]]:
    header, *rows = table
    return {row[0]: dict(zip(header, row)) for row in rows}


@pytest.fixture(scope="module")
def loops_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("loops")
    path = folder / "loops.duckdb"
    _write_loops(path)
    summary = build_report(str(path), folder / "report.html")
    return path, summary, (folder / "report.html").read_text(encoding="utf-8")


def test_two_methods_two_seeds(loops_report):
    _, summary, text = loops_report
    assert summary.sections == ["overview", "loops"]  # no rollouts: the loops still show
    assert summary.counts["loops"] == 4
    assert summary.counts["loop_rounds"] == 16  # the duplicated round counts once
    assert summary.plots == ["plot-loops-heldout"]
    page = Tables(text)
    assert page.nav == ["overview", "loops"]
    assert page.titles == ["grpo · grid", "rloo · grid"]
    grpo, rloo = (_by_first_cell(t) for t in page.tables[:2])
    assert grpo["grpo-s0"]["rounds to 0.8"] == "2"
    assert grpo["grpo-s1"]["rounds to 0.8"] == "3"
    assert grpo["mean of 2 loops"]["rounds to 0.8"] == "2.5 (2 of 2 reached)"
    assert [grpo[k]["final held-out"] for k in ("grpo-s0", "grpo-s1", "mean of 2 loops")] == ["0.9", "0.85", "0.875"]
    assert rloo["rloo-s0"]["rounds to 0.8"] == "not reached"
    assert rloo["rloo-s1"]["rounds to 0.8"] == "2"  # the latest row of round 2 (0.9) wins
    assert rloo["mean of 2 loops"]["rounds to 0.8"] == "2 (1 of 2 reached)"
    assert rloo["rloo-s1"]["final held-out"] == "0.7"
    # Mean seconds per phase over the rounds that recorded it: train 10, 20, 30 -> 20; eval 1.
    assert grpo["grpo-s0"]["train s"] == "20" and grpo["grpo-s0"]["eval s"] == "1"
    assert grpo["grpo-s0"]["rollouts s"] == "4" and grpo["grpo-s0"]["rounds by status"] == "4 done"
    # One per-round table per loop, by method then seed; the duplicated round shows its latest row.
    assert len(page.tables) == 2 + 4
    assert [s.split(" · ")[0] for s in page.summaries] == ["grpo-s0", "grpo-s1", "rloo-s0", "rloo-s1"]
    rounds = _by_first_cell(page.tables[5])
    assert list(rounds) == ["0", "1", "2", "3"]
    assert rounds["2"]["held-out success"] == "0.9"
    assert rounds["2"]["policy version"] == "rloo-s1@2"
    assert rounds["2"]["training run"] == "run-rloo"  # the run id, shortened to 8 characters
    assert rounds["2"]["total s"] == "25"  # rollouts 4 + train 20 + eval 1
    assert rounds["0"]["train success"] == "" and rounds["0"]["status"] == "done"
    # The chart: the mean of each method's two seeds with its band, named in the legend.
    assert "grpo: mean of 2 (band min–max)" in text and "rloo: mean of 2 (band min–max)" in text


def test_mean_curve_and_band(loops_report):
    path, _, _ = loops_report
    with duckdb.connect(str(path), read_only=True) as connection:
        rows = loop_rounds(connection)
    groups = {g.method: g for g in summarise(rows)}
    band = {number: rest for number, *rest in groups["grpo"].band}
    assert band[1] == pytest.approx([0.55, 0.5, 0.6, 2])
    assert band[3] == pytest.approx([0.875, 0.85, 0.9, 2])
    assert {number: rest for number, *rest in groups["rloo"].band}[2] == pytest.approx([0.7, 0.5, 0.9, 2])


def test_no_table_no_rows_no_section(tmp_path):
    # An older store: migrations up to 0009, no loop_rounds table (opened as a connection, so
    # the report's reader does not upgrade it).
    old = tmp_path / "old.duckdb"
    with duckdb.connect(str(old)) as connection:
        migrate(connection, [m for m in MIGRATIONS if m.name < "0010"])
        assert connection.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'loop_rounds'"
        ).fetchone() == (0,)
        summary = build_report(connection, tmp_path / "old.html")
    assert "loops" not in summary.sections and summary.counts["loops"] == 0
    assert 'id="loops"' not in (tmp_path / "old.html").read_text(encoding="utf-8")
    # The table, but no rows.
    empty = tmp_path / "empty.duckdb"
    ensure_schema(empty)
    summary = build_report(str(empty), tmp_path / "empty.html")
    assert summary.sections == ["overview"] and summary.counts["loop_rounds"] == 0
    assert "Training loops" not in (tmp_path / "empty.html").read_text(encoding="utf-8")


def test_section_order_with_rollouts(tmp_path):
    path = tmp_path / "store.duckdb"
    previous = plugins.get_plugin_manager()
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        tracing.configure(db_path=str(path), export_delay_ms=50)
        with arl.rollout(task_id="t1", group_id="g1"):
            arl.record_tool_call("lookup", arguments={"item": "pen"}, result=1.5)
        assert arl.flush()
        arl.shutdown()
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(previous)
    write_round(path, _round("one", "gigpo", 3, 0, 0.25))
    summary = build_report(str(path), tmp_path / "r.html", where="task_id = 't1'")
    assert summary.sections[-3:] == ["training", "loops", "worst"]
    page = Tables((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert page.nav[-3:] == ["training", "loops", "worst"]
    assert _by_first_cell(page.tables[0])["one"]["rounds to 0.8"] == "not reached"


def test_store_values_are_escaped(tmp_path):
    path = tmp_path / "hostile.duckdb"
    for number, success in enumerate([0.5, 0.9]):
        write_round(path, _round(SCRIPT, f"grpo{IMG}", 0, number, success, policy_version=IMG, training_run_id=SCRIPT))
    build_report(str(path), tmp_path / "h.html")
    text = (tmp_path / "h.html").read_text(encoding="utf-8")
    section = text[text.index('<section id="loops">') :]
    for payload in (SCRIPT, IMG, "<script>alert", "<img"):
        assert payload not in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "&lt;img src=x onerror=alert(2)&gt;" in section
    page = Tables(text)
    assert page.summaries[0].startswith(SCRIPT + " · grpo" + IMG)  # shown as text, whole
    assert _by_first_cell(page.tables[1])["1"]["policy version"] == IMG
