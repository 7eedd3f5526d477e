"""Runs of real Agents SDK agents (scripted custom model wrapped by ``instrument_model``):
what lands in the rollouts, llm_calls, tool_calls, events, steps and agents views."""

from __future__ import annotations

import asyncio
import json

import pytest
from agents import Agent, InputGuardrailTripwireTriggered, MaxTurnsExceeded, Runner

import agent_rl_openai_agents as arl_oa
from agent_rl_plugin import configure, rollout
from fakes import ScriptedModel, build_agents, call, say

QUESTION = "What is 2+3 and 1/0?"
ANSWER = "2 + 3 = 5; 1 / 0 is undefined."


@pytest.fixture
def recorded(db_path):
    configure(db_path=str(db_path), export_delay_ms=50)
    return arl_oa.instrument(exclusive=True)


def check_handoff_run(store) -> None:
    (r,) = store.rows("select * from rollouts")
    assert r["name"] == "rollout Agent workflow" and r["agent_name"] == "triage" and r["status"] == "ok"
    assert (r["n_llm_calls"], r["n_tool_calls"], r["n_tool_errors"]) == (3, 2, 1)
    assert (r["input_tokens"], r["output_tokens"]) == (12 + 12 + 20, 5 + 5 + 9)
    assert json.loads(r["input"]) == [{"role": "user", "content": QUESTION}]
    assert json.loads(r["output"]) == ANSWER

    llm = store.rows("select * from llm_calls order by start_time")
    assert [c["request_model"] for c in llm] == ["scripted-triage", "scripted-triage", "scripted-writer"]
    first_in = json.loads(llm[0]["input_messages"])
    assert first_in == [{"role": "system", "content": "Compute, then hand off to the writer."},
                        {"role": "user", "content": QUESTION}]
    first_out = json.loads(llm[0]["output_messages"])
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in first_out[0]["tool_calls"]] == [("call_add", "add", {"a": 2, "b": 3}),
                                                     ("call_div", "divide", {"a": 1, "b": 0})]
    assert json.loads(llm[0]["finish_reasons"]) == ["tool_calls"]
    second_in = json.loads(llm[1]["input_messages"])  # the tool results went back to the model
    assert {"role": "tool", "tool_call_id": "call_add", "content": "5"} in second_in
    assert json.loads(llm[2]["output_messages"]) == [{"role": "assistant", "content": ANSWER}]
    assert all(c["status"] == "ok" for c in llm)

    tools = store.rows("select * from tool_calls order by start_time")
    assert [(t["tool_name"], t["call_id"], json.loads(t["arguments"]), t["status"]) for t in tools] == [
        ("add", "call_add", {"a": 2, "b": 3}, "ok"), ("divide", "call_div", {"a": 1, "b": 0}, "error")]
    assert json.loads(tools[0]["result"]) == 5
    assert tools[1]["error"].startswith("Error running tool")
    assert "error occurred" in json.loads(tools[1]["result"])  # what the model was told

    events = store.rows("select * from events order by time")
    assert [(e["event_type"], e["agent_id"], e["target"]) for e in events] == [
        ("guardrail", "triage", None), ("handoff", "triage", "writer")]
    assert json.loads(events[0]["data"]) == {"guardrail": "no_secrets", "triggered": False}
    assert len({e["rollout_id"] for e in events} | {r["rollout_id"]}) == 1

    steps = store.rows("select kind, name, status from steps order by step_index")
    assert [(s["kind"], s["name"]) for s in steps if s["kind"] != "event"] == [
        ("llm", "scripted-triage"), ("tool", "add"), ("tool", "divide"),
        ("llm", "scripted-triage"), ("llm", "scripted-writer")]
    kinds = [s["name"] if s["kind"] == "event" else s["kind"] for s in steps]
    assert kinds.index("handoff") == 5  # after the second LLM call, before the writer's

    agents = store.rows("select agent_name, role, output, status from agents order by start_time")
    assert [(a["agent_name"], a["role"], a["status"]) for a in agents] == [
        ("triage", "agent", "ok"), ("writer", "agent", "ok")]
    assert agents[0]["output"] is None and json.loads(agents[1]["output"]) == ANSWER


