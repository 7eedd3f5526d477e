"""The merger process appends in small row groups (its leases end with a checkpoint that
rewrites the table's last row group: a small one is cheap to rewrite), and a merge of spans that
repeat none and are stored nowhere takes the plain insert, in order; the anti-join still keeps
one of each span that repeats or is stored."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin.store import StoreLockedError
from agent_rl_plugin.store.batch import insert_every_span_sql, repeats_sql
from agent_rl_plugin.store.lease import try_merge
from agent_rl_plugin.store.merger_process import MERGE_ROW_GROUP_SIZE, LeaseLimits, MergerProcess
from agent_rl_plugin.store.opening import ATTACHED_NAME, connect_file, open_write_connection
from agent_rl_plugin.store.spool import list_segments, write_segment
from tests.test_store_span_duplicates import spans

ROWS = 40_000


def row_groups(db: Path) -> list[int]:
    """Rows of each row group of ``spans``, in order."""
    connection = duckdb.connect(str(db), read_only=True)
    try:
        rows = connection.execute(
            "SELECT row_group_id, sum(count) FROM pragma_storage_info('spans') "
            "WHERE column_id = 0 AND segment_type <> 'VALIDITY' GROUP BY 1 ORDER BY 1"
        ).fetchall()
    finally:
        connection.close()
    return [int(count) for _, count in rows]


def stored_ids(db: Path) -> list[str]:
    connection = duckdb.connect(str(db), read_only=True)
    try:
        return [row[0] for row in connection.execute("SELECT span_id FROM spans ORDER BY rowid").fetchall()]
    finally:
        connection.close()


def write_many(db: Path, rows: int = ROWS, per_segment: int = 10_000) -> list[str]:
    ids = [(f"t{i // 20}", f"s{i:06d}") for i in range(rows)]
    for start in range(0, rows, per_segment):
        write_segment(db, spans(*ids[start : start + per_segment]))
    return [span for _, span in ids]


def test_the_merger_process_appends_in_row_groups_of_its_size(tmp_path: Path) -> None:
    db = tmp_path / "child.duckdb"
    expected = write_many(db)
    merger = MergerProcess(str(db))
    try:
        limits = LeaseLimits(max_leases=4, max_segments=64, max_rows=ROWS, merge_threads=1)
        outcome = merger.merge(wait_s=10.0, limits=limits)
    finally:
        merger.close()
    assert outcome is not None and outcome.error is None
    assert not list_segments(db)
    groups = row_groups(db)
    assert sum(groups) == ROWS and max(groups) <= MERGE_ROW_GROUP_SIZE and len(groups) >= 3
    assert stored_ids(db) == expected  # every span once, in the order written


def test_a_merge_in_this_process_keeps_duckdbs_row_groups(tmp_path: Path) -> None:
    """Without a row group size (the agent's own merges, readers' and the CLI's: DuckDB refuses a
    second open of one file in a process, so they cannot attach it), one row group holds them."""
    db = tmp_path / "here.duckdb"
    write_many(db)
    assert try_merge(db, wait_s=1.0) is not None
    assert row_groups(db) == [ROWS]


def test_an_attached_file_is_the_connections_default_database_with_the_schema(tmp_path: Path) -> None:
    db = tmp_path / "attached.duckdb"
    connection, applied = open_write_connection(db, row_group_size=MERGE_ROW_GROUP_SIZE)
    try:
        assert applied  # a new file: migrated through the attached connection
        assert connection.execute("SELECT current_database()").fetchone() == (ATTACHED_NAME,)
        assert connection.execute("SELECT count(*) FROM spans").fetchone() == (0,)
    finally:
        connection.close()
    assert duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM rewards").fetchone() == (0,)


HOLDER = textwrap.dedent(
    """
    import sys, duckdb
    connection = duckdb.connect(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    connection.close()
    """
)


def test_an_attach_of_a_file_another_process_holds_is_a_store_lock_error(tmp_path: Path) -> None:
    db = tmp_path / "held.duckdb"
    open_write_connection(db)[0].close()
    write_segment(db, spans(("t1", "a")))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
        with pytest.raises(StoreLockedError):
            connect_file(str(db), read_only=False, row_group_size=MERGE_ROW_GROUP_SIZE)
        assert try_merge(db, wait_s=0.0, row_group_size=MERGE_ROW_GROUP_SIZE) is None  # busy: waits
        assert len(list_segments(db)) == 1
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
    assert try_merge(db, wait_s=1.0, row_group_size=MERGE_ROW_GROUP_SIZE) is not None
    assert stored_ids(db) == ["a"]


def test_the_repeat_check_finds_a_span_repeated_in_the_batch_or_stored(tmp_path: Path) -> None:
    connection, _ = open_write_connection(tmp_path / "check.duckdb")
    try:
        batch = spans(("t1", "a"), ("t1", "b"))
        connection.register("batch", batch)
        assert connection.execute(repeats_sql("batch")).fetchall() == [(True, False)]
        connection.execute(insert_every_span_sql("batch"), [None])
        assert connection.execute(repeats_sql("batch")).fetchall() == [(True, True)]  # both stored now
        connection.register("twice", spans(("t2", "c"), ("t2", "c")))
        assert connection.execute(repeats_sql("twice")).fetchall() == [(False, False)]
    finally:
        connection.close()


def test_a_check_that_fails_falls_back_to_the_anti_join(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where DuckDB cannot run the check (no memory for it), the batch takes the anti-join, as
    before the check existed: a span stored before is still not stored again."""
    from agent_rl_plugin.store import batch as batch_module

    connection, _ = open_write_connection(tmp_path / "fallback.duckdb")
    try:
        assert batch_module.insert_batch(connection, spans(("t1", "a"))) == 1
        monkeypatch.setattr(batch_module, "repeats_sql", lambda source: "SELECT * FROM no_such_table")
        assert batch_module.insert_batch(connection, spans(("t1", "a"), ("t1", "b"))) == 1
        assert [row[0] for row in connection.execute("SELECT span_id FROM spans ORDER BY rowid").fetchall()] == [
            "a",
            "b",
        ]
    finally:
        connection.close()
