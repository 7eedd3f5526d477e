"""An agent that calls ``litellm.completion`` (whole, streamed, async), with only ``configure()``
and ``@trace_agent``, stores one ``chat`` span per call: LiteLLM's own call to the OpenAI SDK
underneath is not recorded a second time."""

from __future__ import annotations

import asyncio
import json

import litellm

import agent_rl_plugin as arl
from agent_rl_plugin.testing import StoreReader
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer


def calls(db_path: str) -> list[dict]:
    arl.flush()
    return StoreReader(db_path).rows("select * from llm_calls order by start_time")


def test_whole_streamed_and_async_litellm_calls_are_recorded_once_each(db_path):
    arl.configure(db_path=db_path)
    replies = [Reply(tool_calls=[("search", {"q": "x"})]), "Streamed answer here", "Async answer"]
    with ScriptedLLMServer(replies) as server:
        options = {"api_base": server.openai_url, "api_key": "sk-litellm-key-never-stored-1234"}

        @arl.trace_agent
        def agent(question: str) -> str:
            messages = [{"role": "user", "content": question}]
            first = litellm.completion("openai/scripted", messages, **options)  # positional model, messages
            assert first.choices[0].message.tool_calls[0].function.name == "search"
            stream = litellm.completion(model="openai/scripted", messages=messages, stream=True, **options)
            text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
            later = asyncio.run(litellm.acompletion(model="openai/scripted", messages=messages, **options))
            return text + "|" + later.choices[0].message.content

        assert agent("find x") == "Streamed answer here|Async answer"
    rows = calls(db_path)
    assert [r["provider"] for r in rows] == ["litellm"] * 3
    assert len({r["rollout_id"] for r in rows}) == 1 and rows[0]["rollout_id"]
    assert [r["request_model"] for r in rows] == ["openai/scripted"] * 3
    (call,) = json.loads(rows[0]["output_messages"])[0]["tool_calls"]
    assert call["function"] == {"name": "search", "arguments": json.dumps({"q": "x"})}
    assert json.loads(rows[1]["output_messages"]) == [{"role": "assistant", "content": "Streamed answer here"}]
    assert json.loads(rows[2]["output_messages"]) == [{"role": "assistant", "content": "Async answer"}]
    assert json.loads(rows[2]["input_messages"]) == [{"role": "user", "content": "find x"}]
    spans_text = StoreReader(db_path).one("select string_agg(CAST(attributes AS VARCHAR), ' ') from spans")
    assert "never-stored" not in spans_text  # request keyword arguments other than settings are not kept


def test_capture_off_records_nothing(db_path):
    arl.configure(db_path=db_path, instrument_clients="none")
    with ScriptedLLMServer(["hi"]) as server, arl.rollout(task_id="t"):
        litellm.completion(model="openai/scripted", messages=[{"role": "user", "content": "x"}],
                           api_base=server.openai_url, api_key="test")
    assert calls(db_path) == []
