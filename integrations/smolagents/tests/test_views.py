"""smolagents runs on a scripted Model, read back through the views."""

from __future__ import annotations

import json

from smolagents import ToolCallingAgent

import agent_rl_plugin as arl
import agent_rl_smolagents as ars
from fakes import Lookup, ScriptedModel, call, code_script, divide, reply, tool_calling_script


def _configure(db_path, **fields):
    arl.configure(db_path=str(db_path), export_delay_ms=50, **fields)


def test_tool_calling_agent_in_every_view(db_path, store):
    _configure(db_path)
    model = ScriptedModel(tool_calling_script())
    agent = ars.RLToolCallingAgent(tools=[divide, Lookup()], model=model, verbosity_level=0)
    assert agent.run("What is 6/3?") == "6/3 = 2.0"

    (rollout,) = store.rows("select * from rollouts")
    assert rollout["name"] == "invoke_agent RLToolCallingAgent" and rollout["status"] == "ok"
    assert (rollout["n_llm_calls"], rollout["n_tool_calls"], rollout["n_tool_errors"]) == (3, 4, 2)
    assert json.loads(rollout["input"]) == {"task": "What is 6/3?"}
    assert json.loads(rollout["output"]) == "6/3 = 2.0"
    assert (rollout["input_tokens"], rollout["output_tokens"]) == (10 * sum(len(m) for m in model.received), 21)

    calls = store.rows("select * from llm_calls order by start_time")
    assert {c["request_model"] for c in calls} == {"scripted-model"} and {c["provider"] for c in calls} == {"ScriptedModel"}
    first_in = json.loads(calls[0]["input_messages"])
    assert [m["role"] for m in first_in] == ["system", "user"]
    assert "What is 6/3?" in first_in[1]["content"][0]["text"]
    out = json.loads(calls[0]["output_messages"])
    assert out == [{"role": "assistant", "content": "Let me divide.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "divide", "arguments": '{"a": 6, "b": 0}'}}]}]
    last_in = json.loads(calls[2]["input_messages"])
    texts = json.dumps(last_in)
    assert "division by zero" in texts and "no entry e" in texts  # the errors smolagents sent back

    tools = store.rows("select * from tool_calls order by call_id")
    assert [(t["tool_name"], t["call_id"], json.loads(t["arguments"]), t["status"]) for t in tools] == [
        ("divide", "c1", {"a": 6, "b": 0}, "error"), ("divide", "c2", {"a": 6, "b": 3}, "ok"),
        ("lookup", "c3", {"key": "e"}, "error"), ("final_answer", "c4", {"answer": "6/3 = 2.0"}, "ok")]
    by_id = {t["call_id"]: t for t in tools}
    assert "ZeroDivisionError: division by zero" in by_id["c1"]["error"]
    assert by_id["c1"]["error_type"] == "smolagents.utils.AgentToolExecutionError"
    assert by_id["c2"]["result"] == "2.0" and json.loads(by_id["c4"]["result"]) == "6/3 = 2.0"

    kinds = [(s["kind"], s["name"]) for s in store.rows("select kind, name from steps order by step_index")]
    assert kinds[:3] == [("llm", "scripted-model"), ("tool", "divide"), ("event", "step_error")]
    assert kinds[-2:] == [("llm", "scripted-model"), ("tool", "final_answer")]
    errors = store.rows("select round, agent_id, content, data from events where event_type = 'step_error' order by round")
    assert [e["round"] for e in errors] == [1, 2] and errors[0]["agent_id"] == "RLToolCallingAgent"
    assert json.loads(errors[0]["data"]) == {"error_type": "AgentToolExecutionError"}


def test_code_agent_code_and_tools(db_path, store):
    _configure(db_path)
    agent = ars.RLCodeAgent(tools=[divide, Lookup()], model=ScriptedModel(code_script()), verbosity_level=0)
    assert agent.run("What is 6/3?") == "6/3 = 2.0"
    (rollout,) = store.rows("select n_llm_calls, n_tool_calls, n_tool_errors, status from rollouts")
    assert rollout == {"n_llm_calls": 2, "n_tool_calls": 6, "n_tool_errors": 2, "status": "ok"}
    code = store.rows("select arguments, result, status, error from tool_calls where tool_name = 'python_interpreter' order by start_time")
    assert json.loads(code[0]["arguments"]) == {"code": "print(lookup(key='e'))"}
    assert code[0]["status"] == "error" and "no entry e" in code[0]["error"]
    assert json.loads(code[1]["result"]) == {"output": "6/3 = 2.0", "logs": "3.14159\n", "is_final_answer": True}
    inner = store.rows("select tool_name, arguments, result, status from tool_calls where tool_name <> 'python_interpreter' order by start_time")
    assert [(t["tool_name"], json.loads(t["arguments"]), t["status"]) for t in inner] == [
        ("lookup", {"key": "e"}, "error"), ("divide", {"a": 6, "b": 3}, "ok"),
        ("lookup", {"key": "pi"}, "ok"), ("final_answer", {"answer": "6/3 = 2.0"}, "ok")]
    assert [s["kind"] for s in store.rows("select kind from steps order by step_index")][:2] == ["llm", "tool"]


def test_managed_agent_is_nested_with_a_delegate_event(db_path, store):
    _configure(db_path)
    helper = ToolCallingAgent(tools=[divide], name="helper", description="Divides numbers.", verbosity_level=0,
                              model=ScriptedModel([reply(None, call("divide", {"a": 6, "b": 3}, "h1")),
                                                   reply(None, call("final_answer", {"answer": "2.0"}, "h2"))], "helper-model"))
    manager = ars.RLToolCallingAgent(tools=[], managed_agents=[helper], verbosity_level=0, model=ScriptedModel([
        reply(None, call("helper", {"task": "compute 6/3"}, "m1")),
        reply(None, call("final_answer", {"answer": "2.0"}, "m2"))], "manager-model"))
    manager.run("What is 6/3?")
    (rollout,) = store.rows("select n_llm_calls, n_tool_calls from rollouts")
    assert rollout == {"n_llm_calls": 4, "n_tool_calls": 4}  # helper's calls are in the manager's rollout
    agents = store.rows("select agent_name, is_rollout_root from agents order by start_time")
    assert [(a["agent_name"], a["is_rollout_root"]) for a in agents] == [("RLToolCallingAgent", True), ("helper", False)]
    (event,) = store.rows("select agent_id, target, content from events where event_type = 'delegate'")
    assert event["agent_id"] == "RLToolCallingAgent" and event["target"] == "helper" and "compute 6/3" in event["content"]
    (delegation,) = store.rows("select arguments, status from tool_calls where tool_name = 'helper'")
    assert json.loads(delegation["arguments"]) == {"task": "compute 6/3"} and delegation["status"] == "ok"


def test_streamed_run_and_rollout_grouping(db_path, store):
    _configure(db_path)
    for _ in range(2):
        agent = ars.RLToolCallingAgent(tools=[divide, Lookup()], model=ScriptedModel(tool_calling_script()), verbosity_level=0)
        with arl.rollout(task_id="t1", group_id="g1"):
            steps = list(agent.run("What is 6/3?", stream=True))
        assert steps[-1].output == "6/3 = 2.0"
    rows = store.rows("select task_id, group_id, n_llm_calls, n_tool_calls, status from rollouts")
    assert rows == [{"task_id": "t1", "group_id": "g1", "n_llm_calls": 3, "n_tool_calls": 4, "status": "ok"}] * 2


def test_capture_content_false(db_path, store):
    _configure(db_path, capture_content=False)
    ars.RLToolCallingAgent(tools=[divide, Lookup()], model=ScriptedModel(tool_calling_script()), verbosity_level=0).run("secret")
    assert all(c["input_messages"] is None for c in store.rows("select input_messages from llm_calls"))
    assert all(t["arguments"] is None and t["result"] is None for t in store.rows("select arguments, result from tool_calls"))
