"""A tool-calling agent (``langgraph.prebuilt.create_react_agent``) recorded through the handler:
LLM calls with messages, tokens and requested tool calls, tool calls with arguments, results and
errors, the steps in order, the final answer, sync and async and streamed."""

from __future__ import annotations

import asyncio
import json

import pytest
from langgraph.prebuilt import ToolNode, create_react_agent

from agent_rl_langchain import AgentRLCallbackHandler
from fakes import ScriptedChatModel, add, calculator_script, lookup

QUESTION = {"messages": [("user", "What is 2 + 3, and the weather in Atlantis?")]}


def make_agent(script=None, handle_tool_errors=True):
    model = ScriptedChatModel(script=calculator_script() if script is None else script)
    tools = ToolNode([add, lookup], handle_tool_errors=handle_tool_errors)
    return create_react_agent(model, tools, name="calculator"), model


def check_views(store) -> None:
    (rollout,) = store.rows("select * from rollouts")
    assert rollout["name"] == "invoke_agent calculator" and rollout["agent_name"] == "calculator"
    assert rollout["status"] == "ok"
    assert (rollout["n_llm_calls"], rollout["n_tool_calls"], rollout["n_tool_errors"]) == (2, 2, 1)
    assert (rollout["input_tokens"], rollout["output_tokens"]) == (52, 18)
    assert json.loads(rollout["input"]) == {"messages": [["user", "What is 2 + 3, and the weather in Atlantis?"]]}
    assert json.loads(rollout["output"])["messages"][-1]["content"] == "2 + 3 = 5, and Atlantis was not found."

    first, second = store.rows("select * from llm_calls order by start_time")
    assert first["request_model"] == "scripted-model" and first["provider"] == "scriptedchatmodel"  # LangChain derives ls_provider from the class name
    assert (first["input_tokens"], first["output_tokens"]) == (12, 7)
    assert json.loads(first["input_messages"]) == [{"role": "user", "content": "What is 2 + 3, and the weather in Atlantis?"}]
    (asked,) = json.loads(first["output_messages"])
    assert asked["role"] == "assistant"
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in asked["tool_calls"]] == [
        ("call_add", "add", {"a": 2, "b": 3}), ("call_lookup", "lookup", {"city": "Atlantis"})]
    assert json.loads(first["finish_reasons"]) == ["tool_calls"]
    history = json.loads(second["input_messages"])
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool"]
    assert history[2] == {"role": "tool", "content": "5", "name": "add", "tool_call_id": "call_add"}
    assert json.loads(second["output_messages"]) == [{"role": "assistant", "content": "2 + 3 = 5, and Atlantis was not found."}]

    tools = {r["tool_name"]: r for r in store.rows("select * from tool_calls")}
    assert tools["add"]["call_id"] == "call_add" and json.loads(tools["add"]["arguments"]) == {"a": 2, "b": 3}
    assert json.loads(tools["add"]["result"]) == "5" and tools["add"]["status"] == "ok"
    assert tools["lookup"]["status"] == "error" and tools["lookup"]["error_type"] == "ValueError"
    assert tools["lookup"]["error"] == "ValueError: no such city: Atlantis"
    assert json.loads(tools["lookup"]["arguments"]) == {"city": "Atlantis"}

    steps = store.rows("select kind, name from steps order by step_index")
    assert [(s["kind"], s["name"]) for s in steps[:2]] == [("llm", "scripted-model"), ("tool", "add")] or \
        [(s["kind"], s["name"]) for s in steps[:2]] == [("llm", "scripted-model"), ("tool", "lookup")]
    assert [s["kind"] for s in steps] == ["llm", "tool", "tool", "llm", "event"]
    (event,) = store.rows("select * from events")
    assert (event["event_type"], event["agent_id"]) == ("final_answer", "calculator")
    assert event["content"] == "2 + 3 = 5, and Atlantis was not found."

    (agent,) = store.rows("select * from agents")
    assert agent["is_rollout_root"] and agent["agent_name"] == "calculator"
    # every span of the run is in the rollout and in one trace, under the root
    assert store.one("select count(distinct rollout_id) from spans") == 1
    assert store.one("select count(distinct trace_id) from spans") == 1
    assert store.one("select count(*) from spans where parent_span_id is null") == 1


def test_invoke(recording, store):
    agent, _ = make_agent()
    result = agent.invoke(QUESTION, config={"callbacks": [AgentRLCallbackHandler()]})
    assert result["messages"][-1].content == "2 + 3 = 5, and Atlantis was not found."
    check_views(store)


def test_ainvoke(recording, store):
    agent, _ = make_agent()
    result = asyncio.run(agent.ainvoke(QUESTION, config={"callbacks": [AgentRLCallbackHandler()]}))
    assert result["messages"][-1].content == "2 + 3 = 5, and Atlantis was not found."
    check_views(store)


def test_astream_messages_mode_streams_the_model(recording, store):
    """stream_mode="messages" makes LangGraph stream the model: the LLM call is still one row
    with the whole text and the tool calls assembled from the chunks."""
    agent, _ = make_agent()

    async def go():
        return [chunk async for chunk in agent.astream(QUESTION, stream_mode="messages",
                                                       config={"callbacks": [AgentRLCallbackHandler()]})]

    chunks = asyncio.run(go())
    assert any(getattr(message, "content", "") == " 5," for message, _ in chunks)
    check_views(store)


def test_failing_tool_without_error_handling_propagates(recording, store):
    agent, _ = make_agent(handle_tool_errors=False)
    with pytest.raises(ValueError, match="no such city: Atlantis"):
        agent.invoke(QUESTION, config={"callbacks": [AgentRLCallbackHandler()]})
    (rollout,) = store.rows("select status, error, n_tool_errors from rollouts")
    assert rollout == {"status": "error", "error": "ValueError: no such city: Atlantis", "n_tool_errors": 1}
    (tool,) = store.rows("select status, error_type from tool_calls where tool_name = 'lookup'")
    assert tool == {"status": "error", "error_type": "ValueError"}
    assert store.rows("select * from events") == []  # no final answer


def test_model_error_is_recorded(recording, store):
    agent, _ = make_agent(script=[])  # the model raises on its first call
    with pytest.raises(RuntimeError, match="no more answers"):
        agent.invoke(QUESTION, config={"callbacks": [AgentRLCallbackHandler()]})
    (call,) = store.rows("select status, error_type from llm_calls")
    assert call == {"status": "error", "error_type": "RuntimeError"}


def test_stream_closed_early(recording, store):
    """Leaving a stream after its first update: LangGraph closes the graph run; the rollout is
    recorded as cancelled (the agent stopped before its end) and nothing is left current."""
    agent, model = make_agent()
    stream = agent.stream(QUESTION, config={"callbacks": [AgentRLCallbackHandler()]}, stream_mode="updates")
    first = next(stream)
    stream.close()
    assert "agent" in first
    (rollout,) = store.rows("select status, n_llm_calls from rollouts")
    assert rollout == {"status": "cancelled", "n_llm_calls": 1}
    assert store.one("select count(*) from spans where end_time is null") == 0
