"""LLM client capture (``configure()``'s ``instrument_clients="auto"``) under pydantic-ai's real
OpenAI models: pydantic-ai records each model request as its own ``chat`` span, the OpenAI SDK
call underneath is captured too unless something stops it, so one model call could become two
``llm_calls`` rows. It must stay one: pydantic-ai's ``chat`` span is the current span while the
SDK call runs, and the capture records nothing under an LLM span. Against agent_rl_plugin's
scripted server on 127.0.0.1 (real HTTP, real OpenAI SDK), no API key."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

import agent_rl_plugin as arl
from agent_rl_plugin.instrumentation.clients import instrumented_clients
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

QUESTION = "What is 6/3?"
ANSWER = "6/3 = 2"


def scripted() -> ScriptedLLMServer:
    return ScriptedLLMServer([Reply(tool_calls=[("divide", {"a": 6, "b": 3})]), Reply(text=ANSWER)])


def divide_agent(model_class: type, server: ScriptedLLMServer) -> Agent:
    model = model_class("scripted-1", provider=OpenAIProvider(base_url=server.openai_url, api_key="test"))
    agent = Agent(model, name="calc", instructions="Answer with the tools.")

    @agent.tool_plain
    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    return agent


def parts(messages_json: str) -> list[dict]:
    return [p for m in json.loads(messages_json) for p in m.get("parts", [])]


def check_one_row_per_call(store) -> None:
    """Two model calls (tool call, then the answer) and one tool call, each recorded once."""
    calls = store.rows("select * from llm_calls order by start_time")
    assert len(calls) == 2, [(c["name"], c["provider"]) for c in calls]
    assert store.one("select count(*) from spans where name like 'chat %'") == 2
    assert [c["operation"] for c in calls] == ["chat", "chat"]
    assert all(c["status"] == "ok" and c["request_model"] == "scripted-1" for c in calls)
    first_in, first_out = parts(calls[0]["input_messages"]), parts(calls[0]["output_messages"])
    assert {"type": "text", "content": QUESTION} in first_in
    (asked,) = [p for p in first_out if p["type"] == "tool_call"]
    arguments = asked["arguments"]  # as the model sent it: a JSON string from the OpenAI API
    assert (asked["name"], json.loads(arguments) if isinstance(arguments, str) else arguments) == (
        "divide",
        {"a": 6, "b": 3},
    )
    assert any(p["type"] == "tool_call_response" and p["response"] == 2.0 for p in parts(calls[1]["input_messages"]))
    assert {"type": "text", "content": ANSWER} in parts(calls[1]["output_messages"])
    (tool,) = store.rows("select * from tool_calls")
    assert (tool["tool_name"], json.loads(tool["arguments"]), tool["status"]) == ("divide", {"a": 6, "b": 3}, "ok")
    assert tool["call_id"] == asked["id"]
    (rollout,) = store.rows("select * from rollouts")
    assert (rollout["agent_name"], rollout["n_llm_calls"], rollout["n_tool_calls"]) == ("calc", 2, 1)
    assert rollout["output"] == ANSWER


@pytest.mark.parametrize("model_class", [OpenAIChatModel, OpenAIResponsesModel])
def test_openai_model_run_is_one_row_per_model_call(db_path, store, model_class):
    arl.configure(db_path=str(db_path), export_delay_ms=50)  # client capture on: the default
    assert "openai" in instrumented_clients()
    with scripted() as server:
        assert divide_agent(model_class, server).run_sync(QUESTION).output == ANSWER
        assert len(server.requests) == 2
    check_one_row_per_call(store)


def test_streamed_run_is_one_row_per_model_call(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50)

    async def go(agent: Agent) -> str:
        async with agent.run_stream(QUESTION) as run:
            return await run.get_output()

    with scripted() as server:
        assert asyncio.run(go(divide_agent(OpenAIChatModel, server))) == ANSWER
        assert all(request.get("stream") for request in server.requests)
    check_one_row_per_call(store)


def test_agent_not_instrumented_is_still_captured_once(db_path, store):
    """An agent whose pydantic-ai instrumentation is off records no ``chat`` span of its own:
    the SDK capture then records each call, once."""
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    with scripted() as server:
        agent = divide_agent(OpenAIChatModel, server)
        agent.instrument = False
        with arl.rollout("quiet"):
            assert agent.run_sync(QUESTION).output == ANSWER
    calls = store.rows("select * from llm_calls order by start_time")
    assert [(c["provider"], c["request_model"]) for c in calls] == [("openai", "scripted-1")] * 2
    (asked,) = json.loads(calls[0]["output_messages"])[0]["tool_calls"]
    assert (asked["function"]["name"], json.loads(asked["function"]["arguments"])) == ("divide", {"a": 6, "b": 3})
    assert store.one("select count(*) from tool_calls") == 0  # pydantic-ai's tool spans are off too
