"""Many rollouts at once: every span lands in its own rollout, under its own parent.

100 asyncio rollouts interleave on one event loop (an async-generator agent calling two tool
methods with awaits in between), and 8 threads run sync rollouts side by side. Afterwards each
rollout must be a clean tree: rollout span -> agent span -> two tool spans, all carrying that
rollout's ids and nobody else's.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc


class Worker:
    """A plain agent: streams two answers, each from a tool call."""

    async def chat(self, question: str):
        for step in range(2):
            await asyncio.sleep(0)
            found = await self.lookup(f"{question}/{step}")
            await asyncio.sleep(0)
            yield self.verify(found)

    async def lookup(self, query: str) -> str:
        await asyncio.sleep(0)
        return query.upper()

    def verify(self, text: str) -> str:
        return f"ok:{text}"

    def run(self, question: str) -> list[str]:
        return [self.verify(self.lookup_sync(f"{question}/{step}")) for step in range(1)]

    def lookup_sync(self, query: str) -> str:
        return query.upper()


class RLWorker(arl.RLAgentMixin, Worker):
    rl_tool_methods = ("lookup", "verify", "lookup_sync")


def check_rollout_trees(spans, expected_tasks: set[str], tools_per_rollout: int) -> None:
    by_rollout = defaultdict(list)
    for span in spans:
        by_rollout[span.attributes[sc.ROLLOUT_ID]].append(span)
    assert len(by_rollout) == len(expected_tasks)
    seen_tasks = set()
    for rollout_id, members in by_rollout.items():
        kinds = defaultdict(list)
        for span in members:
            kinds[span.attributes[sc.SPAN_KIND]].append(span)
        (root,) = kinds["rollout"]
        (agent,) = kinds["agent"]
        tools = kinds["tool"]
        assert len(tools) == tools_per_rollout
        task = root.attributes[sc.TASK_ID]
        seen_tasks.add(task)
        assert root.name == f"rollout {task}"
        assert agent.parent.span_id == root.context.span_id
        for tool in tools:
            assert tool.parent.span_id == agent.context.span_id
        for span in members:
            assert span.context.trace_id == root.context.trace_id
            assert span.attributes[sc.TASK_ID] == task
            assert span.attributes[sc.GROUP_ID] == root.attributes[sc.GROUP_ID]
    assert seen_tasks == expected_tasks


def test_100_concurrent_asyncio_rollouts_do_not_mix(span_exporter) -> None:
    agent = RLWorker()

    async def one(i: int) -> list[str]:
        async with arl.rollout(task_id=f"t{i}", group_id=f"g{i % 7}"):
            return [chunk async for chunk in agent.chat(f"q{i}")]

    async def main() -> list[list[str]]:
        return await asyncio.gather(*(one(i) for i in range(100)))

    results = asyncio.run(main())
    assert results[42] == ["ok:Q42/0", "ok:Q42/1"]
    arl.flush()
    spans = span_exporter.get_finished_spans()
    assert len(spans) == 100 * (1 + 1 + 4)
    check_rollout_trees(spans, {f"t{i}" for i in range(100)}, tools_per_rollout=4)


def test_threads_running_sync_rollouts_do_not_mix(span_exporter) -> None:
    agent = RLWorker()
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            start.wait()
            for j in range(10):
                with arl.rollout(task_id=f"th{k}-{j}", group_id=f"thread{k}"):
                    assert agent.run(f"q{k}-{j}") == [f"ok:Q{k}-{j}/0"]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    arl.flush()
    spans = span_exporter.get_finished_spans()
    expected = {f"th{k}-{j}" for k in range(8) for j in range(10)}
    check_rollout_trees(spans, expected, tools_per_rollout=2)


def test_context_follows_tasks_but_not_bare_threads(span_exporter) -> None:
    """asyncio tasks inherit the rollout; a plain thread does not (see docs/instrumenting.md)."""
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    seen = {}

    async def main() -> None:
        async with arl.rollout(task_id="ctx") as info:
            seen["expected"] = info.rollout_id
            seen["task"] = await asyncio.create_task(_rollout_id())
            with ThreadPoolExecutor(1) as pool:
                seen["pool"] = pool.submit(arl.current_rollout).result()
                ctx = contextvars.copy_context()
                seen["pool+copy_context"] = pool.submit(ctx.run, arl.current_rollout).result()

    async def _rollout_id() -> str:
        return arl.current_rollout().rollout_id

    asyncio.run(main())
    assert seen["task"] == seen["expected"]
    assert seen["pool"] is None
    assert seen["pool+copy_context"].rollout_id == seen["expected"]
