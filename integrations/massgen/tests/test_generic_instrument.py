"""The generic entry points find this integration (the ``agent_rl_instrument_object`` hook):
``class A(arl.RLAgentMixin, SingleAgent)``, ``class O(arl.RLOrchestratorMixin, Orchestrator)`` and
``arl.instrument(obj)`` record what ``MassGenAgentMixin`` / ``MassGenOrchestratorMixin`` record
(real MassGen classes, scripted backends, a real DuckDB store), and ``arl.uninstrument`` undoes it."""

from __future__ import annotations

import asyncio
import importlib
import re
from collections import Counter

import pytest
from massgen.chat_agent import SingleAgent
from massgen.orchestrator import Orchestrator

import agent_rl_massgen as arm
import agent_rl_plugin as arl
from agent_rl_plugin import plugins
from fakes import ScriptedBackend, content, executed_tool, reasoning, two_agent_scripts

PROMPT = [{"role": "user", "content": "find x"}]
QUESTION = [{"role": "user", "content": "What is 2+2?"}]


def script() -> list:
    return [[reasoning("hmm"), *executed_tool("search", {"q": "x"}, "found x", "t1"), content("Done: x")]]


@pytest.fixture
def massgen_plugin():
    """The integration's entry-point plugin, installed as an entry point would install it."""
    plugin = importlib.import_module("agent_rl_massgen.plugin")
    plugins.get_plugin_manager().register(plugin, name="massgen")
    return plugin


@pytest.fixture
def recording(db_path, massgen_plugin):
    arl.configure(db_path=str(db_path), export_delay_ms=50)


def solo_class(mixin: type) -> type:
    """``class Solo(mixin, SingleAgent)``: same class name, so agent spans are named alike."""
    return type("Solo", (mixin, SingleAgent), {})


def chat(agent, messages=PROMPT) -> list:
    async def go():
        return [c async for c in agent.chat(messages)]

    return asyncio.run(go())


def ours(obj) -> set:
    """What instrumenting left in ``vars(obj)`` (MassGen keeps its own turn state there too)."""
    return {k for k in vars(obj) if "agent_rl" in k or k in ("chat", "stream_with_tools", "_add_event")}


def last_rollout(store) -> str:
    return store.rows("select rollout_id from rollouts order by start_time desc limit 1")[0]["rollout_id"]


def recorded(store, rollout_id: str) -> dict:
    """What one rollout stored, without ids and times; agent span names as ``invoke_agent *``."""

    def name(n):
        return "invoke_agent *" if n and n.startswith("invoke_agent ") else n

    spans = store.rows(
        "select s.name, s.span_kind, p.name as parent from spans s left join spans p "
        "on s.parent_span_id = p.span_id and s.trace_id = p.trace_id where s.rollout_id = ?",
        rollout_id,
    )
    tree = Counter((name(s["name"]), s["span_kind"], name(s["parent"])) for s in spans)
    llm = store.rows(
        "select request_model, provider, input_messages, output_messages, reasoning, input_tokens, output_tokens, "
        "state_key, status from llm_calls where rollout_id = ? order by start_time",
        rollout_id,
    )
    tools = store.rows(
        "select tool_name, call_id, arguments, result, status from tool_calls where rollout_id = ? order by start_time",
        rollout_id,
    )
    events = Counter(
        (e["event_type"], e["agent_id"])
        for e in store.rows("select event_type, agent_id from events where rollout_id = ?", rollout_id)
    )
    return {"tree": tree, "llm": llm, "tools": tools, "events": events}


def massgen_mixin_baseline(store) -> dict:
    chat(solo_class(arm.MassGenAgentMixin)(backend=ScriptedBackend(script()), agent_id="solo"))
    return recorded(store, last_rollout(store))


