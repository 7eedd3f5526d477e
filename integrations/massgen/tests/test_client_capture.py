"""MassGen's real OpenAI-SDK-backed chat-completions backend against a scripted
OpenAI-compatible server, with agent-rl's LLM client capture on (``configure()``'s default):
each model call is one ``llm_calls`` row (the integration's, from the backend's stream), not two
(the integration's and the captured OpenAI SDK call underneath)."""

from __future__ import annotations

import asyncio
import json

import agent_rl_massgen as arm
from massgen.backend.chat_completions import ChatCompletionsBackend
from massgen.chat_agent import SingleAgent
from massgen.tool._result import ExecutionResult, TextContent

import agent_rl_plugin as arl
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]


async def add_numbers(x: int, y: int) -> ExecutionResult:
    """Add two numbers.

    Args:
        x: First number
        y: Second number
    """
    return ExecutionResult(output_blocks=[TextContent(data=str(x + y))])


def _chat(agent, messages=PROMPT) -> list:
    async def go():
        return [c async for c in agent.chat(messages)]

    return asyncio.run(go())


def test_chat_completions_backend_is_recorded_once_per_call(db_path, store) -> None:
    arl.configure(db_path=str(db_path), export_delay_ms=50)  # instrument_clients="auto": capture on
    replies = [Reply(tool_calls=[("custom_tool__add_numbers", {"x": 2, "y": 3})]), Reply(text="2 + 3 = 5.")]
    with ScriptedLLMServer(replies) as server:
        backend = ChatCompletionsBackend(
            api_key="test",
            base_url=server.openai_url,
            model="policy-1",
            custom_tools=[{"func": add_numbers, "description": "Add two numbers."}],
        )
        agent = arm.instrument_agent(SingleAgent(backend=backend, agent_id="solo"))
        chunks = _chat(agent)
        assert len(server.requests) == 2  # the backend's tool loop: two model requests in one stream
    assert "2 + 3 = 5." in "".join(str(getattr(c, "content", "") or "") for c in chunks)

    # One row for the one stream_with_tools call (the integration's), no captured SDK rows.
    (call,) = store.rows("select * from llm_calls")
    assert call["request_model"] == "policy-1" and call["provider"] != "openai"
    (r,) = store.rows("select * from rollouts")
    assert call["rollout_id"] == r["rollout_id"] and r["n_llm_calls"] == 1
    assert json.loads(call["input_messages"]) == PROMPT
    (out,) = json.loads(call["output_messages"])
    assert out["content"] == "2 + 3 = 5."
    assert [(c["name"], c["arguments"]) for c in out["tool_calls"]] == [("custom_tool__add_numbers", {"x": 2, "y": 3})]

    (tool,) = store.rows("select * from tool_calls")
    assert (tool["tool_name"], json.loads(tool["arguments"]), json.loads(tool["result"])) == (
        "custom_tool__add_numbers",
        {"x": 2, "y": 3},
        "5",
    )
    assert tool["rollout_id"] == r["rollout_id"]


def test_sdk_call_outside_the_stream_is_still_captured(db_path, store) -> None:
    """Capture is paused only while the backend produces a chunk: an OpenAI SDK call the agent's
    code makes between chunks is recorded by client capture, in the same rollout."""
    from openai import AsyncOpenAI

    arl.configure(db_path=str(db_path), export_delay_ms=50)
    with ScriptedLLMServer(["Hello there.", "direct"]) as server:
        backend = ChatCompletionsBackend(api_key="test", base_url=server.openai_url, model="policy-1")
        agent = arm.instrument_agent(SingleAgent(backend=backend, agent_id="solo"))
        client = AsyncOpenAI(base_url=server.openai_url, api_key="test", max_retries=0)

        async def go() -> None:
            with arl.rollout("between-chunks"):
                async for chunk in agent.chat(PROMPT):
                    if getattr(chunk, "type", None) == "content" and chunk.content == "Hello":
                        await client.chat.completions.create(model="direct-1", messages=PROMPT)

        asyncio.run(go())
    llm = store.rows("select request_model, rollout_id from llm_calls order by end_time")
    assert [c["request_model"] for c in llm] == ["direct-1", "policy-1"]
    assert len({c["rollout_id"] for c in llm}) == 1