def test_run_sync_with_tools_handoff_and_guardrail(recorded, store):
    triage, _, _ = build_agents(wrap=arl_oa.instrument_model)
    result = Runner.run_sync(triage, QUESTION)
    assert result.final_output == ANSWER and result.last_agent.name == "writer"
    check_handoff_run(store)


def test_async_run(recorded, store):
    triage, _, _ = build_agents(wrap=arl_oa.instrument_model)
    result = asyncio.run(Runner.run(triage, QUESTION))
    assert result.final_output == ANSWER
    check_handoff_run(store)


def test_streamed_run(recorded, store):
    triage, _, _ = build_agents(wrap=arl_oa.instrument_model)

    async def go():
        result = Runner.run_streamed(triage, QUESTION)
        events = [e async for e in result.stream_events()]
        return result, events

    result, events = asyncio.run(go())
    assert result.final_output == ANSWER and events
    check_handoff_run(store)


def test_instrument_agent_wraps_the_handoff_targets(recorded, store):
    triage, _, _ = build_agents()
    arl_oa.instrument_agent(triage)
    assert isinstance(triage.model, arl_oa.RLModel) and isinstance(triage.handoffs[0].model, arl_oa.RLModel)
    assert Runner.run_sync(triage, QUESTION).final_output == ANSWER
    check_handoff_run(store)


def test_unwrapped_custom_model_still_gives_one_call_per_turn(recorded, store):
    """A custom Model emits no generation span: each turn becomes an LLM call without content,
    with the turn's token usage."""
    triage, _, _ = build_agents()
    assert Runner.run_sync(triage, QUESTION).final_output == ANSWER
    (r,) = store.rows("select * from rollouts")
    assert (r["n_llm_calls"], r["n_tool_calls"], r["input_tokens"], r["output_tokens"]) == (3, 2, 44, 19)
    llm = store.rows("select request_model, input_messages from llm_calls")
    assert {c["request_model"] for c in llm} == {"unknown"} and all(c["input_messages"] is None for c in llm)
    steps = store.rows("select kind, name from steps order by step_index")
    assert [s["kind"] for s in steps if s["kind"] != "event"] == ["llm", "tool", "tool", "llm", "llm"]


def test_sdk_scripted_model_empty_generation_spans(recorded, store):
    """The SDK's own test model opens generation spans without data: counted once per turn."""
    from agents.testing import ScriptedModel as SdkScriptedModel, assistant_message

    agent = Agent(name="sdk", model=arl_oa.instrument_model(SdkScriptedModel([{"output": [assistant_message("hi")]}])))
    assert Runner.run_sync(agent, "hello").final_output == "hi"
    (call_row,) = store.rows("select output_messages from llm_calls")
    assert json.loads(call_row["output_messages"]) == [{"role": "assistant", "content": "hi"}]


def test_input_guardrail_tripwire_fails_the_rollout(recorded, store):
    triage, _, _ = build_agents(wrap=arl_oa.instrument_model)
    with pytest.raises(InputGuardrailTripwireTriggered):
        Runner.run_sync(triage, "my password is hunter2")
    (r,) = store.rows("select status, error from rollouts")
    assert r == {"status": "error", "error": "guardrail tripwire triggered: no_secrets"}
    (e,) = store.rows("select event_type, agent_id, reason, data from events")
    assert (e["event_type"], e["agent_id"], e["reason"]) == ("guardrail", "triage", "tripwire triggered")
    assert json.loads(e["data"])["triggered"] is True


