"""A pydantic-ai run recorded by ``configure()`` alone, read back through the views."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

import agent_rl_plugin as arl
from agent_rl_plugin.data.sql import messages_sql
from scripts import calculator_agent, calculator_script, crashing_agent


def _configure(db_path, **fields):
    arl.configure(db_path=str(db_path), export_delay_ms=50, **fields)


def test_function_model_run_lands_in_every_view(db_path, store):
    _configure(db_path)
    model, _ = calculator_script()
    result = calculator_agent(model).run_sync("What is 6/3?")
    assert result.output == "6/3 = 2"

    (rollout,) = store.rows("select * from rollouts")
    assert rollout["name"] == "invoke_agent calc" and rollout["agent_name"] == "calc"
    assert rollout["status"] == "ok" and rollout["error"] is None
    assert (rollout["n_llm_calls"], rollout["n_tool_calls"], rollout["n_tool_errors"]) == (3, 3, 2)
    assert rollout["input"] == "What is 6/3?"
    assert rollout["output"] == "6/3 = 2"
    assert rollout["input_tokens"] > 0 and rollout["output_tokens"] > 0

    calls = store.rows("select * from llm_calls order by start_time")
    assert [c["operation"] for c in calls] == ["chat"] * 3
    assert {c["request_model"] for c in calls} == {"scripted"} and {c["provider"] for c in calls} == {"function"}
    first_in = json.loads(calls[0]["input_messages"])
    assert first_in == [{"role": "user", "parts": [{"type": "text", "content": "What is 6/3?"}]}]
    first_out = json.loads(calls[0]["output_messages"])
    assert first_out[0]["parts"][1] == {"type": "tool_call", "id": "c1", "name": "divide", "arguments": {"a": 6, "b": 0}}
    assert calls[0]["reasoning"] == "6/3, use the tool"
    assert json.loads(calls[0]["finish_reasons"]) == ["tool_call"]
    last_in = json.loads(calls[2]["input_messages"])
    assert [m["role"] for m in last_in] == ["user", "assistant", "tool", "assistant", "tool"]
    tool_parts = last_in[4]["parts"]
    assert [(p["id"], p["result"], p["response"]) for p in tool_parts] == [
        ("c2", 2.0, 2.0), ("c3", "no entry 'missing'", "no entry 'missing'")]
    assert json.loads(calls[2]["output_messages"])[0]["parts"] == [{"type": "text", "content": "6/3 = 2"}]
    assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 for c in calls)

    tools = store.rows("select * from tool_calls order by call_id")
    assert [(t["tool_name"], t["call_id"], json.loads(t["arguments"]), t["status"]) for t in tools] == [
        ("divide", "c1", {"a": 6, "b": 0}, "error"),
        ("divide", "c2", {"a": 6, "b": 3}, "ok"),
        ("lookup", "c3", {"key": "missing"}, "error"),
    ]
    by_id = {t["call_id"]: t for t in tools}
    assert by_id["c1"]["result"] == "b must not be zero"  # what the model is sent back
    assert by_id["c1"]["error_type"] == "model_retry"
    assert by_id["c1"]["error"].endswith("b must not be zero")  # from the span's exception event
    assert by_id["c2"]["result"] == "2.0" and by_id["c2"]["error"] is None
    assert by_id["c3"]["status"] == "error" and by_id["c3"]["result"] == "no entry 'missing'"

    steps = store.rows("select kind, name, status from steps order by step_index")
    assert [s["kind"] for s in steps] == ["llm", "tool", "llm", "tool", "tool", "llm"]
    assert [s["name"] for s in steps if s["kind"] == "tool"][0] == "divide"
    (agent,) = store.rows("select agent_name, input, output, status from agents")
    assert agent == {"agent_name": "calc", "input": "What is 6/3?", "output": "6/3 = 2", "status": "ok"}


def test_a_failing_tool_fails_the_rollout_with_its_error(db_path, store):
    _configure(db_path)
    with pytest.raises(ValueError, match="kaput: test"):
        crashing_agent().run_sync("go")
    (rollout,) = store.rows("select status, error, n_tool_calls, n_tool_errors from rollouts")
    assert rollout == {"status": "error", "error": "ValueError: kaput: test", "n_tool_calls": 1, "n_tool_errors": 1}
    (tool,) = store.rows("select tool_name, arguments, result, status, error from tool_calls")
    assert tool["tool_name"] == "explode" and json.loads(tool["arguments"]) == {"why": "test"}
    assert tool["status"] == "error" and tool["result"] is None
    # pydantic-ai puts the exception on a span event, not in the status message:
    (event,) = store.rows("""select e->>'$.attributes."exception.type"' as type, e->>'$.attributes."exception.message"' as message
                             from (select unnest(events->'$[*]') as e from spans where operation = 'execute_tool')""")
    assert event == {"type": "ValueError", "message": "kaput: test"}


def test_rollouts_group_runs_and_each_run_alone_is_a_rollout(db_path, store):
    _configure(db_path)
    for i in range(2):
        with arl.rollout(task_id="t1", group_id="g1"):
            calculator_agent(calculator_script()[0]).run_sync("What is 6/3?")
    calculator_agent(calculator_script()[0]).run_sync("What is 6/3?")  # no rollout(): its own
    rows = store.rows("select task_id, group_id, n_llm_calls, n_tool_calls, input, output from rollouts order by start_time")
    assert [(r["task_id"], r["group_id"], r["n_llm_calls"], r["n_tool_calls"]) for r in rows] == [
        ("t1", "g1", 3, 3), ("t1", "g1", 3, 3), (None, None, 3, 3)]
    assert {r["output"] for r in rows} == {"6/3 = 2"}  # the agent span's output when rollout() is the root
    assert store.rows("select count(distinct rollout_id) as n from steps")[0]["n"] == 3


class Answer(BaseModel):
    value: int
    unit: str


def test_structured_output_is_recorded_as_json(db_path, store):
    _configure(db_path)
    result = Agent(TestModel(), output_type=Answer, name="typed").run_sync("How many?")
    (rollout,) = store.rows("select output, n_llm_calls from rollouts")
    assert json.loads(rollout["output"]) == result.output.model_dump()
    assert rollout["n_llm_calls"] == 1


def test_streamed_run_is_recorded(db_path, store):
    _configure(db_path)
    agent = Agent(TestModel(custom_output_text="streamed answer"), name="streamer")

    async def go():
        async with agent.run_stream("Say something") as stream:
            return [chunk async for chunk in stream.stream_text(delta=True)]

    chunks = asyncio.run(go())
    assert "".join(chunks) == "streamed answer"
    (call,) = store.rows("select output_messages, output_tokens from llm_calls")
    assert json.loads(call["output_messages"])[0]["parts"] == [{"type": "text", "content": "streamed answer"}]
    (rollout,) = store.rows("select output, status from rollouts")
    assert rollout == {"output": "streamed answer", "status": "ok"}


def test_capture_content_false_keeps_no_messages(db_path, store):
    _configure(db_path, capture_content=False)
    calculator_agent(calculator_script()[0]).run_sync("secret question")
    calls = store.rows("select input_messages, output_messages from llm_calls")
    assert len(calls) == 3
    assert all("secret" not in (c["input_messages"] or "") for c in calls)
    tools = store.rows("select arguments, result from tool_calls")
    assert len(tools) == 3 and all(t["arguments"] is None and t["result"] is None for t in tools)
    assert store.rows("select input, output from rollouts")[0] == {"input": None, "output": None}


def test_dataset_messages_carry_tool_results(db_path, store):
    """The dataset builders read the tool results (``response``, or pydantic-ai's ``result``), one
    ``tool`` message per parallel result."""
    _configure(db_path)
    calculator_agent(calculator_script()[0]).run_sync("What is 6/3?")
    rows = store.rows(f"select {messages_sql('input_messages')} as m from llm_calls order by start_time")
    last = rows[-1]["m"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool", "tool"]
    assert last[2]["content"] == "b must not be zero" and last[2]["tool_call_id"] == "c1"
    assert last[1]["tool_calls"][0]["function"] == {"name": "divide", "arguments": '{"a":6,"b":0}'}
    assert last[4]["content"].startswith("2.0") and last[4]["tool_call_id"] == "c2"
    assert last[5]["tool_call_id"] == "c3" and "missing" in last[5]["content"]
