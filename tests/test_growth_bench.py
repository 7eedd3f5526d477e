"""The growth benchmark (bench/growth.py) on tiny sizes: it measures what it says, its checks
catch wrong rows, its fast build writes what the bulk path writes, and the lookup indexes of
migration 0012 are what one-rollout lookups use, with the same rows as the views before it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agent_rl_plugin.store import connect_writer  # noqa: E402
from agent_rl_plugin.store.views import EVENTS_V1, ROLLOUTS_V4  # noqa: E402
from bench import growth  # noqa: E402
from bench.harness import Row  # noqa: E402


def _store(path: Path, rollouts: int, fast: bool = True) -> growth.Growth:
    built = growth.Growth(path)
    connection = connect_writer(str(path))
    try:
        if fast:
            built.build_to(connection, rollouts)
        else:
            while built.rollouts < rollouts:
                built.append(connection, min(40, rollouts - built.rollouts))
    finally:
        connection.close()
        built.generator.close()
    return built


def test_measure_on_tiny_sizes_passes_its_checks(tmp_path):
    results, totals = growth.measure((1_000, 3_000), tmp_path, repeats=2, rounds=1, batch_rollouts=50, kto_repeats=1)
    assert [r.spans for r in results] == [1_000, 3_000]
    for result in results:
        assert result.failures == []
        assert len(result.ingest_rates) == 1 and result.ingest_rates[0] > 0
        assert len(result.reference_rates) == 1
        assert set(result.lookups_ms) == set(growth.LOOKUP_SQL)
        assert all(len(v) >= 2 and min(v) > 0 for v in result.lookups_ms.values())
        assert result.kto_task_s and result.kto_all_s
        assert result.file_bytes > 0
    assert results[-1].reference_spans == 1_000 + 1 * 2 * 50 * growth.SPANS_PER_ROLLOUT  # 1 round of 2 batches
    assert totals["insert_s"] > 0
    assert not list(tmp_path.iterdir())  # the store files and their spool folders are gone
    row = Row(id="growth")
    growth.fill_row(row, results, totals, batch_rollouts=50)
    assert row.checks and all(row.checks.values())
    assert row.status in ("PASS", "MISS")
    labels = [t.label for t in row.targets]
    assert any("ingest slow-down" in label for label in labels)
    assert sum("ms at" in label for label in labels) == len(growth.ONE_ROLLOUT)


def test_checks_catch_wrong_rows(tmp_path):
    path = tmp_path / "s.duckdb"
    _store(path, 60)
    connection = duckdb.connect(str(path), read_only=True)
    try:
        for name, sql in growth.LOOKUP_SQL.items():
            rows = connection.execute(
                sql(growth.task_of(13) if name == "llm_calls_task" else growth.rollout_id(13))
            ).fetchall()
            assert growth.check_lookup(name, 13, rows, 60) is None, name
            assert rows
            assert growth.check_lookup(name, 13, rows[:-1], 60) is not None, name  # a row missing
            if name != "rollouts_list":
                other = 13 + growth.GROUP_SIZE  # another group, another task
                assert growth.check_lookup(name, other, rows, 60) is not None, name  # another rollout's rows
        rows = connection.execute(growth.LOOKUP_SQL["rewards_join"](growth.rollout_id(13))).fetchall()
        wrong = [(*rows[0][:4], rows[0][4] + 0.5), *rows[1:]]
        assert growth.check_lookup("rewards_join", 13, wrong, 60) is not None
    finally:
        connection.close()
    _, problem = growth.time_kto(path, 60, None, 1)
    assert problem is None
    connection = duckdb.connect(str(path))
    connection.execute(
        "UPDATE rewards SET value = 1 - value WHERE rollout_id = ? AND name = 'correct'", [growth.rollout_id(7)]
    )
    connection.close()
    _, problem = growth.time_kto(path, 60, None, 1)
    assert problem is not None and growth.rollout_id(7) in problem


def test_fast_build_writes_what_insert_batch_writes(tmp_path):
    _store(tmp_path / "fast.duckdb", 120, fast=True)
    _store(tmp_path / "bulk.duckdb", 120, fast=False)
    digests = []
    for name in ("fast", "bulk"):
        connection = duckdb.connect(str(tmp_path / f"{name}.duckdb"), read_only=True)
        digests.append(
            connection.execute("SELECT count(*), sum(hash(COLUMNS(* EXCLUDE (ingested_at)))) FROM spans").fetchall()
            + connection.execute("SELECT count(*), sum(hash(COLUMNS(* EXCLUDE (created_at)))) FROM rewards").fetchall()
        )
        connection.close()
    assert digests[0] == digests[1]
    assert digests[0][0][0] == 1_200 and digests[0][1][0] == 240


def _scans(connection: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[str, str, str]]:
    """(table, scan type, filters) of every table scan DuckDB ran for ``sql``."""
    doc = json.loads(connection.execute("EXPLAIN (ANALYZE, FORMAT json) " + sql).fetchall()[0][1])
    found: list[tuple[str, str, str]] = []

    def walk(node: dict) -> None:
        if node.get("type") == "TABLE_SCAN":
            info = node["extra_info"]
            kind = info.get("Type", "")
            if kind == "Sequential Scan" and str(info.get("Dynamic Filters", "")).startswith("(rowid = "):
                kind = "Row Id Fetch"  # a join on rowid: pruned to the one row when it runs
            found.append((info["Table"].rsplit(".", 1)[-1], kind, str(info.get("Filters"))))
        for child in node.get("children", []):
            walk(child)

    for node in doc["operator"]:
        walk(node)
    return found


@pytest.fixture
def with_events(tmp_path):
    """A store with coordination events: on a span of their own rollout, and one naming another."""
    path = tmp_path / "e.duckdb"
    _store(path, 50)
    connection = connect_writer(str(path))
    event = (
        '[{"name": "agent_rl.event", "time": 1767225600000000000, "attributes": '
        '{"agent_rl.event.type": "vote", "agent_rl.event.target": "b"%s}}]'
    )
    for k, (r, other) in enumerate(((3, None), (4, 9), (5, None))):
        extra = "" if other is None else f', "agent_rl.rollout.id": "{growth.rollout_id(other)}"'
        connection.execute(
            "INSERT INTO spans SELECT * REPLACE (? AS span_id, CAST(? AS JSON) AS events, "
            "start_unix_nano + 100 AS start_unix_nano) FROM spans WHERE rollout_id = ? AND span_id = ?",
            [f"e{k:015d}", event % extra, growth.rollout_id(r), growth.span_id(r, 2)],
        )
    # a span that starts before its rollout's root (the root is still the root span)
    connection.execute(
        "INSERT INTO spans SELECT * REPLACE ('p000000000000000' AS span_id, start_unix_nano - 2000000 AS start_unix_nano) "
        "FROM spans WHERE rollout_id = ? AND span_id = ?",
        [growth.rollout_id(8), growth.span_id(8, 1)],
    )
    # a rollout with two root spans: the earlier one is its root
    connection.execute(
        "INSERT INTO spans SELECT * REPLACE ('r000000000000000' AS span_id, 'invoke_agent later' AS name, "
        "start_unix_nano + 5000 AS start_unix_nano) FROM spans WHERE rollout_id = ? AND span_id = ?",
        [growth.rollout_id(6), growth.span_id(6, 0)],
    )
    connection.close()
    return path


def test_one_rollout_lookups_use_the_indexes(with_events):
    connection = duckdb.connect(str(with_events), read_only=True)
    try:
        rid = growth.rollout_id(9)
        steps = connection.execute(f"SELECT kind, name FROM steps WHERE rollout_id = '{rid}'").fetchall()
        assert ("event", "vote") in steps  # the event recorded on rollout 4's span, naming rollout 9
        scans = _scans(connection, f"SELECT * FROM steps WHERE rollout_id = '{rid}'")
        assert ("spans", "Index Scan", f"(rollout_id = '{rid}')") in scans  # llm and tool calls
        assert any(t == "Index Scan" and "agent_rl.event" in f for _, t, f in scans), scans  # span events
        # left: zero-length event spans, filtered on span_kind and rollout_id (two columns: no index)
        assert [s for s in scans if s[1] != "Index Scan"] == [
            ("spans", "Sequential Scan", str(["(span_kind = 'event')", f"(rollout_id = '{rid}')"]))
        ], scans
        for sql in (
            f"SELECT n_spans, total_reward FROM rollouts WHERE rollout_id = '{rid}'",
            f"SELECT * FROM rewards WHERE rollout_id = '{rid}'",
        ):
            scans = _scans(connection, sql)
            assert scans and all(t == "Index Scan" for table, t, _ in scans if table == "rewards"), scans
            spans_scans = [t for table, t, _ in scans if table == "spans"]
            assert "Sequential Scan" not in spans_scans and ("Index Scan" in spans_scans or "rollouts" not in sql)
    finally:
        connection.close()


def test_lookup_views_hold_the_rows_of_the_views_before(with_events):
    connection = duckdb.connect(str(with_events), read_only=True)
    try:
        connection.execute(EVENTS_V1.replace("CREATE OR REPLACE VIEW events", "CREATE TEMP VIEW events_v1"))
        connection.execute(ROLLOUTS_V4.replace("CREATE OR REPLACE VIEW rollouts", "CREATE TEMP VIEW rollouts_v4"))
        for new, old in (("events", "events_v1"), ("rollouts", "rollouts_v4")):
            rows = connection.execute(f"SELECT * FROM {new} ORDER BY ALL").fetchall()
            assert rows and rows == connection.execute(f"SELECT * FROM {old} ORDER BY ALL").fetchall()
        assert connection.execute("SELECT count(*) FROM events").fetchone() == (3,)
        root = connection.execute("SELECT name, n_spans FROM rollouts WHERE rollout_id = ?", [growth.rollout_id(6)])
        assert root.fetchall() == [("invoke_agent shopper", 11)]
    finally:
        connection.close()