def test_model_error_and_max_turns(recorded, store):
    broken = Agent(name="broken", model=arl_oa.instrument_model(ScriptedModel([RuntimeError("model down")])))
    with pytest.raises(RuntimeError, match="model down"):
        Runner.run_sync(broken, "hi")
    looping = Agent(name="looping", tools=build_agents()[0].tools,
                    model=arl_oa.instrument_model(ScriptedModel([[call("add", {"a": 1, "b": 1}, f"c{i}")] for i in range(3)])))
    with pytest.raises(MaxTurnsExceeded):
        Runner.run_sync(looping, "loop", max_turns=2)
    rows = store.rows("select agent_name, status, error, n_llm_calls, n_tool_calls from rollouts order by start_time")
    assert rows[0] == {"agent_name": "broken", "status": "error", "error": "Error in agent run: model down",
                       "n_llm_calls": 1, "n_tool_calls": 0}
    assert rows[1]["status"] == "error" and rows[1]["error"].startswith("Max turns exceeded")
    assert (rows[1]["n_llm_calls"], rows[1]["n_tool_calls"]) == (2, 2)
    (failed,) = store.rows("select status, error from llm_calls where status = 'error'")
    assert "RuntimeError: model down" in failed["error"]


def test_inside_an_explicit_rollout(recorded, store):
    """Inside arl.rollout() the SDK trace is part of that rollout (task/group ids for GRPO)."""
    agent = Agent(name="solo", model=arl_oa.instrument_model(ScriptedModel([[say("first")], [say("second")]])))
    with rollout(task_id="t1", group_id="g1"):
        Runner.run_sync(agent, "one")
        Runner.run_sync(agent, "two")
    (r,) = store.rows("select * from rollouts")
    assert (r["task_id"], r["group_id"], r["name"], r["n_llm_calls"]) == ("t1", "g1", "rollout t1", 2)
    assert json.loads(r["input"]) == [{"role": "user", "content": "one"}] and json.loads(r["output"]) == "second"
    assert {row["task_id"] for row in store.rows("select task_id from llm_calls")} == {"t1"}


def test_rollout_id_is_the_trace_id(recorded, store):
    from agents import trace

    agent = Agent(name="solo", model=arl_oa.instrument_model(ScriptedModel([[say("a")], [say("b")]])))
    with trace("two runs", group_id="thread-7") as t:  # one SDK trace, two runs: one rollout
        Runner.run_sync(agent, "x")
        Runner.run_sync(agent, "y")
    (r,) = store.rows("select rollout_id, name, n_llm_calls, metadata from rollouts")
    assert r["rollout_id"] == arl_oa.rollout_id_for(t) == t.trace_id.removeprefix("trace_")
    assert (r["name"], r["n_llm_calls"]) == ("rollout two runs", 2)
    assert json.loads(r["metadata"])["group_id"] == "thread-7"


def test_openai_responses_model(recorded, store):
    """The SDK's OpenAIResponsesModel (response spans) over a mocked transport."""
    from agents import OpenAIResponsesModel
    from fakes import RESPONSES_SCRIPT, add, openai_client

    model = OpenAIResponsesModel(model="gpt-test", openai_client=openai_client(responses=RESPONSES_SCRIPT))
    assert arl_oa.instrument_model(model) is model  # traces itself: left alone
    agent = Agent(name="resp", instructions="Be brief.", tools=[add], model=model)
    assert Runner.run_sync(agent, "2+3?").final_output == "5"
    llm = store.rows("select * from llm_calls order by start_time")
    assert [(c["provider"], c["response_model"], c["input_tokens"], c["output_tokens"]) for c in llm] == [
        ("openai", "gpt-test-2024", 30, 4)] * 2
    assert json.loads(llm[0]["input_messages"]) == [{"role": "system", "content": "Be brief."},
                                                    {"role": "user", "content": "2+3?"}]
    assert json.loads(llm[1]["output_messages"]) == [{"role": "assistant", "content": "5"}]
    assert llm[1]["reasoning"] == "2 + 3 is 5"
    (tool,) = store.rows("select tool_name, call_id, result from tool_calls")
    assert (tool["tool_name"], tool["call_id"], json.loads(tool["result"])) == ("add", "call_r1", 5)


