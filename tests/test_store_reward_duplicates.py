"""The writer's duplicate check on rewards (store/batch.py ``new_rewards_sql``): a stored
``reward_id`` is never written again, whether the batch's rewards carry their event time (the
check is bounded to stored rewards created within the batch's time range, so it stays flat as
the store grows) or not (the check then looks at every stored reward). Real DuckDB files, real
migrations; the merge path (Parquet segments) and the held-connection path (``insert_batch``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pyarrow as pa

from agent_rl_plugin.store.batch import REWARDS_VIEW, insert_batch, new_rewards_sql
from agent_rl_plugin.store.connection import connect_writer
from agent_rl_plugin.store.lease import try_merge
from agent_rl_plugin.store.rows import REWARD_SCHEMA, SPAN_SCHEMA
from agent_rl_plugin.store.spool import write_segment

HOUR_NS = 3_600 * 10**9
T0 = 1_767_225_600 * 10**9  # 2026-01-01


def rewards(*rows: tuple[str, int | None]) -> pa.Table:
    """Reward rows ``(reward_id, created_unix_nano)`` of REWARD_SCHEMA."""
    return pa.table(
        {
            "reward_id": [r for r, _ in rows],
            "rollout_id": [f"rollout-{r}" for r, _ in rows],
            "step_index": [None] * len(rows),
            "name": ["score"] * len(rows),
            "value": [1.0] * len(rows),
            "label": [None] * len(rows),
            "reason": [None] * len(rows),
            "metrics": [None] * len(rows),
            "source": ["emitted"] * len(rows),
            "created_unix_nano": [t for _, t in rows],
            "trace_id": [f"trace-{r}" for r, _ in rows],
            "span_id": [f"span-{r}" for r, _ in rows],
        },
        schema=REWARD_SCHEMA,
    )


def stored(connection: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in connection.execute("select reward_id from rewards order by reward_id").fetchall()]


def write(connection: duckdb.DuckDBPyConnection, table: pa.Table) -> None:
    insert_batch(connection, SPAN_SCHEMA.empty_table(), table)


def test_a_stored_reward_is_skipped_whatever_else_the_batch_holds(tmp_path: Path) -> None:
    connection = connect_writer(tmp_path / "s.duckdb")
    try:
        write(connection, rewards(("a", T0), ("b", T0 + HOUR_NS)))
        # the same ids again, among new rows hours apart, and one new id twice in the batch
        write(
            connection,
            rewards(
                ("c", T0 - 5 * HOUR_NS),
                ("a", T0),
                ("b", T0 + HOUR_NS),
                ("d", T0 + 9 * HOUR_NS),
                ("d", T0 + 9 * HOUR_NS),
            ),
        )
        assert stored(connection) == ["a", "b", "c", "d"]
        # a batch of duplicates only, narrower than what is stored
        write(connection, rewards(("b", T0 + HOUR_NS)))
        assert stored(connection) == ["a", "b", "c", "d"]
    finally:
        connection.close()


def test_rewards_without_a_time_are_checked_against_every_stored_reward(tmp_path: Path) -> None:
    """An untimed reward is stored with its insert time (not its event's), so its replay cannot
    be found by time: a batch holding one looks at every stored reward, timed rows included."""
    connection = connect_writer(tmp_path / "s.duckdb")
    try:
        write(connection, rewards(("u", None), ("v", None), ("t", T0)))
        write(connection, rewards(("u", None)))  # untimed only
        assert stored(connection) == ["t", "u", "v"]
        write(connection, rewards(("v", None), ("w", T0 + 30 * 24 * HOUR_NS), ("t", T0)))  # mixed
        assert stored(connection) == ["t", "u", "v", "w"]
        assert connection.execute("select count(*) from rewards where created_at > '2026-06-01'").fetchall() == [(2,)]
    finally:
        connection.close()


def test_merged_segments_skip_stored_rewards_timed_or_not(tmp_path: Path) -> None:
    """The merge of spool segments uses the same check (``insert_rewards_sql`` over Parquet)."""
    from agent_rl_plugin.store.rows import SpanConverter

    db = tmp_path / "s.duckdb"
    spans = SpanConverter().convert([]).spans
    write_segment(db, spans, rewards(("a", T0), ("u", None)))
    write_segment(db, spans, rewards(("a", T0), ("u", None), ("b", T0 - HOUR_NS)))
    assert try_merge(db) is not None
    write_segment(db, spans, rewards(("u", None), ("b", T0 - HOUR_NS), ("c", None)))
    assert try_merge(db) is not None
    connection = duckdb.connect(str(db), read_only=True)
    try:
        assert stored(connection) == ["a", "b", "c", "u"]
    finally:
        connection.close()


def _row_groups_read_from_rewards(
    connection: duckdb.DuckDBPyConnection, table: pa.Table, profile: Path
) -> tuple[int, int]:
    """(row groups the duplicate check's scan of ``rewards`` read, row groups it had), from
    DuckDB's JSON profile: storage read, whatever filters the optimizer pushes into the scan
    (DuckDB 2.0.0 also pushes the join's reward ids there, so rows passed on say less)."""
    connection.register(REWARDS_VIEW, table)
    connection.execute("PRAGMA enable_profiling = 'json'")
    connection.execute(f"PRAGMA profiling_output = '{profile}'")
    try:
        connection.execute(f"SELECT count(*) FROM {new_rewards_sql(REWARDS_VIEW)}").fetchall()
    finally:
        connection.execute("PRAGMA disable_profiling")
        connection.unregister(REWARDS_VIEW)
    scans: list[tuple[int, int]] = []

    def walk(node: dict) -> None:
        if node.get("type") == "TABLE_SCAN" and str(node.get("extra_info", {}).get("Table", "")).endswith(".rewards"):
            scans.append((int(node["row_groups_scanned"]), int(node["total_row_groups_to_scan"])))
        for child in node.get("children", []):
            walk(child)

    for operator in json.loads(profile.read_text())["operator"]:
        walk(operator)
    assert len(scans) == 1, scans
    return scans[0]


def test_the_check_of_a_timed_batch_reads_only_rewards_of_its_time_range(tmp_path: Path) -> None:
    """What keeps ingest flat as the store grows: 600,000 stored rewards (several row groups), a
    batch of 10 timed rewards of one minute reads the one row group holding that minute; an
    untimed one reads them all."""
    connection = connect_writer(tmp_path / "s.duckdb")
    try:
        connection.execute(
            "INSERT INTO rewards (reward_id, rollout_id, name, value, source, created_at) "
            "SELECT md5(range::VARCHAR), 'r', 'score', 1.0, 'emitted', "
            "make_timestamp(1767225600000000 + range * 1000000) FROM range(600000)"
        )
        connection.execute("CHECKPOINT")  # row groups on disk, with their min/max
        minute = T0 + 100_000 * 10**9
        # New ids shaped like the stored ones (hex), so min/max of reward_id cannot skip row groups.
        ids = [hashlib.md5(f"new-{i}".encode()).hexdigest() for i in range(10)]
        batch = rewards(*[(ids[i], minute + i * 6 * 10**9) for i in range(10)])
        read, total = _row_groups_read_from_rewards(connection, batch, tmp_path / "timed.json")
        assert total >= 4 and read == 1, (read, total)
        untimed = rewards(*[(ids[i], None) for i in range(10)])
        assert _row_groups_read_from_rewards(connection, untimed, tmp_path / "untimed.json") == (total, total)
    finally:
        connection.close()
