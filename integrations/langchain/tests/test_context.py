"""Rollouts, rewards and the context: a run inside ``arl.rollout()`` joins it, a run outside
opens its own; ``arl.emit_reward()``/``arl.record_event()`` called from inside a tool land in the
run's rollout; the caller's context is what it was once the run ends; ``enable_rl``."""

from __future__ import annotations

import asyncio
import json

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from opentelemetry import trace

import agent_rl_plugin as arl
from agent_rl_langchain import AgentRLCallbackHandler
from fakes import ScriptedChatModel, call


@tool
def grade(answer: str) -> str:
    """Grade an answer (emits a reward and an event from inside the tool)."""
    arl.emit_reward(1.0 if answer == "5" else 0.0, name="graded")
    arl.record_event("vote", agent_id="grader", target="answer", reason=f"graded {answer}")
    return "graded"


def grading_agent():
    model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[call("grade", {"answer": "5"}, "g1")]),
        AIMessage(content="done"),
    ])
    return create_react_agent(model, [grade], name="grader_agent")


def test_run_inside_an_explicit_rollout(recording, store):
    with arl.rollout(task_id="t1", group_id="g1") as info:
        grading_agent().invoke({"messages": [("user", "grade 5")]}, config={"callbacks": [AgentRLCallbackHandler()]})
    (rollout,) = store.rows("select rollout_id, task_id, group_id, name, total_reward from rollouts")
    assert rollout == {"rollout_id": info.rollout_id, "task_id": "t1", "group_id": "g1", "name": "rollout t1",
                       "total_reward": 1.0}
    (agent,) = store.rows("select agent_name, is_rollout_root from agents")
    assert agent == {"agent_name": "grader_agent", "is_rollout_root": False}
    (event,) = store.rows("select event_type, agent_id, target, rollout_id from events where event_type = 'vote'")
    assert event == {"event_type": "vote", "agent_id": "grader", "target": "answer", "rollout_id": info.rollout_id}
    # the reward and the event are on the tool's span
    (span,) = store.rows("select name from spans where contains(CAST(events AS VARCHAR), 'graded')")
    assert span["name"] == "execute_tool grade"


def test_implicit_rollout_rewards_from_inside_a_tool(recording, store):
    grading_agent().invoke({"messages": [("user", "grade 5")]}, config={"callbacks": [AgentRLCallbackHandler()]})
    assert arl.current_rollout() is None
    assert not trace.get_current_span().get_span_context().is_valid  # the caller's context is restored
    (rollout,) = store.rows("select name, total_reward from rollouts")
    assert rollout == {"name": "invoke_agent grader_agent", "total_reward": 1.0}
    (reward,) = store.rows("select r.name, r.value from rewards r join rollouts o using (rollout_id)")
    assert reward == {"name": "graded", "value": 1.0}


def test_concurrent_async_runs_are_separate_rollouts(recording, store):
    async def main():
        handler = AgentRLCallbackHandler()
        return await asyncio.gather(*[grading_agent().ainvoke({"messages": [("user", f"grade {i}")]},
                                                              config={"callbacks": [handler]}) for i in range(4)])

    asyncio.run(main())
    rows = store.rows("select n_llm_calls, n_tool_calls, total_reward from rollouts")
    assert len(rows) == 4 and all(r == {"n_llm_calls": 2, "n_tool_calls": 1, "total_reward": 1.0} for r in rows)
    assert store.one("select count(distinct trace_id) from spans") == 4
    assert store.one("select count(*) from spans where rollout_id is null") == 0


def test_rollout_hooks_fire_for_implicit_rollouts(recording, store):
    from agent_rl_plugin import plugins
    from agent_rl_plugin.hookspecs import hookimpl

    seen = []

    class Hooks:
        @hookimpl
        def agent_rl_rollout_start(self, rollout):
            seen.append(("start", rollout.rollout_id))

        @hookimpl
        def agent_rl_rollout_end(self, rollout, status, error):
            seen.append(("end", rollout.rollout_id, status))

    plugins.get_plugin_manager().register(Hooks())
    grading_agent().invoke({"messages": [("user", "grade 5")]}, config={"callbacks": [AgentRLCallbackHandler()]})
    rollout_id = store.one("select rollout_id from rollouts")
    assert seen == [("start", rollout_id), ("end", rollout_id, "ok")]


def test_disabled_handler_and_disabled_recording_record_nothing(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    with arl.rollout(task_id="t"):  # the tool emits a reward: it needs a rollout
        grading_agent().invoke({"messages": [("user", "grade 5")]},
                               config={"callbacks": [AgentRLCallbackHandler(enable_rl=False)]})
    assert store.one("select count(*) from spans where span_kind not in ('rollout', 'reward', 'event')") == 0
    arl.configure(db_path=str(db_path), enable_rl=False)
    result = grading_agent().invoke({"messages": [("user", "grade 5")]},
                                    config={"callbacks": [AgentRLCallbackHandler()]})
    assert result["messages"][-1].content == "done"


def test_content_capture_off(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50, capture_content=False)
    grading_agent().invoke({"messages": [("user", "grade 5")]}, config={"callbacks": [AgentRLCallbackHandler()]})
    (call_row,) = store.rows("select input_messages, output_messages from llm_calls limit 1")
    assert call_row == {"input_messages": None, "output_messages": None}
    (tool_row,) = store.rows("select tool_name, arguments, result from tool_calls")
    assert tool_row == {"tool_name": "grade", "arguments": None, "result": None}
    assert json.loads(store.one("select finish_reasons from llm_calls order by start_time limit 1")) == ["tool_calls"]
