"""The agent process of the ``memory`` row (``bench/memory.py``): a loop of agent calls that
each make one tool call (2 spans per iteration), with or without agent-rl.

    python bench/memory_agent.py --mode plain --spans 100000
    python bench/memory_agent.py --mode traced --spans 100000 --db /tmp/x.duckdb
    python bench/memory_agent.py --mode imported --spans 100000 --db /tmp/x.duckdb   # configured, nothing traced
    python bench/memory_agent.py --mode opened --db /tmp/x.duckdb    # configured, 2 spans (the store opened)

Prints one JSON line: the peak RSS (``ru_maxrss``) taken after the last span is committed, and
for ``traced`` the rows in the database.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time


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
    started = time.perf_counter()
    for step in range(1 if args.mode == "opened" else args.spans // 2):
        run_agent(f"How much do {step % 7 + 1} notebooks cost? Task {step}.", step)
    seconds = time.perf_counter() - started
    if args.mode != "plain":
        arl.flush(600)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    out = {"mode": args.mode, "peak_rss_mb": peak_mb, "loop_s": seconds}
    if args.mode == "traced":
        from agent_rl_plugin.store import open_reader

        connection = open_reader(args.db)
        out["rows"] = connection.execute("select count(*) from spans").fetchone()[0]
        connection.close()
        from agent_rl_plugin import tracing

        out["dropped"] = sum(e.stats["spans_dropped"] for e in tracing.STATE.exporters.values() if hasattr(e, "stats"))
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
