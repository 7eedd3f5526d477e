"""The agent process of the ``memory`` row (``bench/memory.py``): a loop of agent calls that
each make one tool call (2 spans per iteration), with or without agent-rl.

    python bench/memory_agent.py --mode plain --spans 100000
    python bench/memory_agent.py --mode traced --spans 100000 --db /tmp/x.duckdb
    python bench/memory_agent.py --mode imported --spans 100000 --db /tmp/x.duckdb   # configured, nothing traced
    python bench/memory_agent.py --mode opened --db /tmp/x.duckdb    # configured, 2 spans (the store opened)

Prints one JSON line: the peak RSS (``ru_maxrss``) taken after the last span is committed and
the exporters are closed (the close's merge included); the
peak so far after each tenth of the loop (``peak_by_spans``: [[spans, MB], ...], to see whether it
stays flat); for ``traced`` the rows in the database, the spans dropped (by the span queue and by
the exporter), the span ends that waited for room in the queue (back-pressure) and the spool
segments left unmerged at the end.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def lookup(item: str) -> float:
    return 1.5 * len(item)


def agent(question: str, step: int) -> str:
    messages = [{"role": "system", "content": "You are a shopping assistant."}, {"role": "user", "content": question}]
    price = lookup(f"item-{step % 7}")
    messages.append({"role": "tool", "content": str(price)})
    return f"The total is {price * (step % 5 + 1):.2f}."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("plain", "imported", "opened", "traced"), required=True)
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    global lookup
    run_agent = agent
    if args.mode != "plain":
        import agent_rl_plugin as arl

        arl.configure(db=args.db)
        if args.mode in ("traced", "opened"):
            lookup = arl.trace_tool(name="lookup")(lookup)  # the agent calls the traced tool
            run_agent = arl.trace_agent(name="shopper")(agent)
    iterations = 1 if args.mode == "opened" else args.spans // 2
    tenth = max(1, iterations // 10)
    curve = []
    started = time.perf_counter()
    for step in range(iterations):
        run_agent(f"How much do {step % 7 + 1} notebooks cost? Task {step}.", step)
        if (step + 1) % tenth == 0:
            curve.append([2 * (step + 1), peak_mb()])
    seconds = time.perf_counter() - started
    exporters: list = []
    children: tuple = ()
    segments_left_after_flush = None
    if args.mode != "plain":
        from agent_rl_plugin import tracing
        from agent_rl_plugin.store.spool import list_segments

        arl.flush(1800)
        segments_left_after_flush = len(list_segments(args.db))
        exporters = [e for e in tracing.STATE.exporters.values() if hasattr(e, "stats")]
        children = tracing.STATE.processor._children if tracing.STATE.processor is not None else ()
        tracing.shutdown()  # the close's own merge (its peak) counts too
    out = {"mode": args.mode, "peak_rss_mb": peak_mb(), "loop_s": seconds, "peak_by_spans": curve}
    if args.mode == "traced":
        from agent_rl_plugin.store import open_reader

        out["segments_left"] = segments_left_after_flush
        out["segments_left_after_close"] = len(list_segments(args.db))
        out["dropped"] = sum(e.stats["spans_dropped"] for e in exporters) + tracing.dropped_spans()
        out["waited"] = sum(getattr(child, "waited", 0) for child, _ in children)
        out["exporter_waits"] = sum(getattr(exporter, "waited", 0) for _, exporter in children)
        writers = [getattr(e, "_writer", None) for e in exporters]
        # merges a child process did (its own peak RSS, reported apart: it is not the agent's)
        out["merger_processes"] = sum(getattr(getattr(w, "_merger_process", None), "started", 0) for w in writers)
        merger_peaks = [w.merger_peak_rss_mb for w in writers if getattr(w, "merger_peak_rss_mb", None)]
        out["merger_peak_rss_mb"] = max(merger_peaks) if merger_peaks else None
        connection = open_reader(args.db)
        counts = connection.execute("select count(*), count(distinct (trace_id, span_id)) from spans").fetchone()
        assert counts is not None
        out["rows"], out["distinct_spans"] = counts
        connection.close()
        out["segments_after_reader"] = len(list_segments(args.db))
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
