"""100,000 spans from 64 concurrent asyncio rollouts and 8 threads in one process: all land.

One process records into its own DuckDB file with the default settings (in-process exporter).
64 asyncio rollouts interleave on the event loop in the main thread (an async agent awaiting an
async tool, plus ``record_llm_call``), while 8 threads run sync rollouts side by side. Afterwards
the database holds exactly the spans that were started (counted by a span processor on the
provider), each once; every parent is present; every span of a rollout carries that rollout's id
(and its task id), and each rollout has exactly the spans it made.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter

from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.store import open_reader

ASYNC_ROLLOUTS, ASYNC_PAIRS = 64, 390  # 64 x (rollout + agent + 390 x (tool + llm)) = 50,048 spans
THREADS, THREAD_ROLLOUTS, THREAD_PAIRS = 8, 223, 13  # 8 x 223 x (2 + 13 x 2) = 49,952 spans
ASYNC_SPANS = 2 + 2 * ASYNC_PAIRS
THREAD_SPANS = 2 + 2 * THREAD_PAIRS
TOTAL = ASYNC_ROLLOUTS * ASYNC_SPANS + THREADS * THREAD_ROLLOUTS * THREAD_SPANS
assert TOTAL == 100_000


class CountStarts(SpanProcessor):
    def __init__(self) -> None:
        self._count = itertools.count()

    def on_start(self, span, parent_context=None) -> None:  # noqa: ANN001
        next(self._count)

    def total(self) -> int:
        return next(self._count)  # the number of calls so far (this call not included)


@arl.trace_tool
async def fetch(key: str) -> str:
    await asyncio.sleep(0)
    return key.upper()


@arl.trace_agent(name="async-worker")
async def async_agent(i: int) -> int:
    total = 0
    for step in range(ASYNC_PAIRS):
        found = await fetch(f"a{i}-{step}")
        arl.record_llm_call("tiny", found, "ok", input_tokens=1, output_tokens=1)
        total += len(found)
    return total


@arl.trace_tool
def lookup(key: str) -> str:
    return key[::-1]


@arl.trace_agent(name="thread-worker")
def thread_agent(k: int, j: int) -> int:
    total = 0
    for step in range(THREAD_PAIRS):
        found = lookup(f"t{k}-{j}-{step}")
        arl.record_llm_call("tiny", found, "ok", input_tokens=1, output_tokens=1)
        total += len(found)
    return total


def test_64_asyncio_rollouts_and_8_threads_100k_spans_all_land(plugin_manager, tmp_path) -> None:
    db = tmp_path / "concurrent.duckdb"
    arl.configure(db=str(db))  # default batching and queues, as an agent gets them
    counter = CountStarts()
    trace.get_tracer_provider().add_span_processor(counter)
    began = time.monotonic()

    errors: list[BaseException] = []
    start = threading.Barrier(THREADS + 1)

    def worker(k: int) -> None:
        try:
            start.wait()
            for j in range(THREAD_ROLLOUTS):
                with arl.rollout(task_id=f"th{k}-{j}", group_id=f"thread{k}"):
                    assert thread_agent(k, j) > 0
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    async def one(i: int) -> int:
        async with arl.rollout(task_id=f"as{i}", group_id=f"loop{i % 8}"):
            return await async_agent(i)

    async def main() -> list[int]:
        return await asyncio.gather(*(one(i) for i in range(ASYNC_ROLLOUTS)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    start.wait()
    results = asyncio.run(main())
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == ASYNC_ROLLOUTS and all(r > 0 for r in results)
    assert arl.flush(120)
    recorded_s = time.monotonic() - began
    started = counter.total()
    assert started == TOTAL

    stats = tracing.STATE.exporters["duckdb"].stats
    assert stats["spans_dropped"] == 0 and stats["spans_written"] == TOTAL, stats

    reader = open_reader(db)
    try:
        q = lambda sql: reader.execute(sql).fetchall()  # noqa: E731
        assert q("select count(*), count(distinct (trace_id, span_id)) from spans") == [(TOTAL, TOTAL)]
        assert q(
            "select count(*) from spans c where parent_span_id is not null and not exists "
            "(select 1 from spans p where p.trace_id = c.trace_id and p.span_id = c.parent_span_id)"
        ) == [(0,)]
        # Every span of a rollout carries that rollout's id: the id of its trace's root span.
        assert q("select count(*) from spans where rollout_id is null or task_id is null") == [(0,)]
        assert q(
            "select count(*) from spans s join spans r on r.trace_id = s.trace_id and r.is_rollout_root "
            "where s.rollout_id <> r.rollout_id or s.task_id <> r.task_id or s.group_id <> r.group_id"
        ) == [(0,)]
        assert q("select count(*) from spans where is_rollout_root") == [(ASYNC_ROLLOUTS + THREADS * THREAD_ROLLOUTS,)]
        per_rollout = q("select any_value(task_id), count(distinct task_id), count(distinct trace_id), count(*) "
                        "from spans group by rollout_id")
        kinds = Counter(dict(q("select span_kind, count(*) from spans group by 1")))
    finally:
        reader.close()
    expected = {f"as{i}": ASYNC_SPANS for i in range(ASYNC_ROLLOUTS)}
    expected.update({f"th{k}-{j}": THREAD_SPANS for k in range(THREADS) for j in range(THREAD_ROLLOUTS)})
    assert all(tasks == 1 and traces == 1 for _, tasks, traces, _ in per_rollout)
    assert {task: n for task, _, _, n in per_rollout} == expected
    rollouts = ASYNC_ROLLOUTS + THREADS * THREAD_ROLLOUTS
    pairs = ASYNC_ROLLOUTS * ASYNC_PAIRS + THREADS * THREAD_ROLLOUTS * THREAD_PAIRS
    assert kinds == Counter({"rollout": rollouts, "agent": rollouts, "tool": pairs, "llm": pairs})
    print(f"\n{TOTAL} spans recorded and committed in {recorded_s:.1f} s")