def test_generic_mixin_records_what_the_massgen_mixin_records(recording, store):
    expected = massgen_mixin_baseline(store)
    agent = solo_class(arl.RLAgentMixin)(backend=ScriptedBackend(script()), agent_id="solo")
    chat(agent)
    got = recorded(store, last_rollout(store))
    assert got == expected
    assert expected["tree"] == Counter(
        {
            ("invoke_agent *", "agent", None): 1,
            ("chat scripted-model", "llm", "invoke_agent *"): 1,
            ("execute_tool search", "tool", "invoke_agent *"): 1,
        }
    )
    (call,) = got["llm"]
    assert (call["input_tokens"], call["output_tokens"], call["reasoning"]) == (12, 7, "hmm")
    assert [t["tool_name"] for t in got["tools"]] == ["search"]
    assert "stream_with_tools" in vars(agent.backend)
    arl.uninstrument(agent)  # the claim's undo: the backend is MassGen's own again
    assert ours(agent) == set() and ours(agent.backend) == set()


def test_instrument_an_existing_agent_and_undo(recording, store):
    expected = massgen_mixin_baseline(store)
    agent = SingleAgent(backend=ScriptedBackend(script() + script()), agent_id="solo")
    assert arl.instrument(agent) is agent
    arl.instrument(agent)  # idempotent
    chat(agent)
    assert recorded(store, last_rollout(store)) == expected
    n_spans = store.one("select count(*) from spans")
    arl.uninstrument(agent)
    assert ours(agent) == set() and ours(agent.backend) == set()
    chat(agent)  # MassGen as without the plugin: nothing more is recorded
    assert store.one("select count(*) from spans") == n_spans


def test_without_the_plugin_only_the_agent_span_is_recorded(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    chat(solo_class(arl.RLAgentMixin)(backend=ScriptedBackend(script()), agent_id="solo"))
    assert recorded(store, last_rollout(store))["tree"] == Counter({("invoke_agent *", "agent", None): 1})


def test_enable_rl_false_leaves_massgen_untouched(recording, store):
    agent = solo_class(arl.RLAgentMixin)(backend=ScriptedBackend(script()), agent_id="solo", enable_rl=False)
    assert ours(agent.backend) == set()
    assert chat(agent)


def orchestrator_run(store, make) -> dict:
    agents = {name: SingleAgent(backend=ScriptedBackend(s), agent_id=name) for name, s in two_agent_scripts().items()}
    orchestrator = make(agents)
    chat(orchestrator, QUESTION)
    got = recorded(store, last_rollout(store))
    # MassGen runs its agents concurrently: compare what was recorded, not its interleaving; the
    # scripted tool-call ids come from one counter (fakes.tool_call), so they differ between runs
    got["llm"] = sorted(re.sub(r"call_\d+", "call_N", repr(sorted(c.items()))) for c in got["llm"])
    return got, orchestrator, agents


def test_generic_orchestrator_mixin_records_what_the_massgen_mixin_records(recording, store):
    expected, *_ = orchestrator_run(
        store, lambda agents: type("Orch", (arm.MassGenOrchestratorMixin, Orchestrator), {})(agents=agents)
    )
    got, orchestrator, agents = orchestrator_run(
        store, lambda agents: type("Orch", (arl.RLOrchestratorMixin, Orchestrator), {})(agents=agents)
    )
    assert got == expected
    assert len(got["llm"]) == 6 and len(got["tools"]) == 1
    assert (
        got["events"][("final_answer", "agent_a")] == 1
        and sum(n for (e, _), n in got["events"].items() if e == "vote") == 3
    )
    arl.uninstrument(orchestrator)  # its tracker and the agents it instrumented are MassGen's own again
    assert ours(orchestrator) == set() and ours(orchestrator.coordination_tracker) == set()
    for agent in agents.values():
        assert ours(agent) == set() and ours(agent.backend) == set()


def test_instrument_an_existing_orchestrator(recording, store):
    expected, *_ = orchestrator_run(store, lambda agents: arm.RLOrchestrator(agents=agents))
    got, orchestrator, agents = orchestrator_run(store, lambda agents: arl.instrument(Orchestrator(agents=agents)))
    assert {k: v for k, v in got.items() if k != "tree"} == {k: v for k, v in expected.items() if k != "tree"}
    assert got["tree"] == expected["tree"]
    arl.uninstrument(orchestrator)
    assert "chat" not in vars(orchestrator)
    assert ours(orchestrator) == set() and ours(orchestrator.coordination_tracker) == set()
    for agent in agents.values():
        assert ours(agent) == set() and ours(agent.backend) == set()
