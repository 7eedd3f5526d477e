"""smolagents' real OpenAI-SDK-backed model (``OpenAIServerModel``) against a scripted
OpenAI-compatible server, with agent-rl's LLM client capture on (``configure()``'s default):
each model call is one ``llm_calls`` row (the integration's), not two (the integration's and the
captured OpenAI SDK call underneath)."""

from __future__ import annotations

import json

import agent_rl_smolagents as ars
import pytest
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

import agent_rl_plugin as arl
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

QUESTION = "What is 2 + 3?"


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first integer.
        b: the second integer.
    """
    return a + b


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "generate_stream"])
def test_openai_server_model_is_recorded_once_per_call(stream: bool, db_path, store) -> None:
    arl.configure(db_path=str(db_path), export_delay_ms=50)  # instrument_clients="auto": capture on
    replies = [Reply(tool_calls=[("add", {"a": 2, "b": 3})]), Reply(tool_calls=[("final_answer", {"answer": "5"})])]
    with ScriptedLLMServer(replies) as server:
        model = OpenAIServerModel(model_id="policy-1", api_base=server.openai_url, api_key="test")
        agent = ToolCallingAgent(tools=[add], model=model, verbosity_level=0, stream_outputs=stream, max_steps=3)
        ars.instrument_agent(agent)
        assert str(agent.run(QUESTION)) == "5"
        assert len(server.requests) == 2  # two model calls went over HTTP
        assert bool(server.requests[0].get("stream")) is stream

    llm = store.rows("select * from llm_calls order by start_time")
    assert [(c["request_model"], c["provider"]) for c in llm] == [("policy-1", type(model).__name__)] * 2
    (r,) = store.rows("select * from rollouts")
    assert {c["rollout_id"] for c in llm} == {r["rollout_id"]} and r["n_llm_calls"] == 2
    first_in = json.loads(llm[0]["input_messages"])
    assert [m["role"] for m in first_in] == ["system", "user"] and QUESTION in json.dumps(first_in[1])
    (first_out,) = json.loads(llm[0]["output_messages"])
    (call,) = first_out["tool_calls"]
    assert call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    (last_out,) = json.loads(llm[1]["output_messages"])
    assert last_out["tool_calls"][0]["function"]["name"] == "final_answer"

    tools = store.rows("select * from tool_calls order by start_time")
    assert [(t["tool_name"], json.loads(t["arguments"])) for t in tools] == [
        ("add", {"a": 2, "b": 3}),
        ("final_answer", {"answer": "5"}),
    ]
    assert json.loads(tools[0]["result"]) == 5 and tools[0]["call_id"] == call["id"]


def test_a_model_call_outside_the_integration_is_still_captured(db_path, store) -> None:
    """Capture is paused only around the instrumented model's calls: the same OpenAI SDK used
    directly afterwards (in the same thread) is recorded by client capture."""
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    with ScriptedLLMServer([Reply(tool_calls=[("final_answer", {"answer": "5"})]), "direct"]) as server:
        model = OpenAIServerModel(model_id="policy-1", api_base=server.openai_url, api_key="test")
        agent = ars.instrument_agent(ToolCallingAgent(tools=[add], model=model, verbosity_level=0, max_steps=2))
        with arl.rollout("two-calls"):
            assert str(agent.run(QUESTION)) == "5"
            model.client.chat.completions.create(model="direct-1", messages=[{"role": "user", "content": "hi"}])
    llm = store.rows("select request_model, provider from llm_calls order by start_time")
    assert [c["request_model"] for c in llm] == ["policy-1", "direct-1"]
