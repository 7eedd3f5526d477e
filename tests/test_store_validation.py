"""Spans are checked on their way into the store, whoever sent them: invalid ids are refused,
a negative duration is impossible, and one span cannot fill a cell with megabytes of attributes.

The in-process exporter and ``agent-rl serve`` share the converter these tests drive."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.store.validation import DROPPED_ATTRIBUTES, END_BEFORE_START


def span(trace_id: int = 0xABC, span_id: int = 0x123, start: int = 1_000_000, end: int = 2_000_000,
         attributes: dict | None = None, name: str = "s") -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)),
        attributes=attributes or {}, resource=Resource.create({}), start_time=start, end_time=end,
    )


def record(tmp_path: Path, spans: list[ReadableSpan], **options) -> tuple[list[tuple], dict]:
    exporter = DuckDBSpanExporter(tmp_path / "v.duckdb", normalizers=[], **options)
    exporter.export(spans)
    exporter.shutdown()
    connection = duckdb.connect(str(tmp_path / "v.duckdb"), read_only=True)
    try:
        rows = connection.execute(
            "select name, duration_ms, attributes, length(attributes) from spans order by name").fetchall()
    finally:
        connection.close()
    return rows, exporter.stats


def test_all_zero_ids_are_refused_and_counted(tmp_path, caplog):
    rows, stats = record(tmp_path, [span(trace_id=0, name="no trace"), span(span_id=0, name="no span"),
                                    span(name="fine")])
    assert [r[0] for r in rows] == ["fine"]
    assert stats["spans_invalid"] == 2 and stats["spans_dropped"] == 2
    assert "all-zero" in stats["last_error"]


def test_an_end_before_the_start_is_stored_as_zero_duration_and_noted(tmp_path):
    rows, _ = record(tmp_path, [span(start=5_000_000, end=2_000_000, name="skewed")])
    ((name, duration, attributes, _),) = rows
    assert duration == 0.0
    assert json.loads(attributes)[END_BEFORE_START] == 3_000_000


def test_a_span_with_a_million_attributes_is_capped_keeping_ours(tmp_path):
    many = {f"k{i}": "v" * 10 for i in range(1_000_000)}
    many[sc.ROLLOUT_ID] = "r-keep"
    rows, stats = record(tmp_path, [span(attributes=many, name="huge")], max_span_attributes_size=100_000)
    ((_, _, attributes, size),) = rows
    assert size <= 100_000
    kept = json.loads(attributes)
    assert kept[sc.ROLLOUT_ID] == "r-keep"  # the store's own keys first
    assert kept[DROPPED_ATTRIBUTES] == len(many) - (len(kept) - 1)
    assert stats["spans_truncated"] == 1 and stats["spans_dropped"] == 0
    connection = duckdb.connect(str(tmp_path / "v.duckdb"), read_only=True)
    try:
        assert connection.execute("select rollout_id from spans").fetchone()[0] == "r-keep"
    finally:
        connection.close()