def test_openai_chat_completions_model(recorded, store):
    """The SDK's OpenAIChatCompletionsModel (generation spans) over a mocked transport."""
    from agents import OpenAIChatCompletionsModel
    from fakes import COMPLETIONS_SCRIPT, add, openai_client

    model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=openai_client(completions=COMPLETIONS_SCRIPT))
    agent = Agent(name="chat", instructions="Be brief.", tools=[add], model=model)
    assert Runner.run_sync(agent, "1+1?").final_output == "2"
    llm = store.rows("select * from llm_calls order by start_time")
    assert [(c["request_model"], c["input_tokens"], c["output_tokens"]) for c in llm] == [("gpt-test", 21, 6)] * 2
    out = json.loads(llm[0]["output_messages"])
    assert out[0]["tool_calls"][0]["id"] == "call_c1" and "refusal" not in out[0]
    assert json.loads(llm[1]["output_messages"]) == [{"role": "assistant", "content": "2"}]
    (r,) = store.rows("select n_tool_calls, output from rollouts")
    assert (r["n_tool_calls"], json.loads(r["output"])) == (1, "2")


def test_agent_as_tool_and_tool_error_text(recorded, store):
    """An agent used as a tool runs inside the tool span (same rollout); a tool with its own
    failure_error_function gets the exception text; RunConfig(trace_id=...) names the rollout."""
    from agents import RunConfig, function_tool
    from agents.tracing import gen_trace_id

    @function_tool(failure_error_function=lambda ctx, error: f"failed: {error}")
    def div(a: int, b: int) -> float:
        return a / b

    helper = Agent(name="helper", model=arl_oa.instrument_model(ScriptedModel([[say("helped")]], name="m-helper")))
    boss = Agent(name="boss", tools=[div, helper.as_tool(tool_name="ask_helper", tool_description="Ask.")],
                 model=arl_oa.instrument_model(ScriptedModel(
                     [[call("div", {"a": 1, "b": 0}, "c1"), call("ask_helper", {"input": "hi"}, "c2")], [say("done")]],
                     name="m-boss")))
    trace_id = gen_trace_id()
    assert Runner.run_sync(boss, "go", run_config=RunConfig(trace_id=trace_id)).final_output == "done"
    (r,) = store.rows("select * from rollouts")
    assert r["rollout_id"] == arl_oa.rollout_id_for(trace_id)
    assert (r["n_llm_calls"], r["n_tool_calls"], r["agent_name"]) == (3, 2, "boss")
    assert json.loads(r["input"]) == [{"role": "user", "content": "go"}] and json.loads(r["output"]) == "done"
    tools = {t["tool_name"]: t for t in store.rows("select * from tool_calls")}
    assert tools["div"]["error"] == "Error running tool (non-fatal): division by zero"
    assert json.loads(tools["ask_helper"]["result"]) == "helped" and tools["ask_helper"]["call_id"] == "c2"
    (helper_row,) = store.rows("select parent_span_id from agents where agent_name = 'helper'")
    (task,) = store.rows("select parent_span_id from spans where span_id = ?", helper_row["parent_span_id"])
    assert task["parent_span_id"] == tools["ask_helper"]["span_id"]  # helper's run is inside the tool span


def test_concurrent_runs_are_separate_rollouts(recorded, store):
    """Group sampling: several runs at once (asyncio.gather) give one rollout each, each with its
    own calls, also inside one arl.rollout per sample."""

    async def sample(i: int):
        triage, _, _ = build_agents(wrap=arl_oa.instrument_model)
        async with rollout(task_id="t", group_id="g", metadata={"sample": i}):
            return (await Runner.run(triage, QUESTION)).final_output

    async def go():
        return await asyncio.gather(*(sample(i) for i in range(3)))

    assert asyncio.run(go()) == [ANSWER] * 3
    rows = store.rows("select group_id, n_llm_calls, n_tool_calls, output from rollouts")
    assert len(rows) == 3 and all((r["group_id"], r["n_llm_calls"], r["n_tool_calls"]) == ("g", 3, 2) for r in rows)
    assert all(json.loads(r["output"]) == ANSWER for r in rows)
    per_rollout = store.rows("select rollout_id, count(*) as n from events group by rollout_id")
    assert sorted(r["n"] for r in per_rollout) == [2, 2, 2]
