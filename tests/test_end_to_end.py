"""Agents recorded into a real DuckDB file and read back through the views.

100 asyncio rollouts (an async-generator agent calling its tools) run on an event loop while 8
threads run sync rollouts of a decorated agent; every span must land under the right rollout and
the right parent, and the views must agree with what the agents did.
"""

from __future__ import annotations

import asyncio
import threading

import duckdb

import agent_rl_plugin as arl


class StreamingAgent:
    """An existing async agent: streams chunks, calls its own tools."""

    async def chat(self, messages):
        question = messages[-1]["content"]
        found = await self.search(question)
        yield {"type": "content", "content": f"found {found}; "}
        await asyncio.sleep(0)
        total = await self.count(found)
        yield {"type": "content", "content": f"count {total}"}

    async def search(self, query):
        await asyncio.sleep(0)
        return query.upper()

    async def count(self, text):
        await asyncio.sleep(0)
        return len(text)


class RecordedStreamingAgent(arl.RLAgentMixin, StreamingAgent):
    rl_tool_methods = ("search", "count")


@arl.trace_tool
def lookup(key: str) -> str:
    return key[::-1]


@arl.trace_agent(name="sync-worker")
def sync_agent(key: str) -> str:
    return lookup(key) + lookup(key + "!")


def test_asyncio_rollouts_and_threads_land_under_the_right_rollouts(db_path):
    async def one(i: int) -> str:
        async with arl.rollout(task_id=f"async-{i}", group_id=f"g{i % 10}"):
            text = ""
            async for chunk in RecordedStreamingAgent().chat([{"role": "user", "content": f"q{i}"}]):
                text += chunk["content"]
            arl.emit_reward(float(i % 2), name="parity")
            return text

    def thread_worker(k: int, out: list) -> None:
        for j in range(10):
            with arl.rollout(task_id=f"thread-{k}-{j}", group_id=f"t{k}"):
                out.append(sync_agent(f"k{k}-{j}"))

    thread_results: list[str] = []
    threads = [threading.Thread(target=thread_worker, args=(k, thread_results)) for k in range(8)]
    for thread in threads:
        thread.start()
    async def all_async() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(100)))

    async_results = asyncio.run(all_async())
    for thread in threads:
        thread.join()

    assert async_results[7] == "found Q7; count 2"
    assert len(thread_results) == 80
    assert arl.flush()
    arl.shutdown()

    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("select count(*) from rollouts").fetchone() == (180,)
    assert con.execute("select count(distinct task_id) from rollouts").fetchone() == (180,)
    # every tool call's arguments belong to its own rollout's task
    mismatched = con.execute(
        """
        select count(*) from tool_calls t join rollouts r using (rollout_id)
        where r.task_id like 'async-%'
          and t.tool_name = 'search'
          and json_extract_string(t.arguments, '$.query') <> 'q' || split_part(r.task_id, '-', 2)
        """
    ).fetchone()
    assert mismatched == (0,)
    # every tool span's parent is an agent span of the same rollout
    orphans = con.execute(
        """
        select count(*) from tool_calls t
        left join agents a on a.span_id = t.parent_span_id and a.rollout_id = t.rollout_id
        where a.span_id is null
        """
    ).fetchone()
    assert orphans == (0,)
    assert con.execute("select count(*) from tool_calls").fetchone() == (100 * 2 + 80 * 2,)
    # the streamed output is stored on the agent span; rewards landed per rollout
    output = con.execute(
        "select a.output from agents a join rollouts r using (rollout_id) where r.task_id = 'async-7'"
    ).fetchone()
    assert output == ('"found Q7; count 2"',)
    rewards = con.execute(
        "select r.task_id, w.value from rewards w join rollouts r using (rollout_id) where r.task_id in ('async-3', 'async-4') order by 1"
    ).fetchall()
    assert rewards == [("async-3", 1.0), ("async-4", 0.0)]
    steps = con.execute(
        "select step_index, kind, s.name from steps s join rollouts r using (rollout_id) "
        "where r.task_id = 'thread-3-4' order by step_index"
    ).fetchall()
    assert steps == [(0, "tool", "lookup"), (1, "tool", "lookup")]


def test_exceptions_and_tool_errors_are_queryable(db_path):
    class Flaky:
        def run(self, n):
            try:
                self.divide(n)
            except ZeroDivisionError:
                pass
            raise RuntimeError(f"gave up on {n}")

        def divide(self, n):
            return 1 / n

    arl.instrument(Flaky, tool_methods=["divide"])
    try:
        try:
            Flaky().run(0)
        except RuntimeError as exc:
            assert str(exc) == "gave up on 0"
        else:
            raise AssertionError("the agent's exception must propagate")
    finally:
        arl.uninstrument(Flaky)
    assert arl.flush()
    arl.shutdown()
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("select status, error from rollouts").fetchall()[0][0] == "error"
    assert con.execute("select tool_name, status, error_type from tool_calls").fetchall() == [
        ("divide", "error", "ZeroDivisionError")
    ]
