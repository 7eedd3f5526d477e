"""The writer's duplicate check on spans (store/batch.py ``new_spans_sql``) through
``insert_batch``, the path of ``agent-rl serve``'s writer: a span sent twice in one batch (a
retried request the writer took together with the first) is stored once, a span stored before is
not stored again, and a batch without repeated span ids (checked, then written without the
per-batch step that keeps one of each) stores exactly the rows the full check stores, in order."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from agent_rl_plugin.store.batch import INSERT_SPANS_SQL, SPANS_VIEW, insert_batch
from agent_rl_plugin.store.connection import connect_writer
from agent_rl_plugin.store.lease import try_merge
from agent_rl_plugin.store.rows import SPAN_SCHEMA
from agent_rl_plugin.store.spool import write_segment

T0 = 1_767_225_600 * 10**9  # 2026-01-01
COLUMNS = "trace_id, span_id, name, attributes, rollout_id, task_id, start_time, end_time, duration_ms"


def spans(*ids: tuple[str, str]) -> pa.Table:
    """Span rows of SPAN_SCHEMA, one per ``(trace_id, span_id)``, a millisecond apart."""
    n = len(ids)
    columns = {
        "trace_id": [t for t, _ in ids],
        "span_id": [s for _, s in ids],
        "name": [f"step {s}" for _, s in ids],
        "kind": ["INTERNAL"] * n,
        "status_code": ["UNSET"] * n,
        "events": ["[]"] * n,
        "links": ["[]"] * n,
        "attributes": [f'{{"agent_rl.rollout.id": "r-{t}", "agent_rl.task.id": "task-{s}"}}' for t, s in ids],
        "start_unix_nano": [T0 + i * 10**6 for i in range(n)],
        "end_unix_nano": [T0 + i * 10**6 + 500_000 for i in range(n)],
    }
    return pa.table(
        {f.name: columns.get(f.name, [None] * n) for f in SPAN_SCHEMA},
        schema=SPAN_SCHEMA,
    )


def stored(connection, columns: str = "trace_id, span_id") -> list[tuple]:
    return connection.execute(f"select {columns} from spans order by rowid").fetchall()


def test_a_span_twice_in_one_batch_is_stored_once_in_order(tmp_path: Path) -> None:
    connection = connect_writer(tmp_path / "twice.duckdb")
    try:
        batch = spans(("t1", "a"), ("t1", "b"), ("t1", "a"), ("t2", "c"), ("t1", "b"))
        assert insert_batch(connection, batch) == 3
        assert stored(connection) == [("t1", "a"), ("t1", "b"), ("t2", "c")]
        # stored before, sent again among new ones: only the new ones
        assert insert_batch(connection, spans(("t1", "a"), ("t3", "d"))) == 1
        assert stored(connection)[-1] == ("t3", "d") and len(stored(connection)) == 4
    finally:
        connection.close()


def test_a_batch_of_distinct_span_ids_stores_what_the_full_check_stores(tmp_path: Path) -> None:
    batch = spans(*[(f"t{i // 7}", f"s{i:04d}") for i in range(500)])
    fast = connect_writer(tmp_path / "fast.duckdb")
    full = connect_writer(tmp_path / "full.duckdb")
    try:
        assert insert_batch(fast, batch) == 500  # distinct ids: the shorter statement
        full.register(SPANS_VIEW, batch.append_column("_agent_rl_ordinal", pa.array(range(500), pa.int64())))
        full.execute(INSERT_SPANS_SQL, [None])  # the full check, on the same rows
        assert stored(fast, COLUMNS) == stored(full, COLUMNS) and len(stored(fast)) == 500
    finally:
        fast.close()
        full.close()


def test_spool_segments_repeating_a_span_merge_it_once(tmp_path: Path) -> None:
    """The merge path: two segments of one lease hold the same span (an export retried after a
    segment was written), a third repeats one inside itself; each span is stored once, and a
    lease of distinct spans stores them all."""
    db = tmp_path / "spool.duckdb"
    write_segment(db, spans(("t1", "a"), ("t1", "b")))
    write_segment(db, spans(("t1", "b"), ("t2", "c")))
    write_segment(db, spans(("t3", "d"), ("t3", "d")))
    assert try_merge(db) is not None
    write_segment(db, spans(("t4", "e"), ("t4", "f")))
    assert try_merge(db) is not None
    connection = duckdb.connect(str(db), read_only=True)
    try:
        assert sorted(stored(connection)) == [
            ("t1", "a"),
            ("t1", "b"),
            ("t2", "c"),
            ("t3", "d"),
            ("t4", "e"),
            ("t4", "f"),
        ]
    finally:
        connection.close()
