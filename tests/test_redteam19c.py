"""Red team of the merger-process-for-every-merge change (02707d2) and the batch redaction check
(6e3396a): attacks that broke, kept as tests, and a few that held, kept as guards."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.store import merger_process
from agent_rl_plugin.store.merger_process import LeaseLimits, MergerProcess
from agent_rl_plugin.store.spool import list_segments, write_segment
from agent_rl_plugin.tracing import _copy_only_changed
from agent_rl_plugin.transform import with_attribute_transform
from tests.test_store_merger_process import ONE_CALL_AGENT
from tests.test_store_spool import count, recorded

LIMITS = LeaseLimits(max_leases=8, max_segments=64, max_rows=8_192, merge_threads=1)
SECRET = "sk-" + "Q" * 24


def hanging_python(tmp_path: Path) -> str:
    """A ``sys.executable`` that starts and never answers (a frozen or embedding binary that
    runs something else with our arguments)."""
    script = tmp_path / "hangs.sh"
    script.write_text("#!/bin/sh\nexec sleep 600\n")
    script.chmod(0o755)
    return str(script)


def test_a_child_that_never_starts_costs_seconds_once_not_minutes(tmp_path, monkeypatch):
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(2).spans)
    monkeypatch.setattr(merger_process, "START_TIMEOUT_S", 2.0)
    monkeypatch.setattr(sys, "executable", hanging_python(tmp_path))
    merger = MergerProcess(str(db))
    started = time.monotonic()
    assert merger.merge(wait_s=0.0, limits=LIMITS) is None  # the caller merges itself
    first = time.monotonic() - started
    assert first < 10, first  # was REPLY_TIMEOUT_S (300 s) for a flush
    started = time.monotonic()
    assert [merger.merge(wait_s=0.0, limits=LIMITS) for _ in range(3)] == [None] * 3
    assert time.monotonic() - started < 1 and merger.started == 1  # given up at once: no start per merge
    assert merger._child is None and len(list_segments(db)) == 1  # nothing merged, nothing lost


def test_an_agent_whose_executable_hangs_flushes_and_exits_in_seconds_with_its_spans(tmp_path):
    db = tmp_path / "runs.duckdb"
    script = (
        "import sys, time\n"
        "sys.executable = sys.argv[2]\n"
        + ONE_CALL_AGENT
        + "t = time.perf_counter(); ok = arl.flush()\n"
        "print(ok, round(time.perf_counter() - t, 1), flush=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "AGENT_RL_MERGER"}
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", script, str(db), hanging_python(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    ok, flush_s = out.stdout.split()
    assert ok == "True" and float(flush_s) < 20, out.stdout  # was 30 s (the flush's own timeout), False
    assert elapsed < 60, elapsed  # was ~120 s, the writer thread blocked, the span left in the spool (no file)
    assert count(db) == 1 and list_segments(db) == []


def test_a_frozen_app_never_runs_itself_as_the_merger(tmp_path, monkeypatch):
    """PyInstaller, cx_Freeze, py2exe: ``sys.executable`` is the app, which would run the agent
    again (and record, and start its own "merger": a process per flush, recursively)."""
    db = tmp_path / "runs.duckdb"
    marker = tmp_path / "ran"
    app = tmp_path / "app.sh"
    app.write_text(f"#!/bin/sh\ntouch {marker}\n")
    app.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(app))
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    write_segment(db, recorded(2).spans)
    assert MergerProcess.supported() is False
    assert MergerProcess(str(db)).merge(wait_s=0.0, limits=LIMITS) is None
    assert not marker.exists()


# --- guards of what held -----------------------------------------------------------------
def test_flush_then_a_plain_duckdb_connect_sees_the_spans_masked(tmp_path):
    """A short script in the default mode (its merge is the child's): after ``flush()`` returns,
    a plain ``duckdb.connect`` sees the span, with its secret masked."""
    db = tmp_path / "runs.duckdb"
    script = (
        "import sys, duckdb\n"
        "import agent_rl_plugin as arl\n"
        "arl.configure(db=sys.argv[1])\n"
        "@arl.trace_agent\n"
        "def answer(q):\n"
        "    return q.upper()\n"
        "answer(sys.argv[2])\n"
        "assert arl.flush()\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(con.execute('select count(*), max(attributes) from spans').fetchone()[0])\n"
        "print(any(sys.argv[2] in str(r) for r in con.execute('select * from spans').fetchall()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "AGENT_RL_MERGER"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(db), f"key {SECRET} end"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "False"]


def test_one_secret_in_one_event_of_a_clean_batch_is_masked_for_an_otlp_exporter():
    inner = InMemorySpanExporter()
    exporter = _copy_only_changed(with_attribute_transform(inner, RLConfig()))
    provider = TracerProvider()
    keep = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("t")
    for i in range(50):
        with tracer.start_as_current_span(f"s{i}", attributes={"a": "task-1 clean text", "n": i}) as span:
            span.add_event("e", {"x": "nothing", "seq": ("a", "b")})
            if i == 37:
                span.add_event("e", {"y": ("ok", f"\x00{SECRET}")})
    exporter.export(keep.get_finished_spans())
    out = inner.get_finished_spans()
    assert len(out) == 50
    text = repr([(dict(s.attributes), [dict(e.attributes) for e in s.events]) for s in out])
    assert SECRET not in text and "[REDACTED]" in text
    clean = [s for s, orig in zip(out, keep.get_finished_spans()) if s is orig]
    assert len(clean) == 49  # the others are passed on as they are


def test_hex_ids_of_a_batch_are_each_spans_own():
    provider = TracerProvider()
    keep = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root"):
        for _ in range(20):
            with tracer.start_as_current_span("child"):
                pass
    from agent_rl_plugin.store.rows import SpanConverter

    table = SpanConverter().convert(keep.get_finished_spans()).spans.to_pylist()
    spans = keep.get_finished_spans()
    assert [(r["trace_id"], r["span_id"], r["parent_span_id"]) for r in table] == [
        (f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}", s.parent and f"{s.parent.span_id:016x}")
        for s in spans
    ]


class Text(str):
    """A ``str`` subclass (as some SDKs pass): never trusted by the batch check."""


def test_the_store_batch_path_masks_and_drops_as_each_span_alone(tmp_path):
    from agent_rl_plugin.store.rows import SpanConverter
    from agent_rl_plugin.transform import make_attribute_transform

    keep = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("t")
    for i in range(40):
        with tracer.start_as_current_span(f"s{i}", attributes={"a": "task-1 clean", "n": i, "f": 1.5}) as span:
            span.add_event("e", {"x": "nothing here"})
            if i == 7:
                span.add_event("e", {"gen_ai.input.messages": "private prompt text"})
            if i == 21:
                span.add_event("e", {"t": ("fine", "fine", f"{SECRET}")})
            if i == 30:
                span.set_attribute("z", "x")  # short strings are joined too: still sound
    spans = list(keep.get_finished_spans())
    spans[33]._attributes._dict["sub"] = Text(f"Bearer {SECRET}")  # noqa: SLF001 - a value an SDK subclass keeps
    converter = SpanConverter(transform=make_attribute_transform(RLConfig(capture_content=False)))
    rows = converter.convert(spans).spans.to_pylist()
    assert len(rows) == 40
    text = repr(rows)
    assert SECRET not in text and "private prompt text" not in text
    one_by_one = [converter.convert([s]).spans.to_pylist()[0] for s in spans]
    assert rows == one_by_one


def test_a_secret_held_as_bytes_is_masked_before_the_store_encodes_it_as_text():
    """The SDK decodes bytes attributes to text, but a span from elsewhere (a ReadableSpan built
    by another processor) may hold bytes: the store encodes UTF-8 bytes as their text, so they
    are masked as text is, in a batch and alone."""
    from agent_rl_plugin.config import DEFAULT_REDACTION_PATTERNS
    from agent_rl_plugin.redaction import Redactor
    from agent_rl_plugin.store.rows import SpanConverter
    from agent_rl_plugin.transform import make_attribute_transform

    keep = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("t")
    for i in range(5):
        with tracer.start_as_current_span(f"s{i}", attributes={"a": "clean"}):
            pass
    spans = list(keep.get_finished_spans())
    spans[3]._attributes._dict["raw"] = f"key {SECRET}".encode()  # noqa: SLF001 - as a non-SDK span holds it
    spans[4]._attributes._dict["seq"] = (b"\xff\xfe", SECRET.encode())  # noqa: SLF001
    converter = SpanConverter(transform=make_attribute_transform(RLConfig()))
    rows = converter.convert(spans).spans.to_pylist()
    assert len(rows) == 5 and SECRET not in repr(rows) and "[REDACTED]" in rows[3]["attributes"]
    assert "[REDACTED]" in rows[4]["attributes"]
    redactor = Redactor(DEFAULT_REDACTION_PATTERNS)
    assert redactor.redact_value(b"\xff" + SECRET.encode()) == b"\xff" + SECRET.encode()  # not text: kept
    assert redactor.redact_value(b"nothing to see") == b"nothing to see"
