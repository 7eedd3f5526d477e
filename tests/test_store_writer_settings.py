"""The writer's DuckDB settings around readers it serves (``agent-rl serve``, an in-process
``open_reader``): a reader cursor gets DuckDB's defaults, and the writer's small memory limit and
single thread come back at its first write after the last reader cursor is gone, never while
one is alive (the settings belong to the whole DuckDB instance, so a reader's running query
would be capped)."""

from __future__ import annotations

import gc
from pathlib import Path

import duckdb

from agent_rl_plugin.store.writer import ExportStats, StoreWriter
from tests.test_store_spool import recorded


def settings_of(db: Path) -> dict[str, str]:
    """The instance's settings, seen through a plain connection of this process (it joins the
    writer's DuckDB instance and is no reader cursor of the writer's)."""
    with duckdb.connect(str(db)) as view:
        rows = view.execute("select name, value from duckdb_settings() where name in ('threads', 'memory_limit')")
        return dict(rows.fetchall())


def limited(db: Path) -> bool:
    settings = settings_of(db)
    return settings["threads"] == "1" and settings["memory_limit"] == "244.1 MiB"  # SET memory_limit = '256MB'


def write(writer: StoreWriter, rollout: str) -> None:
    assert writer.submit(recorded(3, rollout=rollout))
    assert writer.flush(30.0)


def test_the_writer_limits_come_back_after_the_last_reader_cursor_is_gone(tmp_path):
    db = tmp_path / "runs.duckdb"
    problems: list[BaseException] = []
    writer = StoreWriter(str(db), stats=ExportStats(), report=lambda kind, exc: problems.append(exc), linger_s=0.0)
    try:
        write(writer, "r1")
        assert limited(db)  # only the writer: small

        first = writer.reader_cursor(30.0)
        second = writer.reader_cursor(30.0)
        assert not limited(db)  # readers get DuckDB's defaults
        write(writer, "r2")
        assert not limited(db)  # two readers alive: the writer leaves them

        first.close()
        del first
        gc.collect()
        write(writer, "r3")
        assert not limited(db)  # one reader still alive
        assert second.execute("select count(*) from spans").fetchone() == (9,)

        del second
        gc.collect()
        assert not limited(db)  # set again by the writer's next write, not by the garbage collector
        write(writer, "r4")
        assert limited(db)

        third = writer.reader_cursor(30.0)  # and again for the next reader
        assert not limited(db)
        del third
    finally:
        writer.close()
    assert problems == [] and writer.stats.snapshot()["spans_written"] == 12


def test_a_reader_cursor_inherited_by_a_forked_child_is_not_counted_there(tmp_path):
    db = tmp_path / "runs.duckdb"
    writer = StoreWriter(str(db), stats=ExportStats(), report=lambda kind, exc: None, linger_s=0.0)
    try:
        write(writer, "r1")
        cursor = writer.reader_cursor(30.0)
        parent = writer._pid  # noqa: SLF001
        writer._pid = parent + 1  # noqa: SLF001 - what _reset() records in a forked child
        writer._readers = 0  # noqa: SLF001 - and the child's own count
        writer._reader_gone(parent)  # noqa: SLF001 - the parent's cursor collected in the child
        assert writer._readers == 0  # noqa: SLF001 - never below zero: the child's readers stay counted
        writer._pid, writer._readers = parent, 1  # noqa: SLF001
        del cursor
        gc.collect()
        assert writer._readers == 0  # noqa: SLF001 - the parent's own cursor is counted down
    finally:
        writer.close()


def test_a_batch_duckdb_has_no_memory_for_grows_the_limit_and_loses_nothing(tmp_path, monkeypatch):
    """``agent-rl serve`` under load merges up to 50,000 spans into one INSERT; where DuckDB's
    memory limit is too small for a batch (or for the indexes, which grow with the table), the
    writer's limit grows and the batch is tried again, then written in halves (such batches were
    once dropped: a quarter of the spans of a receiver taking ~20k spans/s). At 16 MB the
    40,000-row batch of this test fits the insert itself and finds no memory at its commit
    (DuckDB's ``TransactionException`` "Failed to commit: could not allocate block"), which
    counts as no memory too."""
    from agent_rl_plugin.store import writer as writer_module

    monkeypatch.setattr(writer_module, "WRITER_SETTINGS", (("memory_limit", "'16MB'"), ("threads", "1")))
    db = tmp_path / "runs.duckdb"
    problems: list[BaseException] = []
    stats = ExportStats()
    writer = StoreWriter(str(db), stats=stats, report=lambda kind, exc: problems.append(exc), linger_s=0.0)
    try:
        assert writer.submit(recorded(40_000, rollout="big"))
        assert writer.flush(120.0)
        assert settings_of(db)["memory_limit"] == "61.0 MiB"  # it grew from SET memory_limit = '16MB' to 64 MB
        assert writer.submit(recorded(3, rollout="after"))
        assert writer.flush(30.0)
    finally:
        writer.close()
    counts = stats.snapshot()
    assert counts["spans_written"] == 40_003 and counts["spans_dropped"] == 0, counts
    assert problems == []
    with duckdb.connect(str(db), read_only=True) as view:
        assert view.execute("select count(distinct span_id) from spans").fetchone() == (40_003,)
