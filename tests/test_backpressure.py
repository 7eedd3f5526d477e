"""Back-pressure: a fast agent is slowed to the exporter's pace, memory stays bounded, and no
span is lost unless dropping was asked for (``queue_full_wait_ms=0``) or the exporter stalled.

Examples of the guarantees in :mod:`agent_rl_plugin.span_queue`, of the spool writer's segment
size and of :func:`agent_rl_plugin.store.lease.try_merge`'s bounded merges.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.span_queue import BackPressureExporter, CountingBatchSpanProcessor, pending_probe
from agent_rl_plugin.store import spool_writer as spool_writer_module
from agent_rl_plugin.store.lease import try_merge
from agent_rl_plugin.store.rows import SpanConverter
from agent_rl_plugin.store.spool import list_segments, write_segment


class Slow(SpanExporter):
    """Takes ``pause`` seconds per batch; keeps the names it received."""

    def __init__(self, pause: float = 0.0, gate: threading.Event | None = None) -> None:
        self.pause = pause
        self.gate = gate
        self.names: list[str] = []
        self.lock = threading.Lock()

    def export(self, spans):  # type: ignore[no-untyped-def]
        if self.gate is not None:
            self.gate.wait(30)
        time.sleep(self.pause)
        with self.lock:
            self.names.extend(s.name for s in spans)
        return SpanExportResult.SUCCESS


def _tracer(processor: CountingBatchSpanProcessor) -> tuple[TracerProvider, Any]:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, provider.get_tracer("t")


def test_a_stalled_exporter_costs_the_agent_one_wait_not_one_per_span():
    gate = threading.Event()
    exporter = Slow(gate=gate)
    processor = CountingBatchSpanProcessor(
        exporter, max_queue_size=4, max_export_batch_size=2, schedule_delay_millis=10, queue_full_wait_s=0.3
    )
    provider, tracer = _tracer(processor)
    started = time.perf_counter()
    for i in range(40):
        tracer.start_span(f"stuck {i}").end()
    stuck_s = time.perf_counter() - started
    assert stuck_s < 3.0  # one wait of 0.3 s (40 x 0.3 s = 12 s if every span waited)
    assert 30 <= processor.dropped <= 36 and processor.waited <= 2  # room once (a batch taken), then stuck
    gate.set()  # the exporter recovers: spans wait for room again instead of being dropped
    time.sleep(0.1)
    dropped = processor.dropped
    for i in range(40):
        tracer.start_span(f"again {i}").end()
    provider.shutdown()
    assert processor.dropped == dropped
    assert sorted(n for n in exporter.names if n.startswith("again")) == sorted(f"again {i}" for i in range(40))


def test_many_threads_filling_a_small_queue_lose_no_span():
    """Near a full queue, checking for room and queueing are one step: the SDK's queue would
    otherwise silently push out its oldest span when two threads take the last free slot."""
    exporter = Slow(pause=0.002)
    processor = CountingBatchSpanProcessor(
        exporter, max_queue_size=8, max_export_batch_size=4, schedule_delay_millis=5, queue_full_wait_s=30.0
    )
    provider, tracer = _tracer(processor)

    def work(t: int) -> None:
        for i in range(300):
            tracer.start_span(f"t{t} s{i}").end()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    provider.shutdown()
    assert processor.dropped == 0 and processor.waited > 0
    assert sorted(exporter.names) == sorted(f"t{t} s{i}" for t in range(8) for i in range(300))


class Pending(SpanExporter):
    """An exporter that holds spans for a background 'writer' releasing ``step`` every ``every`` s."""

    def __init__(self, step: int, every: float) -> None:
        self.held = 0
        self.exported = 0
        self.lock = threading.Lock()
        self.step, self.every = step, every
        self.stop = threading.Event()
        threading.Thread(target=self._write, daemon=True).start()

    @property
    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {"pending": self.held}

    def _write(self) -> None:
        while not self.stop.wait(self.every):
            with self.lock:
                self.held = max(0, self.held - self.step)

    def export(self, spans):  # type: ignore[no-untyped-def]
        with self.lock:
            self.held += len(spans)
            self.exported += len(spans)
        return SpanExportResult.SUCCESS


class SpanningExporter(Slow):
    """Ends spans of its own while it exports (as an instrumented HTTP client would)."""

    def __init__(self, tracer_box: list[Any], per_batch: int) -> None:
        super().__init__()
        self.tracer_box = tracer_box
        self.per_batch = per_batch

    def export(self, spans):  # type: ignore[no-untyped-def]
        for i in range(self.per_batch):
            self.tracer_box[0].start_span(f"inner {i}").end()
        return super().export(spans)


def test_spans_ended_by_the_export_thread_never_wait_for_room():
    """The export thread cannot wait for room in its own queue: a span it ends when the queue
    is full is dropped (and counted) at once, not after ``queue_full_wait_s``."""
    box: list[Any] = []
    exporter = SpanningExporter(box, per_batch=8)
    processor = CountingBatchSpanProcessor(
        exporter, max_queue_size=4, max_export_batch_size=4, schedule_delay_millis=10, queue_full_wait_s=60
    )
    provider, tracer = _tracer(processor)
    box.append(tracer)
    for i in range(4):
        tracer.start_span(f"agent {i}").end()  # a full batch: the export thread takes it
    deadline = time.monotonic() + 30  # each of its own spans would otherwise wait 60 s for room
    while processor.dropped < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert processor.dropped >= 4 and processor.waited == 0
    assert sorted(n for n in exporter.names if n.startswith("agent")) == [f"agent {i}" for i in range(4)]
    processor._batch_processor._shutdown = True  # noqa: SLF001 - no last export of the export thread's spans
    provider.shutdown()


def test_spans_recorded_but_not_sampled_are_never_queued():
    """As OTel's batch processor: a span the sampler records without sampling stays local."""
    from opentelemetry.sdk.trace import sampling

    class RecordOnly(sampling.Sampler):
        def should_sample(self, *args: Any, **kwargs: Any) -> sampling.SamplingResult:
            return sampling.SamplingResult(sampling.Decision.RECORD_ONLY)

        def get_description(self) -> str:
            return "record only"

    exporter = Slow()
    processor = CountingBatchSpanProcessor(
        exporter, max_queue_size=8, max_export_batch_size=8, schedule_delay_millis=10
    )
    provider = TracerProvider(sampler=RecordOnly())
    provider.add_span_processor(processor)
    span = provider.get_tracer("t").start_span("local only")
    assert span.is_recording() and not span.get_span_context().trace_flags.sampled
    span.end()
    sampled_provider, tracer = _tracer(processor)
    tracer.start_span("sampled").end()
    assert processor.force_flush(30_000)
    provider.shutdown()
    assert exporter.names == ["sampled"]


