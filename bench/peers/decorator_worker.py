"""One sample of the decorator + store rows, run in a fresh interpreter of either side:

    python bench/peers/decorator_worker.py --side ours --calls 2000 --db /tmp/x.duckdb
    <mlflow venv>/bin/python bench/peers/decorator_worker.py --side mlflow --calls 2000 --db /tmp/x.sqlite
    <mlflow venv>/bin/python bench/peers/decorator_worker.py --side mlflow-sync --calls 100 --db /tmp/x.sqlite
    <agl venv>/bin/python bench/peers/decorator_worker.py --side agentlightning --calls 2000 --db /tmp/x

Standard library only at the top (the peers' environments do not hold agent-rl, and ours does
not hold the peers): each side imports its framework, decorates the same agent function (a
question in, a string out, a little work), makes one warm-up call (sent and counted like the
others), then times ``--calls`` calls (``loop_s``: what the agent's thread pays) and the
flush until everything is in the store (``stored_s``: loop + flush), and counts what the
store holds. Prints one JSON line: ``side``, ``version``, ``sent`` (calls made, warm-up
included), ``persisted`` (traces in the store), ``spans`` (span rows in the store),
``loop_s``, ``stored_s``, ``setting`` (the configuration measured).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from typing import Any, Callable


def agent(question: str, step: int) -> str:
    """The decorated function: the same on every side."""
    messages = [{"role": "system", "content": "You are a shopping assistant."}, {"role": "user", "content": question}]
    price = 1.5 * len(messages[-1]["content"])
    return f"The total is {price * (step % 5 + 1):.2f}."


def _loop(fn: Callable[[str, int], str], calls: int) -> float:
    fn("warm-up", -1)
    started = time.perf_counter()
    for step in range(calls):
        fn(f"How much do {step % 7 + 1} notebooks cost? Task {step}.", step)
    return time.perf_counter() - started


def side_ours(calls: int, db: str) -> dict[str, Any]:
    import agent_rl_plugin as arl
    from agent_rl_plugin.store import open_reader

    arl.configure(db=db)
    decorated = arl.trace_agent(name="shopper")(agent)
    started = time.perf_counter()
    loop_s = _loop(decorated, calls)
    flushed = arl.flush(600)
    stored_s = time.perf_counter() - started
    arl.shutdown()
    connection = open_reader(db)
    spans, traces = connection.execute("select count(*), count(distinct trace_id) from spans").fetchone() or (0, 0)
    connection.close()
    from importlib.metadata import version

    return {
        "version": version("agent-rl-plugin"),
        "loop_s": loop_s,
        "stored_s": stored_s,
        "persisted": traces,
        "spans": spans,
        "flushed": flushed,
        "setting": "configure(db=...) defaults",
    }


def _sqlite_count(path: str, table: str) -> int | None:
    connection = sqlite3.connect(path)
    try:
        return int(connection.execute(f"select count(*) from {table}").fetchone()[0])
    except sqlite3.Error:
        return None
    finally:
        connection.close()


def side_mlflow(calls: int, db: str, sync: bool) -> dict[str, Any]:
    # Set before mlflow is imported: its environment variables are read at import and on use.
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false" if sync else "true"
    import logging

    import mlflow

    logging.getLogger("mlflow").setLevel(logging.ERROR)  # a full queue warns once per dropped trace
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    mlflow.set_experiment("bench")
    decorated = mlflow.trace(name="shopper")(agent)
    started = time.perf_counter()
    loop_s = _loop(decorated, calls)
    flush = getattr(mlflow, "flush_trace_async_logging", None)
    if flush is not None:
        flush(terminate=True)
    stored_s = time.perf_counter() - started
    return {
        "version": mlflow.__version__,
        "loop_s": loop_s,
        "stored_s": stored_s,
        "persisted": _sqlite_count(db, "trace_info"),
        "spans": _sqlite_count(db, "spans"),
        "setting": (
            "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING=false (synchronous: loses nothing)"
            if sync
            else "defaults (asynchronous queue)"
        ),
    }


def side_agentlightning(calls: int, db: str) -> dict[str, Any]:
    """Agent Lightning 0.3.0: ``@agl.operation`` inside ``OtelTracer.trace_context`` of one rollout
    and attempt of an ``InMemoryLightningStore`` (0.3.0 has no file store: its SQLite store is
    an empty module and its MongoDB store needs a MongoDB server). Every call is one span; the
    tracer hands each span to the store as it ends. ``db`` is unused (nothing goes to disk)."""
    import asyncio
    import logging
    from importlib.metadata import version

    import agentlightning as agl

    logging.getLogger("agentlightning").setLevel(logging.ERROR)

    async def run() -> dict[str, Any]:
        store = agl.InMemoryLightningStore()
        tracer = agl.OtelTracer()
        tracer.init_worker(0, store)
        attempted = await store.start_rollout(input={"task": "bench"})
        rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
        async with tracer.trace_context("bench", rollout_id=rollout_id, attempt_id=attempt_id):
            decorated = agl.operation(agent)  # needs the active tracer: inside the context
            started = time.perf_counter()
            loop_s = _loop(decorated, calls)
            stored_s = time.perf_counter() - started  # each span is in the store when its call returns
        spans = await store.query_spans(rollout_id)
        return {
            "version": version("agentlightning"),
            "loop_s": loop_s,
            "stored_s": stored_s,
            "persisted": len({s.trace_id for s in spans}),
            "spans": len(spans),
            "setting": "OtelTracer + InMemoryLightningStore, one rollout (nothing on disk)",
        }

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", required=True, choices=("ours", "mlflow", "mlflow-sync", "agentlightning"))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--db", required=True, help="the store: a file (a folder for agentlightning)")
    args = parser.parse_args(argv)
    if args.side == "ours":
        out = side_ours(args.calls, args.db)
    elif args.side in ("mlflow", "mlflow-sync"):
        out = side_mlflow(args.calls, args.db, sync=args.side == "mlflow-sync")
    else:
        out = side_agentlightning(args.calls, args.db)
    out.update(side=args.side, sent=args.calls + 1, calls=args.calls)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
