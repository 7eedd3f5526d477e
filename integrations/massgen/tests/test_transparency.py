"""Recording never changes what MassGen does: the same script run with and without the plugin
yields identical chunks and the same final answer, and the models are asked the same things.

MassGen runs its agents concurrently: how the chunks of two agents interleave in the
orchestrator's stream is decided by its scheduling and differs between two runs *without* the
plugin too. So the orchestrator's stream is compared per source (the orchestrator's own chunks,
and each agent's, in order) and as a whole multiset; a single agent's stream is compared exactly.
"""

from __future__ import annotations

import asyncio
import dataclasses

from massgen.chat_agent import SingleAgent
from massgen.orchestrator import Orchestrator

import agent_rl_massgen as arm
from fakes import ScriptedBackend, content, executed_tool, reasoning, two_agent_scripts

QUESTION = [{"role": "user", "content": "What is 2+2?"}]


def _view(chunk) -> dict:
    return dataclasses.asdict(chunk) if dataclasses.is_dataclass(chunk) else dict(vars(chunk))


def _by_source(chunks: list[dict]) -> dict:
    grouped: dict = {}
    for chunk in chunks:
        grouped.setdefault(chunk["source"], []).append(chunk)
    return grouped


def _sorted(chunks: list[dict]) -> list[str]:
    return sorted(repr(sorted(c.items())) for c in chunks)


def _run(make_orchestrator) -> tuple[list[dict], str | None, list]:
    agents = {name: SingleAgent(backend=ScriptedBackend(script), agent_id=name) for name, script in two_agent_scripts().items()}
    orchestrator = make_orchestrator(agents)

    async def go():
        return [chunk async for chunk in orchestrator.chat(QUESTION)]

    chunks = asyncio.run(go())
    tracker = orchestrator.coordination_tracker
    final = next(iter(tracker.final_answers.values())).content if tracker.final_answers else None
    received = {name: agent.backend.received for name, agent in agents.items()}
    return [_view(c) for c in chunks], (tracker.final_winner, final), received


def test_orchestrator_output_identical_with_and_without_recording(db_path, store):
    plain_chunks, plain_final, plain_received = _run(lambda agents: Orchestrator(agents=agents))
    rec_chunks, rec_final, rec_received = _run(
        lambda agents: arm.RLOrchestrator(agents=agents, rl_config=arm.RLConfig(db_path=str(db_path), export_delay_ms=50))
    )
    assert _by_source(rec_chunks) == _by_source(plain_chunks)
    assert _sorted(rec_chunks) == _sorted(plain_chunks)
    assert len(rec_chunks) == len(plain_chunks)
    assert rec_final == plain_final == ("agent_a", "Final answer: 4")
    assert rec_received == plain_received  # the models were asked exactly the same things
    assert store.rows("select count(*) as n from llm_calls")[0]["n"] == 6  # and it was recorded


def test_single_agent_output_identical(db_path, store):
    script = [[reasoning("hmm"), *executed_tool("search", {"q": "x"}, "found x", "t1"), content("Done: x")]]

    async def go(agent):
        return [_view(c) async for c in agent.chat([{"role": "user", "content": "find x"}])]

    plain = asyncio.run(go(SingleAgent(backend=ScriptedBackend(script), agent_id="solo")))
    recorded = asyncio.run(go(arm.RLSingleAgent(backend=ScriptedBackend(script), agent_id="solo",
                                                rl_config=arm.RLConfig(db_path=str(db_path), export_delay_ms=50))))
    assert recorded == plain
    assert store.rows("select count(*) as n from tool_calls")[0]["n"] == 1


def test_early_close_is_forwarded(db_path, store):
    """Closing the agent's stream early closes MassGen's stream too; the turn is still recorded."""
    backend = ScriptedBackend([[content("a"), content("b"), content("c")]])
    agent = arm.RLSingleAgent(backend=backend, agent_id="solo", rl_config=arm.RLConfig(db_path=str(db_path), export_delay_ms=50))

    async def go():
        stream = agent.chat([{"role": "user", "content": "hi"}])
        first = await stream.__anext__()
        await stream.aclose()
        return first

    assert asyncio.run(go()).content == "a"
    (call,) = store.rows("select output_messages from llm_calls")
    assert '"a"' in call["output_messages"]
    (agent,) = store.rows("""select attributes->>'$."agent_rl.stream.outcome"' as outcome from spans where span_kind = 'agent'""")
    assert agent["outcome"] == "closed"
    assert backend.script == []  # MassGen's own stream was closed, not left running