def test_the_export_thread_waits_while_the_exporter_makes_progress():
    inner = Pending(step=10, every=0.1)
    inner.held = 100  # 1 s of work for the writer, 0.1 s between steps
    exporter = BackPressureExporter(inner, pending=pending_probe(inner), max_pending=20, stall_s=0.3)
    started = time.perf_counter()
    exporter.export([object()] * 10)  # type: ignore[list-item]
    waited_s = time.perf_counter() - started
    inner.stop.set()
    assert waited_s > 0.6  # kept waiting well past stall_s: the pending count kept going down
    assert inner.held <= 20 and exporter.waited == 1


def test_the_export_thread_gives_up_on_an_exporter_that_makes_no_progress():
    inner = Pending(step=0, every=0.05)
    inner.held = 100
    exporter = BackPressureExporter(inner, pending=pending_probe(inner), max_pending=20, stall_s=0.2)
    started = time.perf_counter()
    exporter.export([object()] * 10)  # type: ignore[list-item]
    inner.stop.set()
    assert 0.15 < time.perf_counter() - started < 2.0
    assert inner.exported == 10  # handed on: the exporter keeps or drops (and counts) it by its rules


def test_an_exporter_without_a_pending_count_is_not_waited_for():
    assert pending_probe(Slow()) is None


