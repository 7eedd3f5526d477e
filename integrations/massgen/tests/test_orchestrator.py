"""A two-agent MassGen run (real Orchestrator and SingleAgents, scripted backends) recorded
into DuckDB: what lands in the rollouts / llm_calls / tool_calls / events views."""

from __future__ import annotations

import asyncio
import json

from massgen.chat_agent import SingleAgent

import agent_rl_massgen as arm
from fakes import ScriptedBackend, two_agent_scripts

QUESTION = [{"role": "user", "content": "What is 2+2?"}]


async def _collect(stream) -> list:
    return [chunk async for chunk in stream]


def run_recorded(db_path, **config) -> tuple[list, dict]:
    agents = {name: SingleAgent(backend=ScriptedBackend(script), agent_id=name) for name, script in two_agent_scripts().items()}
    orchestrator = arm.RLOrchestrator(agents=agents, rl_config=arm.RLConfig(db_path=str(db_path), export_delay_ms=50, **config))
    chunks = asyncio.run(_collect(orchestrator.chat(QUESTION)))
    return chunks, agents


def test_one_rollout_with_the_orchestrator_as_root(db_path, store):
    run_recorded(db_path)
    rollouts = store.rows("select * from rollouts")
    assert len(rollouts) == 1
    r = rollouts[0]
    assert r["status"] == "ok"
    assert r["agent_name"] == "RLOrchestrator"
    assert r["n_llm_calls"] == 6  # agent_a: answer, vote, vote again, final; agent_b: answer, vote
    assert r["n_tool_calls"] == 1
    assert (r["input_tokens"], r["output_tokens"]) == (6 * 12, 6 * 7)
    agents = store.rows("select agent_name, agent_id, role from agents order by start_time")
    assert agents[0]["role"] == "orchestrator"
    assert {a["agent_id"] for a in agents[1:]} == {"agent_a", "agent_b"}


def test_llm_calls_have_messages_content_reasoning_tool_calls_and_usage(db_path, store):
    run_recorded(db_path)
    calls = store.rows("select * from llm_calls order by start_time")
    assert {c["request_model"] for c in calls} == {"scripted-model"}
    assert {c["provider"] for c in calls} == {"scripted"}
    first_a = next(c for c in calls if "Add two and two." in (c["reasoning"] or ""))
    out = json.loads(first_a["output_messages"])
    assert out[-1]["content"] == "2+2 = 4."
    assert out[-1]["tool_calls"][0]["name"] == "new_answer"
    assert out[-1]["tool_calls"][0]["arguments"] == {"content": "The answer is 4."}
    messages = json.loads(first_a["input_messages"])
    assert any("What is 2+2?" in str(m.get("content")) for m in messages)
    assert (first_a["input_tokens"], first_a["output_tokens"]) == (12, 7)
    votes = [c for c in calls if c["output_messages"] and '"vote"' in c["output_messages"]]
    assert len(votes) == 3
    assert all(c["state_key"] and c["state_key"].startswith("massgen:") for c in calls)


def test_executed_tool_call_with_arguments_and_result(db_path, store):
    run_recorded(db_path)
    (tool,) = store.rows("select * from tool_calls")
    assert tool["tool_name"] == "calculator"
    assert tool["call_id"] == "tool_a1"
    assert json.loads(tool["arguments"]) == {"expression": "2+2"}
    assert json.loads(tool["result"]) == "4"
    assert tool["status"] == "ok"


def test_coordination_events(db_path, store):
    run_recorded(db_path)
    events = store.rows("select event_type, agent_id, target, reason, content, round, data from events order by time, event_index")
    kinds = [e["event_type"] for e in events]
    answers = [e for e in events if e["event_type"] == "new_answer"]
    assert {(e["agent_id"], e["content"], e["round"]) for e in answers} == {
        ("agent_a", "The answer is 4.", 0),
        ("agent_b", "It is 4.", 0),
    }
    votes = [e for e in events if e["event_type"] == "vote"]
    assert len(votes) == 3
    assert all(v["target"] == "agent_a" and v["round"] == 1 for v in votes)
    assert {(v["agent_id"], v["reason"]) for v in votes} == {
        ("agent_a", "It shows the computation."),
        ("agent_b", "More complete than mine."),
    }
    assert json.loads(votes[0]["data"])["voted_for_label"] == "agent1.1"
    restarts = [e for e in events if e["event_type"] == "restart"]
    assert {e["agent_id"] for e in restarts} == {"agent_a", "agent_b"}
    assert "restart_completed" in kinds and "final_agent_selected" in kinds
    (final,) = [e for e in events if e["event_type"] == "final_answer"]
    assert final["agent_id"] == "agent_a"
    assert final["content"] == "Final answer: 4"
    assert final["round"] is None and json.loads(final["data"])["final_round"] == 2
    assert kinds.index("final_answer") > max(i for i, k in enumerate(kinds) if k == "vote")
    assert not {"status_change", "iteration_start", "session_start"} & set(kinds)


def test_steps_view_orders_the_run(db_path, store):
    run_recorded(db_path)
    steps = store.rows("select kind, name from steps order by step_index")
    assert {s["kind"] for s in steps} == {"llm", "tool", "event"}
    assert steps[-1]["name"] in ("final_answer", "final_agent_selected") or steps[-1]["kind"] == "llm"
