"""Sustained spans/s from 4 processes through OTLP/HTTP into ``agent-rl serve``'s receiver,
against the same spans through the in-process ``DuckDBSpanExporter``, in the same run.

Each worker process first builds its spans (LLM-call-like spans with ten attributes, one in ten
with an event, as in ``bench/store_ingest.py``), waits for the others, then exports them with
the OTel SDK's own ``OTLPSpanExporter`` (http/protobuf) in batches of ``--batch`` (what a
``BatchSpanProcessor`` hands it). The clock runs from the start signal until every span is
committed by the receiver; then the file is counted: zero loss means every span sent is a row.
The in-process baseline exports the same number of spans in one process (export + flush).

    python bench/receiver.py                 # 4 processes x 20000 spans
    python bench/receiver.py -n 50000 --processes 4 --batch 512
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time

import duckdb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.store_ingest import make_spans  # noqa: E402


def _worker(url: str, n: int, batch: int, ready: "mp.Queue", start: "mp.Event", done: "mp.Queue") -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    spans = make_spans(n)
    exporter = OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=60)
    ready.put(os.getpid())
    start.wait()
    failed = 0
    for k in range(0, len(spans), batch):
        if exporter.export(spans[k : k + batch]) is not SpanExportResult.SUCCESS:
            failed += len(spans[k : k + batch])
    exporter.shutdown()
    done.put((len(spans), failed))


def run_receiver(folder: str, processes: int, n: int, batch: int) -> dict:
    """Spans/s through the receiver (and the counts proving zero loss)."""
    from agent_rl_plugin.receiver import Receiver

    path = os.path.join(folder, "served.duckdb")
    receiver = Receiver(path, port=0, token="", announce=False).start()
    ctx = mp.get_context("spawn")
    ready, done, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=_worker, args=(receiver.url, n, batch, ready, start, done)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get(timeout=600)
    started = time.perf_counter()
    start.set()
    results = [done.get(timeout=3600) for _ in workers]
    acknowledged = time.perf_counter()
    assert receiver.sink.flush(600)
    committed = time.perf_counter()
    for worker in workers:
        worker.join()
    stats = receiver.stop()
    sent = sum(r[0] for r in results)
    failed = sum(r[1] for r in results)
    connection = duckdb.connect(path, read_only=True)
    rows, distinct = connection.execute("select count(*), count(distinct (trace_id, span_id)) from spans").fetchone()
    connection.close()
    return {
        "sent": sent, "export_failures": failed, "rows": rows, "distinct": distinct,
        "batches_429": stats["batches_rejected"], "dropped": stats["spans_dropped"],
        "seconds": committed - started, "ack_seconds": acknowledged - started,
        "spans_per_s": sent / (committed - started),
    }


def run_in_process(folder: str, total: int, batch: int) -> dict:
    """Spans/s through ``DuckDBSpanExporter`` (export + flush) for the same number of spans."""
    from agent_rl_plugin.store import DuckDBSpanExporter

    spans = make_spans(total + 1)
    path = os.path.join(folder, "local.duckdb")
    exporter = DuckDBSpanExporter(path, normalizers=None)
    exporter.export(spans[:1])
    exporter.force_flush()
    started = time.perf_counter()
    for k in range(1, len(spans), batch):
        exporter.export(spans[k : k + batch])
    assert exporter.force_flush(600_000)
    seconds = time.perf_counter() - started
    dropped = exporter.stats["spans_dropped"]
    exporter.shutdown()
    return {"sent": total, "dropped": dropped, "seconds": seconds, "spans_per_s": total / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20_000, help="spans per process (default 20000)")
    parser.add_argument("--processes", type=int, default=4, help="exporting processes (default 4)")
    parser.add_argument("--batch", type=int, default=512, help="spans per export request (default 512)")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="agent-rl-bench-receiver-")
    remote = run_receiver(folder, args.processes, args.n, args.batch)
    local = run_in_process(folder, args.processes * args.n, args.batch)
    lost = remote["sent"] - remote["distinct"]
    print(f"receiver: {remote['sent']} spans from {args.processes} processes, rows {remote['rows']} "
          f"(distinct {remote['distinct']}), lost {lost}, export failures {remote['export_failures']}, "
          f"429s {remote['batches_429']}, dropped {remote['dropped']}")
    print(f"receiver: {remote['seconds']:.2f} s to commit ({remote['ack_seconds']:.2f} s to acknowledge): "
          f"{remote['spans_per_s']:,.0f} spans/s")
    print(f"in-process exporter: {local['sent']} spans in {local['seconds']:.2f} s: {local['spans_per_s']:,.0f} "
          f"spans/s (dropped {local['dropped']})")
    print(f"ratio receiver / in-process: {remote['spans_per_s'] / local['spans_per_s']:.2f}; {os.cpu_count()} CPUs")
    if lost or remote["rows"] != remote["sent"] or remote["export_failures"]:
        raise SystemExit("spans were lost or duplicated")


if __name__ == "__main__":
    main()
