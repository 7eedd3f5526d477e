"""A database held by another process: a clear StoreLockedError, and an agent that keeps running."""

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


def test_writer_and_reader_get_a_clear_error_naming_pid_and_fix(held):
    path, process = held
    for open_it in (connect_writer, open_reader):
        with pytest.raises(StoreLockedError) as info:
            open_it(path)
        error = info.value
        message = str(error)
        assert str(path) in message
        assert f"PID {process.pid}" in message and error.pid == process.pid
        assert "another process" in message
        assert f"agent-rl serve --db {path}" in message
        assert "otlp_endpoint" in message and "another --db path" in message


def test_exporter_on_a_locked_file_drops_counts_logs_once_and_recovers(held, caplog):
    path, process = held
    exporter = DuckDBSpanExporter(path, normalizers=[], reopen_interval_s=0.2)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")

    def agent_step(i: int) -> int:  # the agent's own work must go on regardless
        with tracer.start_as_current_span(f"step {i}"):
            return i * 2

    with caplog.at_level(logging.DEBUG, logger="agent_rl_plugin.store"):
        assert [agent_step(i) for i in range(3)] == [0, 2, 4]
        assert exporter.force_flush(10_000)
        assert agent_step(3) == 6  # refused at once while the open failure is fresh
        assert exporter.force_flush(10_000)
    stats = exporter.stats
    assert stats["spans_received"] == 4 and stats["spans_written"] == 0 and stats["spans_dropped"] == 4
    assert f"PID {process.pid}" in stats["last_error"]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]  # logged once, not per span
    text = errors[0].getMessage()
    assert str(path) in text and "locked" in text and "agent-rl serve" in text and "keeps running" in text

    direct = exporter.export([])  # an empty export is fine
    assert direct in (SpanExportResult.SUCCESS, SpanExportResult.FAILURE)

    release(process)
    time.sleep(0.3)  # past reopen_interval_s
    assert agent_step(4) == 8
    assert exporter.force_flush(10_000)
    provider.shutdown()
    assert exporter.stats["spans_written"] == 1
    reader = open_reader(path)
    try:
        assert reader.execute("select name from spans").fetchall() == [("step 4",)]
    finally:
        reader.close()
    assert os.path.exists(path)
