"""Peak RSS of an agent process recording 100k and 1M spans, against the same agent uninstrumented.

Runs ``bench/memory_agent.py`` in fresh processes, each reporting its own peak RSS
(``ru_maxrss``, taken after every span is committed; a traced agent's merges run in its merger
process, whose own peak RSS is reported beside it):

* ``traced``: ``configure(db=...)``, the agent and its tool decorated, as fast as the loop goes
  (2 spans per iteration; the worst case for the export queues: the loop outruns the exporter,
  so the bounded queues fill and the agent waits for room: back-pressure, no span dropped);
* ``plain`` (the baseline): the same loop without agent-rl (not even imported);
* at ``spans`` (100k; quick 20k) interleaved, 3 runs each (quick 1), and once each at
  ``large_spans`` (1M; quick 40k): flat memory means the added peak stays under the target
  however many spans go through;
* for the breakdown (once each): ``imported`` (agent-rl imported and configured, nothing
  traced) and ``opened`` (one agent call: 2 spans, so the store is opened and written once).

Correctness: every traced run's database holds every span, once (the OTel
``BatchSpanProcessor`` alone would drop spans silently when its queue of ``max_queue_size``
spans is full; ours waits instead), and no span was counted as dropped.

    python bench/memory.py [--spans 100000] [--large-spans 1000000]
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


def run_agent(mode: str, spans: int, db: Path | None, timeout_s: float = 900) -> dict[str, Any]:
    command = [sys.executable, str(AGENT), "--mode", mode, "--spans", str(spans)]
    if db is not None:
        command += ["--db", str(db)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"memory agent ({mode}) exited {proc.returncode}: {proc.stderr[-1500:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["queue_full_warnings"] = proc.stderr.count("Queue full")
    if db is not None:
        for path in db.parent.glob(db.name + "*"):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()
    return out


def _all_recorded(runs: list[dict[str, Any]], spans: int) -> bool:
    return all(r.get("rows") == spans and r.get("distinct_spans") == spans and r.get("dropped") == 0 for r in runs)


def _detail(runs: list[dict[str, Any]]) -> str:
    return (
        f"rows per run {[r.get('rows') for r in runs]}, distinct {[r.get('distinct_spans') for r in runs]}, "
        f"dropped {[r.get('dropped') for r in runs]}; BatchSpanProcessor 'Queue full' warnings "
        f"{[r['queue_full_warnings'] for r in runs]}"
    )


def run(ctx: Context) -> Row:
    spans = ctx.size(100_000, 20_000)
    large = ctx.size(1_000_000, 40_000)
    repeats = ctx.size(3, 1)
    row = Row(id="memory", sizes={"spans": spans, "large_spans": large, "spans_per_agent_call": 2})
    folder = ctx.folder("memory")
    ctx.log(f"memory: agent processes recording {spans:,} spans, traced and plain x{repeats}, interleaved")
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
    ctx.log(f"memory: {large:,} spans, traced and plain once each")
    large_traced = run_agent("traced", large, folder / "large.duckdb", timeout_s=3600)
    large_plain = run_agent("plain", large, None)
    row.value = Measure(f"traced agent, peak RSS ({spans:,} spans)", "MB", samples["traced"])
    row.baselines.append(Measure(f"same agent uninstrumented ({spans:,} spans)", "MB", samples["plain"]))
    merger_peaks = [r["merger_peak_rss_mb"] for r in runs["traced"] if r.get("merger_peak_rss_mb")]
    if merger_peaks:  # not the agent's memory, but the machine's: shown beside it, never hidden
        row.baselines.append(
            Measure(f"  the traced agent's merger process (its child), peak RSS ({spans:,} spans)", "MB", merger_peaks)
        )
    added = [t - median(samples["plain"]) for t in samples["traced"]]
    added_large = large_traced["peak_rss_mb"] - large_plain["peak_rss_mb"]
    row.ratios["traced / plain"] = median(samples["traced"]) / median(samples["plain"])
    row.target(f"added peak RSS at {spans:,} spans, MB", median(added), "<=", 100)
    row.target(f"added peak RSS at {large:,} spans, MB", added_large, "<=", 100)
    row.check(
        f"every span recorded ({spans:,}), once, none dropped, in every traced run",
        _all_recorded(runs["traced"], spans),
        _detail(runs["traced"]),
    )
    row.check(
        f"every span recorded ({large:,}), once, none dropped",
        _all_recorded([large_traced], large),
        _detail([large_traced]),
    )
    traced_loop = [r["loop_s"] for r in runs["traced"]]
    row.info.update(
        imported_not_tracing_mb=imported["peak_rss_mb"],
        opened_store_2_spans_mb=opened["peak_rss_mb"],
        added_mb=median(added),
        added_by_imports_and_configure_mb=imported["peak_rss_mb"] - median(samples["plain"]),
        added_by_opening_the_store_mb=opened["peak_rss_mb"] - imported["peak_rss_mb"],
        added_by_recording_mb=median(samples["traced"]) - opened["peak_rss_mb"],
        traced_loop_s=traced_loop,
        spans_per_s_traced=[spans / s for s in traced_loop],
        rows_per_run=[r.get("rows") for r in runs["traced"]],
        span_ends_that_waited=[r.get("waited") for r in runs["traced"]],
        peak_by_spans_traced=runs["traced"][-1].get("peak_by_spans"),
        large_spans=large,
        large_traced_mb=large_traced["peak_rss_mb"],
        large_plain_mb=large_plain["peak_rss_mb"],
        large_added_mb=added_large,
        large_added_by_recording_mb=large_traced["peak_rss_mb"] - opened["peak_rss_mb"],
        large_loop_s=large_traced["loop_s"],
        large_spans_per_s=large / large_traced["loop_s"],
        large_rows=large_traced.get("rows"),
        large_span_ends_that_waited=large_traced.get("waited"),
        large_segments_left_after_flush=large_traced.get("segments_left"),
        large_peak_by_spans=large_traced.get("peak_by_spans"),
        merger_processes_per_run=[r.get("merger_processes") for r in runs["traced"]],
        merger_peak_rss_mb=merger_peaks,
        large_merger_peak_rss_mb=large_traced.get("merger_peak_rss_mb"),
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--large-spans", type=int, default=0, help="also run the traced and plain agents at this size")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-bench-memory-"))
    try:
        sizes = [args.spans] + ([args.large_spans] if args.large_spans else [])
        for spans in sizes:
            for mode in ("plain", "imported", "traced"):
                db = None if mode == "plain" else folder / f"{mode}.duckdb"
                print(json.dumps(run_agent(mode, spans, db, timeout_s=3600)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
