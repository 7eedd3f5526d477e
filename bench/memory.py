"""Peak RSS of an agent process exporting 100k spans, against the same agent uninstrumented.

Runs ``bench/memory_agent.py`` in fresh processes (interleaved), each reporting its own peak
RSS (``ru_maxrss``, taken after every span is committed):

* ``traced``: ``configure(db=...)``, the agent and its tool decorated, as fast as the loop goes
  (2 spans per iteration; the worst case for the export queues);
* ``plain`` (the baseline): the same loop without agent-rl (not even imported);
* for the breakdown (once each): ``imported`` (agent-rl imported and configured, nothing
  traced) and ``opened`` (one agent call: 2 spans, so the store is opened and written once).

Correctness: the traced run's database holds every span (the OTel ``BatchSpanProcessor``
drops spans silently when its queue of ``max_queue_size`` spans is full).

    python bench/memory.py [--spans 100000]
    python -m bench --only memory [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import Context, Measure, Row, interleave, median  # noqa: E402

AGENT = Path(__file__).resolve().parent / "memory_agent.py"


def run_agent(mode: str, spans: int, db: Path | None) -> dict[str, Any]:
    command = [sys.executable, str(AGENT), "--mode", mode, "--spans", str(spans)]
    if db is not None:
        command += ["--db", str(db)]
    proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"memory agent ({mode}) exited {proc.returncode}: {proc.stderr[-1500:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["queue_full_warnings"] = proc.stderr.count("Queue full")
    if db is not None:
        for path in db.parent.glob(db.name + "*"):
            path.unlink()
    return out


def run(ctx: Context) -> Row:
    spans = ctx.size(100_000, 20_000)
    repeats = ctx.size(3, 1)
    row = Row(id="memory", sizes={"spans": spans, "spans_per_agent_call": 2})
    folder = ctx.folder("memory")
    ctx.log(f"memory: agent processes exporting {spans:,} spans, traced and plain x{repeats}, interleaved")
    runs: dict[str, list[dict[str, Any]]] = {"traced": [], "plain": []}
    counter = iter(range(1000))

    def traced() -> float:
        out = run_agent("traced", spans, folder / f"traced-{next(counter)}.duckdb")
        runs["traced"].append(out)
        return out["peak_rss_mb"]

    def plain() -> float:
        out = run_agent("plain", spans, None)
        runs["plain"].append(out)
        return out["peak_rss_mb"]

    samples = interleave({"traced": traced, "plain": plain}, repeats)
    imported = run_agent("imported", spans, folder / "imported.duckdb")
    opened = run_agent("opened", spans, folder / "opened.duckdb")
    row.value = Measure("traced agent, peak RSS", "MB", samples["traced"])
    row.baselines.append(Measure("same agent uninstrumented", "MB", samples["plain"]))
    added = [t - median(samples["plain"]) for t in samples["traced"]]
    row.ratios["traced / plain"] = median(samples["traced"]) / median(samples["plain"])
    row.target("added peak RSS, MB", median(added), "<=", 100)
    rows = [r.get("rows") for r in runs["traced"]]
    row.check(f"every span recorded ({spans:,}) in every traced run", all(r == spans for r in rows),
              f"rows per run {rows}; BatchSpanProcessor 'Queue full' warnings "
              f"{[r['queue_full_warnings'] for r in runs['traced']]} (spans the OTel batch processor dropped: "
              "its worker was stalled, see docs/benchmarks.md)")
    row.info.update(
        imported_not_tracing_mb=imported["peak_rss_mb"],
        opened_store_2_spans_mb=opened["peak_rss_mb"],
        added_mb=median(added),
        added_by_imports_and_configure_mb=imported["peak_rss_mb"] - median(samples["plain"]),
        added_by_opening_the_store_mb=opened["peak_rss_mb"] - imported["peak_rss_mb"],
        added_by_recording_mb=median(samples["traced"]) - opened["peak_rss_mb"],
        traced_loop_s=[r["loop_s"] for r in runs["traced"]],
        spans_per_s_traced=[spans / r["loop_s"] for r in runs["traced"]],
        rows_per_run=rows,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=100_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-bench-memory-"))
    try:
        for mode in ("plain", "imported", "traced"):
            print(json.dumps(run_agent(mode, args.spans, None if mode == "plain" else folder / f"{mode}.duckdb")))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
