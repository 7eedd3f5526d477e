"""A database held by another process: a bounded wait, then a clear StoreLockedError; an agent
that records meanwhile loses nothing and never waits."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export import SpanExportResult

from agent_rl_plugin.store import DuckDBSpanExporter, StoreLockedError, connect_writer, open_reader
from agent_rl_plugin.store.spool import list_segments

HOLDER = textwrap.dedent(
    """
    import sys, time, duckdb
    connection = duckdb.connect(sys.argv[1])
    connection.execute("create table if not exists held (a integer)")
    print("ready", flush=True)
    sys.stdin.readline()  # hold the lock until the test closes our stdin
    connection.close()
    """
)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen]]:
    """A file another process has open for writing (its PID is ``process.pid``)."""
    path = tmp_path / "held.duckdb"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        yield path, process
    finally:
        if process.poll() is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def release(process: subprocess.Popen) -> None:
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=20)


def test_writer_and_reader_wait_then_get_a_clear_error_naming_pid_and_fix(held):
    path, process = held
    for open_it in (connect_writer, open_reader):
        started = time.monotonic()
        with pytest.raises(StoreLockedError) as info:
            open_it(path, wait_s=0.5)
        waited = time.monotonic() - started
        assert 0.5 <= waited < 5  # a bounded wait, then the error
        error = info.value
        message = str(error)
        assert str(path) in message
        assert f"PID {process.pid}" in message and error.pid == process.pid
        assert "another process" in message and "waited" in message
        assert "close its connection" in message


def test_a_lock_message_says_what_our_holder_is_doing(tmp_path):
    path = tmp_path / "busy.duckdb"
    holder = textwrap.dedent(
        """
        import sys
        from agent_rl_plugin.store import connect_writer
        connection = connect_writer(sys.argv[1], what="agent-rl score")
        print("ready", flush=True)
        sys.stdin.readline()
        connection.close()
        """
    )
    process = subprocess.Popen([sys.executable, "-c", holder, str(path)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError) as info:
            open_reader(path, wait_s=0.2)
        assert "busy with agent-rl score, for" in str(info.value) and info.value.doing.startswith("agent-rl score")
    finally:
        release(process)


def test_exporter_on_a_locked_file_loses_nothing_and_the_agent_never_waits(held, caplog):
    path, process = held
    exporter = DuckDBSpanExporter(path, normalizers=[])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")

    def agent_step(i: int) -> int:  # the agent's own work must go on regardless
        with tracer.start_as_current_span(f"step {i}"):
            return i * 2

    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin.store"):
        started = time.monotonic()
        assert [agent_step(i) for i in range(4)] == [0, 2, 4, 6]
        assert time.monotonic() - started < 1.0  # the agent did not wait for the lock
        assert exporter.force_flush(10_000)  # durable in the spool; the merge waits for the holder
    stats = exporter.stats
    assert stats["spans_received"] == 4 and stats["spans_written"] == 4 and stats["spans_dropped"] == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # nothing to report: nothing lost
    assert list_segments(path)  # waiting beside the database

    direct = exporter.export([])  # an empty export is fine
    assert direct in (SpanExportResult.SUCCESS, SpanExportResult.FAILURE)

    release(process)
    assert agent_step(4) == 8
    assert exporter.force_flush(10_000)
    provider.shutdown()
    reader = open_reader(path)
    try:
        assert reader.execute("select name from spans order by name").fetchall() == [(f"step {i}",) for i in range(5)]
    finally:
        reader.close()
    assert not list_segments(path)  # merged, and the files removed


def test_readers_and_user_queries_wait_out_a_short_write_lease(tmp_path):
    """A merge or a scorer holds the file for a moment: a query started meanwhile waits for it
    (within the bounded wait) instead of failing."""
    from agent_rl_plugin.store.user_sql import run_user_query

    path = tmp_path / "brief.duckdb"
    connect_writer(path).close()
    holder = textwrap.dedent(
        """
        import sys, time
        from agent_rl_plugin.store import connect_writer
        connection = connect_writer(sys.argv[1], what="a short lease")
        print("ready", flush=True)
        time.sleep(1.0)
        connection.close()
        """
    )
    for read in (lambda: open_reader(path).close(), lambda: run_user_query(path, "select count(*) from spans")):
        process = subprocess.Popen([sys.executable, "-c", holder, str(path)], stdout=subprocess.PIPE, text=True)
        try:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
            started = time.monotonic()
            read()
            assert 0.3 < time.monotonic() - started < 5.0
        finally:
            process.wait(timeout=20)
