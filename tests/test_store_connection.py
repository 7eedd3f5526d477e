"""Opening store files: readers, writers, clear errors, and the read-only SQL check."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agent_rl_plugin.store import (
    DuckDBSpanExporter,
    StoreError,
    connect_writer,
    ensure_schema,
    is_read_only_sql,
    list_migrations,
    open_reader,
)
from agent_rl_plugin.store.connection import live_writer


def test_open_reader_on_a_missing_file_names_the_fix(tmp_path: Path):
    path = tmp_path / "nothing.duckdb"
    with pytest.raises(StoreError) as info:
        open_reader(path)
    message = str(info.value)
    assert f"no database at {path}" in message
    assert "agent-rl demo" in message
    assert not path.exists()  # reading never creates a file


def test_open_reader_on_a_file_that_is_not_duckdb(tmp_path: Path):
    path = tmp_path / "notes.duckdb"
    path.write_text("not a database")
    with pytest.raises(StoreError, match="cannot open .*notes.duckdb"):
        open_reader(path)


def test_reader_is_read_only(tmp_path: Path):
    path = tmp_path / "ro.duckdb"
    assert ensure_schema(path) == list_migrations()
    connection = open_reader(path)
    try:
        assert connection.execute("select count(*) from spans").fetchone() == (0,)
        with pytest.raises(duckdb.Error, match="read-only"):
            connection.execute("create table t (a integer)")
    finally:
        connection.close()


def test_connect_writer_creates_folders_and_migrates(tmp_path: Path):
    path = tmp_path / "deep" / "er" / "w.duckdb"
    connection = connect_writer(path)
    try:
        assert {r[0] for r in connection.execute("select name from _agent_rl_migrations").fetchall()} == set(
            list_migrations()
        )
    finally:
        connection.close()
    assert ensure_schema(path) == []


def test_reader_upgrades_an_older_schema(tmp_path: Path):
    from agent_rl_plugin.store import MIGRATIONS, migrate

    path = tmp_path / "old.duckdb"
    connection = duckdb.connect(str(path))
    migrate(connection, MIGRATIONS[:2])  # no views yet
    connection.close()
    reader = open_reader(path)
    try:
        assert reader.execute("select count(*) from rollouts").fetchone() == (0,)
    finally:
        reader.close()


def test_reader_in_the_recording_process_goes_through_the_exporter(tmp_path: Path):
    path = tmp_path / "live.duckdb"
    exporter = DuckDBSpanExporter(path, normalizers=[])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        assert live_writer(path) is not None
        provider.get_tracer("t").start_span("one").end()
        # No flush by the caller: the reader waits until the span is committed.
        reader = open_reader(path)
        try:
            assert reader.execute("select name from spans").fetchall() == [("one",)]
        finally:
            reader.close()
        writer = connect_writer(path)  # same: a cursor of the exporter's connection
        try:
            assert writer.execute("select count(*) from spans").fetchone() == (1,)
        finally:
            writer.close()
        provider.get_tracer("t").start_span("two").end()  # the exporter still works after
        assert exporter.force_flush()
        assert exporter.stats["spans_written"] == 2
    finally:
        provider.shutdown()
    assert live_writer(path) is None
    reader = open_reader(path)  # now a plain read-only connection
    try:
        assert reader.execute("select count(*) from spans").fetchone() == (2,)
    finally:
        reader.close()


@pytest.mark.parametrize(
    "sql",
    [
        "select 1",
        "SELECT * FROM rollouts WHERE status = 'error'",
        "with x as (select 1 as a) select * from x",
        "from spans",
        "values (1), (2)",
        "describe spans",
        "show tables",
        "summarize spans",
        "explain select * from spans",
        "explain analyze select 1",
        "pragma table_info('spans')",
        "PRAGMA show_tables",
        "select 1; select 2",
        "-- a comment\nselect 1",
        "select 'drop table spans' as text",
    ],
)
def test_read_only_sql_is_accepted(sql: str):
    assert is_read_only_sql(sql) is True


@pytest.mark.parametrize(
    "sql",
    [
        "insert into spans (trace_id) values ('x')",
        "update rewards set value = 1",
        "delete from spans",
        "create table t (a integer)",
        "create view v as select 1",
        "drop table spans",
        "alter table spans add column x integer",
        "attach 'other.duckdb' as other",
        "detach other",
        "copy spans to 'out.csv'",
        "copy (select 1) to 'out.parquet'",
        "export database 'dump'",
        "set threads = 1",
        "pragma threads = 1",
        "pragma enable_profiling",
        "install httpfs",
        "load httpfs",
        "call pragma_version()",
        "checkpoint",
        "vacuum",
        "begin transaction",
        "use memory",
        "select 1; drop table spans",
        "explain analyze delete from spans",
        "",
        "   ",
    ],
)
def test_writing_sql_is_refused(sql: str):
    assert is_read_only_sql(sql) is False


def test_sql_that_does_not_parse_raises_a_duckdb_error():
    with pytest.raises(duckdb.Error):
        is_read_only_sql("selec 1 frm")