def test_a_fast_agent_is_slowed_down_and_every_span_is_stored(plugin_manager, tmp_path: Path, monkeypatch):
    """End to end, with a slow disk: the queue and the exporter's backlog stay bounded, the
    agent waits, nothing is dropped, and flush() stores every span."""
    real_write = spool_writer_module.write_segment

    def slow_write(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.05)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(spool_writer_module, "write_segment", slow_write)
    db = tmp_path / "bp.duckdb"
    arl.configure(db=str(db), max_queue_size=64, export_batch_size=32, export_delay_ms=5)
    (exporter,) = tracing.STATE.exporters.values()
    most_pending = 0
    real_submit = exporter._writer.submit  # type: ignore[attr-defined]

    def watching_submit(batch: Any) -> bool:
        nonlocal most_pending
        queued = real_submit(batch)
        most_pending = max(most_pending, exporter._writer.pending)  # type: ignore[attr-defined]
        return queued

    monkeypatch.setattr(exporter._writer, "submit", watching_submit)  # type: ignore[attr-defined]

    @arl.trace_agent(name="fast")
    def agent(i: int) -> int:
        return i

    for i in range(3000):
        agent(i)
    assert arl.flush(120)
    ((child, _),) = tracing.STATE.processor._children  # type: ignore[union-attr]
    assert tracing.dropped_spans() == 0 and exporter.stats["spans_dropped"] == 0
    assert child.waited > 0  # the agent was slowed down
    assert most_pending <= 64  # the exporter's backlog stayed within max_queue_size
    tracing.shutdown()
    connection = duckdb.connect(str(db), read_only=True)
    try:
        assert connection.execute("select count(*), count(distinct span_id) from spans").fetchone() == (3000, 3000)
    finally:
        connection.close()


def test_a_recording_process_writes_segments_of_bounded_size(plugin_manager, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(spool_writer_module, "MAX_SEGMENT_ROWS", 200)
    monkeypatch.setattr(spool_writer_module.SpoolWriter, "_merge", lambda self, wait_s: None)  # keep them
    db = tmp_path / "seg.duckdb"
    arl.configure(db=str(db), export_delay_ms=10_000, export_batch_size=50)  # all leaves at the flush

    @arl.trace_agent(name="burst")
    def agent(i: int) -> int:
        return i

    for i in range(2000):
        agent(i)
    assert arl.flush(60)
    rows = [pq.read_metadata(s.spans_path).num_rows for s in list_segments(db)]
    assert sum(rows) == 2000 and max(rows) < 200 + 50  # the limit, passed by less than one batch


def _spans(n: int, name: str) -> Any:
    """``n`` finished spans named ``name i``, converted to the rows of a segment."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    kept = Slow()
    finished: list[Any] = []
    kept.export = lambda spans: (finished.extend(spans), SpanExportResult.SUCCESS)[1]  # type: ignore[method-assign]
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("t")
    for i in range(n):
        tracer.start_span(f"{name} {i}").end()
    return SpanConverter().convert(finished).spans


def test_a_bounded_merge_takes_the_oldest_segments_up_to_max_rows(tmp_path: Path):
    db = tmp_path / "m.duckdb"
    for i, n in enumerate((30, 30, 30, 30)):
        write_segment(db, _spans(n, f"seg{i}"))
    first = try_merge(db, max_rows=70, merge_threads=1)  # 30 + 30; a third would pass 70
    assert first is not None and (first.segments, first.spans) == (2, 60)
    assert len(list_segments(db)) == 2  # the rest waits for the next lease
    single = try_merge(db, max_rows=1)  # at least one segment, however big
    assert single is not None and single.segments == 1
    held = duckdb.connect(str(db))  # this process's connection shares the database with the lease
    try:
        threads = held.execute("select current_setting('threads')").fetchone()
        rest = try_merge(db, merge_threads=1)
        assert rest is not None and rest.segments == 1 and try_merge(db) is None
        assert held.execute("select current_setting('threads')").fetchone() == threads  # put back
        assert held.execute("select count(*) from spans").fetchone() == (120,)
    finally:
        held.close()
