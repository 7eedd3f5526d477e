"""DuckDBSpanExporter: bulk writes, flush semantics, bad values and rows, failures that never raise."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.serialize import truncate
from agent_rl_plugin.store import DuckDBSpanExporter, open_reader
from agent_rl_plugin.store import rows as rows_module
from agent_rl_plugin.store import spool_writer as spool_writer_module


class Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def finished_spans(n: int, attributes: dict[str, Any] | None = None, **named: Any) -> list[ReadableSpan]:
    """``n`` finished SDK spans (not exported anywhere yet)."""
    provider = TracerProvider()
    collect = Collect()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("test")
    for i in range(n):
        attrs = {sc.ROLLOUT_ID: f"r{i // 10}", "i": i, **(attributes or {})}
        with tracer.start_as_current_span(named.get("name", f"span {i}"), attributes=attrs):
            pass
    return collect.spans


def read(path: Path, sql: str) -> list[tuple]:
    connection = duckdb.connect(str(path), read_only=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


@pytest.fixture
def exporter(tmp_path: Path):
    exporters: list[DuckDBSpanExporter] = []

    def make(**options: Any) -> DuckDBSpanExporter:
        options.setdefault("normalizers", [])
        made = DuckDBSpanExporter(tmp_path / "spans.duckdb", **options)
        exporters.append(made)
        return made

    yield make
    for made in exporters:
        made.shutdown()


def test_ten_thousand_spans_land_in_few_batches(exporter, tmp_path: Path):
    spans = finished_spans(10_000)
    exp = exporter()
    for start in range(0, len(spans), 500):
        assert exp.export(spans[start : start + 500]) is SpanExportResult.SUCCESS
    assert exp.force_flush(60_000)
    stats = exp.stats
    assert stats["spans_received"] == stats["spans_written"] == 10_000
    assert stats["spans_dropped"] == 0 and stats["pending"] == 0
    assert 1 <= stats["batches_written"] <= 20  # one INSERT per merged batch, not per span
    exp.shutdown()
    path = tmp_path / "spans.duckdb"
    assert read(path, "select count(*), count(distinct span_id), count(distinct rollout_id) from spans") == [
        (10_000, 10_000, 1_000)
    ]
    assert read(
        path, "select min(json_extract(attributes, '$.i')::int), max(json_extract(attributes, '$.i')::int) from spans"
    ) == [(0, 9_999)]


def test_force_flush_waits_for_the_commit(exporter, tmp_path: Path, monkeypatch):
    real_write = spool_writer_module.write_segment
    gate = threading.Event()

    def slow_write(*args: Any, **kwargs: Any) -> Any:
        gate.wait(10)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(spool_writer_module, "write_segment", slow_write)
    exp = exporter()
    assert exp.force_flush(100)  # nothing exported yet: immediately true
    assert not (tmp_path / "spans.duckdb").exists()  # and no file is made for nothing
    assert exp.export(finished_spans(5)) is SpanExportResult.SUCCESS
    assert exp.force_flush(100) is False  # the insert is held up: timeout
    assert exp.stats["pending"] == 5
    gate.set()
    assert exp.force_flush(10_000) is True
    assert exp.stats["spans_written"] == 5 and exp.stats["pending"] == 0
    reader = open_reader(tmp_path / "spans.duckdb")  # after the live exporter's flush
    try:
        assert reader.execute("select count(*) from spans").fetchone() == (5,)
    finally:
        reader.close()


def test_shutdown_flushes_closes_and_refuses_later_spans(exporter, tmp_path: Path):
    exp = exporter()
    exp.export(finished_spans(3))
    exp.shutdown()
    exp.shutdown()  # idempotent
    assert read(tmp_path / "spans.duckdb", "select count(*) from spans") == [(3,)]  # file released
    assert exp.export(finished_spans(2)) is SpanExportResult.FAILURE
    assert exp.stats["spans_dropped"] == 2
    assert exp.force_flush(100)
    assert not any(
        t.name.startswith("agent-rl-writer") and t.is_alive() for t in threading.enumerate() if str(tmp_path) in t.name
    )


def test_unserialisable_nan_and_bytes_values_are_stored_safely(exporter, tmp_path: Path):
    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque thing>"

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    def transform(attrs: dict[str, Any], span_name: str) -> dict[str, Any]:
        attrs = dict(attrs)
        attrs.update(
            obj=Opaque(),
            broken=Broken(),
            nan=math.nan,
            inf=-math.inf,
            raw=b"\xff\xfe",
            text=b"ok",
            nested={"s": {1, 2}},
        )
        return attrs

    exp = exporter()
    exp.set_attribute_transform(transform)
    assert exp.export(finished_spans(1)) is SpanExportResult.SUCCESS
    exp.shutdown()
    (attributes,) = read(tmp_path / "spans.duckdb", "select attributes from spans")[0]
    stored = json.loads(attributes)
    assert stored["obj"] == "<Opaque thing>"
    assert stored["broken"] == "<unreprable Broken>"
    assert stored["nan"] == "nan" and stored["inf"] == "-inf"
    assert stored["raw"] == "<2 bytes>" and stored["text"] == "ok"
    assert sorted(stored["nested"]["s"]) == [1, 2]


def test_oversize_values_are_cut_with_a_marker_once(exporter, tmp_path: Path):
    already_cut = truncate("y" * 500, 100)
    spans = finished_spans(1, {"big": "x" * 5000, "cut": already_cut, "many": ("z" * 300, "short"), "small": "fine"})
    provider = TracerProvider()
    collect = Collect()
    provider.add_span_processor(collect)
    with provider.get_tracer("t").start_as_current_span("with event") as span:
        span.add_event("note", {"text": "e" * 5000})
    exp = exporter(max_attribute_size=100)
    exp.export(spans + collect.spans)
    exp.shutdown()
    (attributes,) = read(tmp_path / "spans.duckdb", "select attributes from spans where name = 'span 0'")[0]
    attrs = json.loads(attributes)
    assert attrs["big"] == "x" * 100 + "...[truncated 5000 bytes]"
    assert attrs["cut"] == already_cut  # not cut again: its original size stays known
    assert attrs["many"] == ["z" * 100 + "...[truncated 300 bytes]", "short"]
    assert attrs["small"] == "fine"
    (events,) = read(tmp_path / "spans.duckdb", "select events from spans where name = 'with event'")[0]
    assert json.loads(events)[0]["attributes"]["text"] == "e" * 100 + "...[truncated 5000 bytes]"


def test_a_span_that_cannot_be_converted_loses_only_itself(exporter, tmp_path: Path, caplog):
    good = finished_spans(4)
    broken = ReadableSpan(name="no context", context=None)
    exp = exporter()
    assert exp.export([good[0], good[1], broken, good[2], good[3]]) is SpanExportResult.FAILURE
    assert exp.force_flush()
    assert exp.stats["spans_written"] == 4 and exp.stats["spans_dropped"] == 1
    exp.shutdown()
    assert read(tmp_path / "spans.duckdb", "select count(*) from spans") == [(4,)]


def test_a_row_the_database_rejects_does_not_lose_the_batch(exporter, tmp_path: Path, monkeypatch, caplog):
    real = rows_module.c_iterencode  # the encoder of span attributes (SpanConverter._encode_attributes)
    assert real is not None

    def sometimes_invalid(value: Any, indent: int) -> Any:
        return ["{not json"] if isinstance(value, dict) and value.get("bad") else real(value, indent)

    monkeypatch.setattr(rows_module, "c_iterencode", sometimes_invalid)
    spans = finished_spans(40)
    bad = finished_spans(1, {"bad": True}, name="the bad one")
    provider = TracerProvider()
    collect = Collect()
    provider.add_span_processor(collect)
    with provider.get_tracer("t").start_as_current_span("rewarded") as span:
        span.add_event(
            sc.EVENT_EVALUATION_RESULT, {sc.GEN_AI_EVALUATION_NAME: "r", sc.GEN_AI_EVALUATION_SCORE_VALUE: 1.0}
        )
    exp = exporter()
    exp.export(spans[:20] + bad + collect.spans + spans[20:])
    assert exp.force_flush(30_000)
    stats = exp.stats
    assert (stats["spans_written"], stats["spans_dropped"], stats["batches_failed"]) == (41, 1, 1)
    assert stats["rewards_written"] == 1
    assert "JSON" in stats["last_error"] or "json" in stats["last_error"]
    exp.shutdown()
    assert read(
        tmp_path / "spans.duckdb", "select count(*), count(*) filter (where name = 'the bad one') from spans"
    ) == [(41, 0)]
    assert read(tmp_path / "spans.duckdb", "select name, value from rewards") == [("r", 1.0)]


def test_failures_never_raise_out_of_the_exporter(tmp_path: Path, caplog):
    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("x")
    exp = DuckDBSpanExporter(not_a_folder / "db.duckdb", normalizers=[], reopen_interval_s=60)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    with provider.get_tracer("t").start_as_current_span("still runs"):
        value = 42
    assert value == 42
    assert exp.force_flush(10_000)
    assert exp.export(finished_spans(2)) is SpanExportResult.FAILURE  # refused at once now
    stats = exp.stats
    assert stats["spans_written"] == 0 and stats["spans_dropped"] == 3
    assert "cannot create the folder" in stats["last_error"]
    assert any("cannot create the folder" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    provider.shutdown()


def test_a_full_queue_drops_instead_of_blocking(exporter, monkeypatch):
    gate = threading.Event()
    real_write = spool_writer_module.write_segment
    monkeypatch.setattr(spool_writer_module, "write_segment", lambda *a, **k: (gate.wait(10), real_write(*a, **k)))
    exp = exporter(max_pending_spans=10)
    assert exp.export(finished_spans(8)) is SpanExportResult.SUCCESS
    started = time.perf_counter()
    assert exp.export(finished_spans(8)) is SpanExportResult.FAILURE  # 16 > 10: dropped, not waited
    assert time.perf_counter() - started < 1.0
    gate.set()
    assert exp.force_flush(10_000)
    assert (exp.stats["spans_written"], exp.stats["spans_dropped"]) == (8, 8)
    assert "limit 10" in exp.stats["last_error"]


def test_transform_applies_to_span_and_event_attributes(plugin_manager, exporter, tmp_path: Path):
    from agent_rl_plugin.transform import with_attribute_transform

    exp = exporter()
    secret = "sk-" + "a" * 30
    assert with_attribute_transform(exp, RLConfig(db_path=None)) is exp  # we take the transform directly
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    with provider.get_tracer("t").start_as_current_span("secretive", attributes={"prompt": f"key {secret}"}) as span:
        span.add_event("note", {"text": f"again {secret}"})
    exp.shutdown()
    attributes, events = read(tmp_path / "spans.duckdb", "select attributes, events from spans")[0]
    assert secret not in attributes and "[REDACTED]" in attributes
    assert secret not in events and "[REDACTED]" in events


def test_normalizers_come_from_the_plugin_manager_once(plugin_manager, tmp_path: Path):
    calls = []

    class Counting:
        from agent_rl_plugin.hookspecs import hookimpl

        @hookimpl
        def agent_rl_register_normalizers(self, register):
            calls.append(1)
            register("counting", lambda attrs, name: attrs.setdefault("normalised_by", name))

    plugin_manager.register(Counting(), name="counting")
    exp = DuckDBSpanExporter(tmp_path / "n.duckdb", plugin_manager=plugin_manager)
    exp.export(finished_spans(2, {sc.GEN_AI_SYSTEM: "openai"}, name="chat x"))
    exp.export(finished_spans(1, name="chat y"))
    exp.shutdown()
    assert calls == [1]
    stored = [json.loads(a) for (a,) in read(tmp_path / "n.duckdb", "select attributes from spans order by name")]
    assert [a["normalised_by"] for a in stored] == ["chat x", "chat x", "chat y"]
    assert stored[0][sc.GEN_AI_PROVIDER_NAME] == "openai"  # the built-in genai normaliser ran too


def test_a_failing_normalizer_is_skipped_and_the_span_kept(tmp_path: Path, caplog):
    def broken(attrs: dict[str, Any], name: str) -> None:
        raise RuntimeError("normaliser bug")

    exp = DuckDBSpanExporter(tmp_path / "b.duckdb", normalizers={"broken": broken})
    assert exp.export(finished_spans(3)) is SpanExportResult.SUCCESS
    exp.shutdown()
    assert exp.stats["spans_written"] == 3
    assert len([r for r in caplog.records if "normaliser bug" in r.getMessage()]) == 1  # once, not per span
    assert read(tmp_path / "b.duckdb", "select count(*) from spans") == [(3,)]


def test_reward_event_values_are_coerced(exporter, tmp_path: Path):
    provider = TracerProvider()
    collect = Collect()
    provider.add_span_processor(collect)
    with provider.get_tracer("t").start_as_current_span("r", attributes={sc.ROLLOUT_ID: "ro"}) as span:
        span.add_event(
            sc.EVENT_EVALUATION_RESULT,
            {sc.GEN_AI_EVALUATION_NAME: "as_text", sc.GEN_AI_EVALUATION_SCORE_VALUE: "0.75", sc.STEP_INDEX: "2"},
        )
        span.add_event(
            sc.EVENT_EVALUATION_RESULT,
            {
                sc.GEN_AI_EVALUATION_NAME: "label_only",
                sc.GEN_AI_EVALUATION_SCORE_LABEL: "pass",
                sc.REWARD_METADATA: "not json",
            },
        )
        span.add_event(
            sc.EVENT_EVALUATION_RESULT,
            {sc.GEN_AI_EVALUATION_NAME: "human", sc.GEN_AI_EVALUATION_SCORE_VALUE: True, sc.REWARD_SOURCE: "human"},
        )
    exp = exporter()
    exp.export(collect.spans)
    exp.export(collect.spans)  # the same span again: same reward ids, so stored once
    exp.shutdown()
    rewards = read(
        tmp_path / "spans.duckdb",
        "select name, value, label, step_index, metrics, source, rollout_id, reward_id from rewards order by created_at, name",
    )
    assert [r[:7] for r in rewards] == [
        ("as_text", 0.75, None, 2, None, "emitted", "ro"),
        ("label_only", None, "pass", None, '"not json"', "emitted", "ro"),
        ("human", 1.0, None, None, None, "human", "ro"),
    ]
    assert read(tmp_path / "spans.duckdb", "select count(*) from spans") == [(1,)]


def test_plugin_registers_the_exporter_only_with_a_db_path(plugin_manager, tmp_path: Path):
    found: dict[str, Any] = {}
    plugin_manager.hook.agent_rl_register_exporters(
        register=found.__setitem__, config=RLConfig(db_path=str(tmp_path / "p.duckdb"), max_attribute_size=128)
    )
    exp = found.get("duckdb")
    assert isinstance(exp, DuckDBSpanExporter) and exp.path == str(tmp_path / "p.duckdb")
    exp.shutdown()
    found.clear()
    plugin_manager.hook.agent_rl_register_exporters(register=found.__setitem__, config=RLConfig(db_path=None))
    assert "duckdb" not in found


def test_lone_surrogates_are_replaced_not_fatal(exporter, tmp_path: Path):
    name = "open /tmp/caf\udce9.txt"  # what os.fsdecode makes of a Latin-1 file name
    provider = TracerProvider()
    collect = Collect()
    provider.add_span_processor(collect)
    with provider.get_tracer("t").start_as_current_span(name, attributes={"path": name}) as span:
        span.add_event(
            sc.EVENT_EVALUATION_RESULT,
            {
                sc.GEN_AI_EVALUATION_NAME: "r",
                sc.GEN_AI_EVALUATION_SCORE_VALUE: 1.0,
                sc.GEN_AI_EVALUATION_EXPLANATION: name,
            },
        )
    exp = exporter()
    exp.export(finished_spans(2) + collect.spans)
    exp.shutdown()
    assert exp.stats["spans_written"] == 3 and exp.stats["spans_dropped"] == 0
    (stored_name, attributes) = read(
        tmp_path / "spans.duckdb", "select name, attributes from spans where name like 'open%'"
    )[0]
    assert stored_name == "open /tmp/caf\ufffd.txt"
    assert json.loads(attributes)["path"] == "open /tmp/caf\ufffd.txt"
    assert read(tmp_path / "spans.duckdb", "select reason from rewards") == [("open /tmp/caf\ufffd.txt",)]


def test_bisecting_gives_up_when_most_rows_are_bad(tmp_path: Path):
    from agent_rl_plugin.store.batch import insert_bisecting
    from agent_rl_plugin.store.connection import open_write_connection
    from agent_rl_plugin.store.rows import SpanConverter

    table = SpanConverter().convert(finished_spans(64)).spans
    broken = table.set_column(table.schema.get_field_index("attributes"), "attributes", pa.array(["{bad"] * 64))
    connection, _ = open_write_connection(tmp_path / "b.duckdb")
    try:
        outcome = insert_bisecting(connection, broken, max_inserts=10)
        assert (outcome.written, outcome.dropped) == (0, 64)
        mixed = pa.concat_tables([table.slice(0, 32), broken.slice(32, 1), table.slice(33)])
        outcome = insert_bisecting(connection, mixed)
        assert (outcome.written, outcome.dropped) == (63, 1)
        assert connection.execute("select count(*) from spans").fetchone() == (63,)
    finally:
        connection.close()
