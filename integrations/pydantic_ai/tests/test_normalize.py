"""The normaliser alone, on attribute dicts shaped like pydantic-ai's (no spans needed)."""

from __future__ import annotations

import json

from agent_rl_pydantic_ai.normalize import normalize_pydantic_ai, run_prompt, with_response_keys

HISTORY = [
    {"role": "user", "parts": [{"type": "text", "content": "earlier question"}]},
    {"role": "assistant", "parts": [{"type": "text", "content": "earlier answer"}]},
    {"role": "system", "parts": [{"type": "text", "content": "sys"}]},
    {"role": "user", "parts": [{"type": "text", "content": "line 1"}, {"type": "text", "content": "line 2"}]},
]


def test_agent_span_gets_input_and_output():
    attrs = {"gen_ai.operation.name": "invoke_agent", "final_result": '{"value":1}',
             "pydantic_ai.all_messages": json.dumps(HISTORY), "pydantic_ai.new_message_index": 2}
    normalize_pydantic_ai(attrs, "invoke_agent a")
    assert attrs["agent_rl.output"] == '{"value":1}'
    assert attrs["agent_rl.input"] == "line 1\nline 2"  # the run's prompt, not the history's


def test_present_keys_win_and_other_spans_are_untouched():
    attrs = {"gen_ai.operation.name": "invoke_agent", "final_result": "x", "agent_rl.output": "mine",
             "agent_rl.input": "in", "pydantic_ai.all_messages": json.dumps(HISTORY)}
    normalize_pydantic_ai(attrs, "s")
    assert attrs["agent_rl.output"] == "mine" and attrs["agent_rl.input"] == "in"
    other = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "not pydantic-ai"}
    normalize_pydantic_ai(other, "s")
    assert other == {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "not pydantic-ai"}
    tool = {"gen_ai.operation.name": "execute_tool", "pydantic_ai.tool.retry.cause": "unknown_tool", "error.type": "E"}
    normalize_pydantic_ai(tool, "s")
    assert tool["error.type"] == "E"


def test_retry_cause_and_reasoning():
    tool = {"gen_ai.operation.name": "execute_tool", "pydantic_ai.tool.retry.cause": "validation_error"}
    normalize_pydantic_ai(tool, "execute_tool t")
    assert tool["error.type"] == "validation_error"
    out = [{"role": "assistant", "parts": [{"type": "thinking", "content": "a"}, {"type": "text", "content": "b"},
                                           {"type": "thinking", "content": "c"}]}]
    chat = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(out)}
    normalize_pydantic_ai(chat, "chat m")
    assert chat["agent_rl.reasoning"] == "a\nc"


def test_response_key_added_next_to_result_only_where_missing():
    messages = [{"role": "tool", "parts": [
        {"type": "tool_call_response", "id": "1", "name": "t", "result": {"k": [1]}},
        {"type": "tool_call_response", "id": "2", "name": "t", "result": "r", "response": "already"},
        {"type": "text", "content": "result"}]}]
    fixed = json.loads(with_response_keys(json.dumps(messages)))
    assert fixed[0]["parts"][0] == {"type": "tool_call_response", "id": "1", "name": "t", "result": {"k": [1]}, "response": {"k": [1]}}
    assert fixed[0]["parts"][1]["response"] == "already" and fixed[0]["parts"][2] == messages[0]["parts"][2]
    assert with_response_keys(json.dumps([{"role": "user", "parts": []}])) is None  # nothing to do


def test_bad_values_are_left_alone():
    cut = '[{"role":"tool","parts":[{"type":"tool_call_response","id":"1","result":"x"...[truncated 99 bytes]'
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": cut, "gen_ai.output.messages": 42}
    normalize_pydantic_ai(attrs, "chat m")
    assert attrs == {"gen_ai.operation.name": "chat", "gen_ai.input.messages": cut, "gen_ai.output.messages": 42}
    assert run_prompt("not json") is None and run_prompt(json.dumps(HISTORY), True) == "earlier question"
    agent = {"gen_ai.operation.name": "invoke_agent", "final_result": None, "pydantic_ai.all_messages": "[1, 2]"}
    normalize_pydantic_ai(agent, "a")
    assert "agent_rl.output" not in agent and "agent_rl.input" not in agent
