"""Spans per second through ``DuckDBSpanExporter.export`` + ``force_flush``.

Builds N finished synthetic spans first (an LLM-call-like span with ten attributes, one in ten
with an event), then times only the exporter: export in batches of ``--batch`` (as the
``BatchSpanProcessor`` would hand them over) followed by one flush that waits for the commit.

    python bench/store_ingest.py            # 100k spans into a temporary file
    python bench/store_ingest.py -n 20000 --db /tmp/x.duckdb
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import duckdb
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store import DuckDBSpanExporter


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def make_spans(n: int) -> list[ReadableSpan]:
    provider = TracerProvider()
    collect = _Collect()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("bench")
    messages = '[{"role":"user","content":"What is 17 * 23? Use the calculator tool."}]'
    for i in range(n):
        attributes = {
            sc.ROLLOUT_ID: f"{i // 20:032x}",
            sc.TASK_ID: f"task-{i // 200}",
            sc.GROUP_ID: f"group-{i // 800}",
            sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
            sc.SPAN_KIND: sc.SPAN_KIND_LLM,
            sc.GEN_AI_REQUEST_MODEL: "tiny-model",
            sc.GEN_AI_PROVIDER_NAME: "local",
            sc.GEN_AI_USAGE_INPUT_TOKENS: 42,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
            sc.GEN_AI_INPUT_MESSAGES: messages,
        }
        with tracer.start_as_current_span("chat tiny-model", attributes=attributes) as span:
            if i % 10 == 0:
                span.add_event(sc.EVENT_NAME, {sc.EVENT_TYPE: "vote", sc.EVENT_TARGET: "agent_b"})
    provider.shutdown()
    return collect.spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=100_000, help="number of spans (default 100000)")
    parser.add_argument("--batch", type=int, default=512, help="spans per export() call (default 512)")
    parser.add_argument("--db", default=None, help="database file (default: a temporary one)")
    args = parser.parse_args()

    spans = make_spans(args.n)
    folder = tempfile.mkdtemp(prefix="agent-rl-bench-")
    path = args.db or os.path.join(folder, "bench.duckdb")
    exporter = DuckDBSpanExporter(path, normalizers=[])
    exporter.force_flush()
    # Open the file and migrate before timing (one tiny export).
    exporter.export(spans[:1])
    exporter.force_flush()

    started = time.perf_counter()
    for k in range(1, len(spans), args.batch):
        exporter.export(spans[k : k + args.batch])
    exported = time.perf_counter()
    assert exporter.force_flush(600_000)
    flushed = time.perf_counter()
    exporter.shutdown()

    count = duckdb.connect(path, read_only=True).execute("select count(*) from spans").fetchone()[0]
    n = len(spans) - 1
    stats = exporter.stats
    print(f"spans: {n}, rows in table: {count - 1}, dropped: {stats['spans_dropped']}")
    print(f"export() calls: {exported - started:.3f} s; export + flush: {flushed - started:.3f} s")
    print(f"{n / (flushed - started):,.0f} spans/s (export + flush), {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
