"""The SDK's own OpenAI models against a scripted OpenAI-compatible server, with agent-rl's LLM
client capture on (``configure()``'s default): each model call is one ``llm_calls`` row (the
processor's), not two (the processor's and the captured OpenAI SDK call underneath)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import agent_rl_openai_agents as arl_oa
import pytest
from agents import Agent, ModelSettings, Runner, function_tool
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from agent_rl_plugin import configure
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

QUESTION = "What is 2 + 3?"
ANSWER = "2 + 3 = 5."


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _model(kind: str, server: ScriptedLLMServer) -> Any:
    client = AsyncOpenAI(base_url=server.openai_url, api_key="test", max_retries=0)
    if kind == "responses":
        return OpenAIResponsesModel(model="policy-1", openai_client=client)
    return OpenAIChatCompletionsModel(model="policy-1", openai_client=client)


@pytest.mark.parametrize("stream", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("kind", ["responses", "chat_completions"])
def test_sdk_openai_model_is_recorded_once_per_call(kind: str, stream: bool, db_path, store) -> None:
    configure(db_path=str(db_path), export_delay_ms=50)  # instrument_clients="auto": capture on
    arl_oa.instrument(exclusive=True)
    replies = [Reply(tool_calls=[("add", {"a": 2, "b": 3})]), Reply(text=ANSWER)]
    with ScriptedLLMServer(replies) as server:
        agent = Agent(
            name="calc",
            instructions="Use the tools.",
            model=_model(kind, server),
            model_settings=ModelSettings(temperature=0.0),
            tools=[add],
        )
        if stream:

            async def streamed() -> Any:
                run = Runner.run_streamed(agent, QUESTION)
                async for _ in run.stream_events():
                    pass
                return run

            result = asyncio.run(streamed())
        else:
            result = Runner.run_sync(agent, QUESTION)
        assert len(server.requests) == 2  # two model calls went over HTTP
        sent = server.requests[0]
    assert result.final_output == ANSWER

    llm = store.rows("select * from llm_calls order by start_time")
    assert len(llm) == 2, [(c["name"], c["request_model"]) for c in llm]  # one row per model call
    (r,) = store.rows("select * from rollouts")
    assert {c["rollout_id"] for c in llm} == {r["rollout_id"]} and r["n_llm_calls"] == 2
    first_in = json.loads(llm[0]["input_messages"])
    if kind == "chat_completions":
        assert first_in[0] == {"role": "system", "content": "Use the tools."}
    else:  # the Responses API's instructions are read from the response, which this server does not echo
        assert sent["instructions"] == "Use the tools."
    assert {"role": "user", "content": QUESTION} in first_in
    (first_out,) = json.loads(llm[0]["output_messages"])
    (tool_call,) = first_out["tool_calls"]
    assert tool_call["function"]["name"] == "add"
    assert json.loads(tool_call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert any(m.get("role") == "tool" and m.get("content") == "5" for m in json.loads(llm[1]["input_messages"]))
    assert ANSWER in llm[1]["output_messages"]

    tools = store.rows("select * from tool_calls")
    assert [(t["tool_name"], json.loads(t["arguments"]), json.loads(t["result"])) for t in tools] == [
        ("add", {"a": 2, "b": 3}, 5)
    ]
    assert tools[0]["call_id"] == tool_call["id"]


def test_disabled_sdk_tracing_leaves_the_call_to_client_capture(db_path, store) -> None:
    """With the run's tracing off no processor sees the call: the captured SDK call is its row."""
    from agents import RunConfig

    configure(db_path=str(db_path), export_delay_ms=50)
    arl_oa.instrument(exclusive=True)
    with ScriptedLLMServer([Reply(text=ANSWER)]) as server:
        agent = Agent(name="calc", model=_model("chat_completions", server))
        result = Runner.run_sync(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == ANSWER
    (row,) = store.rows("select * from llm_calls")
    assert row["request_model"] == "policy-1" and ANSWER in row["output_messages"]


@pytest.mark.parametrize("stream", [False, True], ids=["run", "streamed"])
def test_llm_call_made_by_a_tool_is_still_captured(stream: bool, db_path, store) -> None:
    """Capture is paused only while the SDK's model call runs: an OpenAI call a tool makes
    (after the model's call ended, in the same run) is recorded, in the caller's rollout."""
    from openai import OpenAI

    from agent_rl_plugin import rollout

    configure(db_path=str(db_path), export_delay_ms=50)
    arl_oa.instrument(exclusive=True)
    replies = [Reply(tool_calls=[("ask_expert", {"q": "2+3"})]), Reply(text="5"), Reply(text=ANSWER)]
    with ScriptedLLMServer(replies) as server:
        expert = OpenAI(base_url=server.openai_url, api_key="test", max_retries=0)

        @function_tool
        async def ask_expert(q: str) -> str:
            """Ask an expert model."""
            reply = expert.chat.completions.create(model="expert-1", messages=[{"role": "user", "content": q}])
            return reply.choices[0].message.content or ""

        agent = Agent(name="calc", model=_model("chat_completions", server), tools=[ask_expert])

        async def run() -> Any:
            with rollout("tool-llm"):
                if not stream:
                    return await Runner.run(agent, QUESTION)
                streamed = Runner.run_streamed(agent, QUESTION)
                async for _ in streamed.stream_events():
                    pass
                return streamed

        result = asyncio.run(run())
    assert result.final_output == ANSWER
    llm = store.rows("select request_model, rollout_id from llm_calls order by start_time")
    assert [c["request_model"] for c in llm] == ["policy-1", "expert-1", "policy-1"]
    assert len({c["rollout_id"] for c in llm}) == 1


def test_capture_is_paused_exactly_while_an_sdk_llm_span_is_open(db_path, store) -> None:
    """A call made inside an SDK generation span is that span's (not captured); one made after
    it ended, in the same context, is captured."""
    from agents import generation_span, trace
    from openai import OpenAI

    configure(db_path=str(db_path), export_delay_ms=50)
    arl_oa.instrument(exclusive=True)
    with ScriptedLLMServer(["inside", "after"]) as server:
        client = OpenAI(base_url=server.openai_url, api_key="test", max_retries=0)
        with trace("manual"):
            with generation_span(model="framework-model", input=[{"role": "user", "content": "hi"}]) as span:
                client.chat.completions.create(model="inside-1", messages=[{"role": "user", "content": "hi"}])
                span.span_data.output = [{"role": "assistant", "content": "inside"}]
            client.chat.completions.create(model="after-1", messages=[{"role": "user", "content": "again"}])
    llm = store.rows("select request_model from llm_calls order by start_time")
    assert [c["request_model"] for c in llm] == ["framework-model", "after-1"]
