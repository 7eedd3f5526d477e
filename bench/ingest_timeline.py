"""Where the time of the ``ingest`` row goes: one run of the exporter with a timeline.

Records N spans through ``DuckDBSpanExporter`` as ``bench/store_ingest.py`` does (export in
batches, flush, merge what is left), and prints the phases' wall time, the CPU of this process
(the conversion, the segment writes) during the export phase and in all, the merger process's
CPU, and each merge lease (when its result came back, its rows and its seconds). Not a bench
row: a tool for the profile in docs/benchmarks.md (the tenth pass).

    python bench/ingest_timeline.py            # 100k spans
    python bench/ingest_timeline.py -n 20000
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agent_rl_plugin.store import spool_writer  # noqa: E402
from bench.store_ingest import default_exporter, merge_rest, spans_from_arguments  # noqa: E402


def _cpu(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    args, spans = spans_from_arguments(__doc__)
    leases: list[tuple[float, dict[str, Any]]] = []
    count = spool_writer.SpoolWriter._count

    def counting(self: spool_writer.SpoolWriter, result: dict[str, Any]) -> None:
        leases.append((time.perf_counter(), result))
        count(self, result)

    spool_writer.SpoolWriter._count = counting  # type: ignore[method-assign]
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-timeline-"))
    try:
        path = folder / "timeline.duckdb"
        exporter = default_exporter(path)
        exporter.export(spans[:1])
        exporter.force_flush()  # opens the file and starts the merger process, before the clock
        leases.clear()
        cpu_start, started = _cpu(), time.perf_counter()
        for k in range(1, len(spans), args.batch):
            exporter.export(spans[k : k + args.batch])
        exported, cpu_exported = time.perf_counter(), _cpu()
        assert exporter.force_flush(600_000)
        flushed = time.perf_counter()
        merge_rest(path)
        ended, cpu_end = time.perf_counter(), _cpu()
        exporter.shutdown()  # the merger process ends: its CPU is counted below
        n = len(spans) - 1
        print(f"{n:,} spans: {n / (ended - started):,.0f} spans/s ({os.cpu_count()} CPUs)")
        print(
            f"  export {exported - started:.3f} s, flush {flushed - exported:.3f} s, "
            f"merge of the rest {ended - flushed:.3f} s"
        )
        print(
            f"  this process's CPU: {1e6 * (cpu_exported - cpu_start) / n:.1f} us a span while exporting, "
            f"{cpu_end - cpu_start:.2f} s in all; the merger process: {_cpu(resource.RUSAGE_CHILDREN):.2f} s "
            "(its start-up included)"
        )
        for at, result in leases:
            print(f"  lease back at {at - started:6.2f} s: {result['spans']:,} rows in {result['seconds']:.3f} s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
