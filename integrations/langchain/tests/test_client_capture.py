"""LLM client capture (``configure()``'s ``instrument_clients="auto"``) under langchain-openai's
``ChatOpenAI``: the handler records each model run as its own ``chat`` span, and the OpenAI SDK
call underneath is captured too unless something stops it, so one model call could become two
``llm_calls`` rows. It must stay one: the handler makes its LLM span the current span while the
model runs, and the capture records nothing under an LLM span. A real ``create_react_agent``
over the real OpenAI SDK, against agent_rl_plugin's scripted server on 127.0.0.1, no API key."""

from __future__ import annotations

import asyncio
import json

import pytest
from agent_rl_langchain import AgentRLCallbackHandler, instrument_langchain
from fakes import add
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

import agent_rl_plugin as arl
from agent_rl_plugin.instrumentation.clients import instrumented_clients
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

QUESTION = {"messages": [("user", "What is 2 + 3?")]}
ANSWER = "2 + 3 = 5"


def scripted() -> ScriptedLLMServer:
    return ScriptedLLMServer([Reply(tool_calls=[("add", {"a": 2, "b": 3})]), Reply(text=ANSWER)])


def react_agent(server: ScriptedLLMServer, **model_options):
    model = ChatOpenAI(model="scripted-1", base_url=server.openai_url, api_key="test", max_retries=0, **model_options)
    return create_react_agent(model, [add], name="calculator")


def check_one_row_per_call(store) -> None:
    """Two model calls (tool call, then the answer) and one tool call, each recorded once, by the
    handler (its rows carry LangChain's run id)."""
    calls = store.rows("select l.*, s.attributes from llm_calls l join spans s using (span_id) order by l.start_time")
    assert len(calls) == 2, [(c["name"], c["provider"]) for c in calls]
    assert store.one("select count(*) from spans where name like 'chat %'") == 2
    assert all("langchain.run.id" in json.loads(c["attributes"]) for c in calls)
    assert all(c["status"] == "ok" and c["request_model"] == "scripted-1" for c in calls)
    first, second = calls
    assert json.loads(first["input_messages"]) == [{"role": "user", "content": "What is 2 + 3?"}]
    (asked,) = json.loads(first["output_messages"])[0]["tool_calls"]
    assert (asked["function"]["name"], json.loads(asked["function"]["arguments"])) == ("add", {"a": 2, "b": 3})
    history = json.loads(second["input_messages"])
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert history[2]["content"] == "5" and history[2]["tool_call_id"] == asked["id"]
    assert json.loads(second["output_messages"])[0]["content"] == ANSWER
    (tool,) = store.rows("select * from tool_calls")
    assert (tool["tool_name"], json.loads(tool["arguments"]), tool["status"]) == ("add", {"a": 2, "b": 3}, "ok")
    assert tool["call_id"] == asked["id"]
    (rollout,) = store.rows("select * from rollouts")
    assert (rollout["agent_name"], rollout["n_llm_calls"], rollout["n_tool_calls"]) == ("calculator", 2, 1)


@pytest.fixture
def capturing(db_path):
    arl.configure(db_path=str(db_path), export_delay_ms=50)  # client capture on: the default
    assert "openai" in instrumented_clients()
    return db_path


def test_invoke_is_one_row_per_model_call(capturing, store):
    with scripted() as server:
        result = react_agent(server).invoke(QUESTION, config={"callbacks": [AgentRLCallbackHandler()]})
        assert result["messages"][-1].content == ANSWER
        assert len(server.requests) == 2
    check_one_row_per_call(store)


def test_ainvoke_instrumented_is_one_row_per_model_call(capturing, store):
    instrument_langchain()
    with scripted() as server:
        result = asyncio.run(react_agent(server).ainvoke(QUESTION))
        assert result["messages"][-1].content == ANSWER
    check_one_row_per_call(store)


def test_streamed_model_is_one_row_per_model_call(capturing, store):
    """stream_mode="messages" makes LangGraph stream the model (``stream=True`` to the SDK)."""
    with scripted() as server:
        agent = react_agent(server)
        chunks = list(agent.stream(QUESTION, stream_mode="messages", config={"callbacks": [AgentRLCallbackHandler()]}))
        assert any(getattr(message, "content", "") == " 3" for message, _ in chunks)
        assert all(request.get("stream") for request in server.requests)
    check_one_row_per_call(store)


def test_model_without_handler_is_still_captured_once(capturing, store):
    """No handler: LangChain records nothing, the SDK capture records each call once."""
    with scripted() as server, arl.rollout("plain"):
        assert react_agent(server).invoke(QUESTION)["messages"][-1].content == ANSWER
    calls = store.rows("select * from llm_calls order by start_time")
    assert [(c["provider"], c["request_model"]) for c in calls] == [("openai", "scripted-1")] * 2
    (asked,) = json.loads(calls[0]["output_messages"])[0]["tool_calls"]
    assert asked["function"]["name"] == "add"
