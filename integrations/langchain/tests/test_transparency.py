"""Recording never changes what LangChain does: the same script with and without the handler
(and with the process-wide instrumentation) returns identical outputs, streams identical chunks,
raises identical exceptions, and the model is asked exactly the same things. Messages are
compared without their ``id`` (LangChain derives AI message ids from random run ids, so they
differ between two runs without the plugin too)."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.prebuilt import ToolNode, create_react_agent

from agent_rl_langchain import AgentRLCallbackHandler, instrument_langchain, uninstrument_langchain
from fakes import ScriptedChatModel, add, calculator_script, lookup, strip_ids
from test_graphs import team_graph

QUESTION = {"messages": [("user", "What is 2 + 3, and the weather in Atlantis?")]}


def run_agent(config, handle_tool_errors=True, mode="invoke"):
    model = ScriptedChatModel(script=calculator_script())
    agent = create_react_agent(model, ToolNode([add, lookup], handle_tool_errors=handle_tool_errors), name="calc")
    try:
        if mode == "invoke":
            result = agent.invoke(QUESTION, config=config)
        elif mode == "ainvoke":
            result = asyncio.run(agent.ainvoke(QUESTION, config=config))
        elif mode == "stream":
            result = list(agent.stream(QUESTION, config=config, stream_mode=["updates", "messages"]))
        else:
            async def go():
                return [c async for c in agent.astream(QUESTION, config=config, stream_mode=["updates", "messages"])]
            result = asyncio.run(go())
        outcome = ("ok", strip_ids(result))
    except Exception as exc:  # compared below
        outcome = ("raised", type(exc), str(exc))
    return outcome, strip_ids(model.received)


def in_order_per_task(outcome):
    """A streamed run compared the way LangGraph defines its order: the two tools of one step run
    concurrently, so chunks of different tasks may interleave differently from run to run (also
    without the plugin, under load); each task's own chunks, and the multiset of all chunks, may not."""
    status, chunks = outcome
    by_task: dict[str, list[str]] = {}
    for chunk in chunks:
        mode, payload = chunk
        # message chunks carry their task's path; each update is one task's whole output
        key = repr(payload[1].get("langgraph_path")) if mode == "messages" else repr(payload)
        by_task.setdefault(f"{mode}:{key}", []).append(repr(payload))
    return status, by_task, sorted(repr(chunk) for chunk in chunks)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_agent_identical_with_and_without_handler(recording, store, mode):
    plain = run_agent({}, mode=mode)
    recorded = run_agent({"callbacks": [AgentRLCallbackHandler()]}, mode=mode)
    if mode in ("stream", "astream"):
        assert in_order_per_task(recorded[0]) == in_order_per_task(plain[0])
        assert recorded[1] == plain[1]  # the model was asked exactly the same things
    else:
        assert recorded == plain
    assert plain[0][0] == "ok"
    assert store.one("select count(*) from llm_calls") == 2  # and it was recorded


def test_exception_identical(recording, store):
    plain = run_agent({}, handle_tool_errors=False)
    recorded = run_agent({"callbacks": [AgentRLCallbackHandler()]}, handle_tool_errors=False)
    assert recorded == plain
    assert plain[0][:2] == ("raised", ValueError)
    assert store.one("select status from rollouts") == "error"


def test_process_wide_instrumentation_identical(recording, store):
    plain = run_agent({})
    instrument_langchain()
    try:
        recorded = run_agent({})
    finally:
        uninstrument_langchain()
    assert recorded == plain
    assert store.one("select count(*) from rollouts") == 1


def test_multi_agent_identical(recording, store):
    plain = strip_ids(team_graph().invoke({"messages": [("user", "Weather in Paris?")]}))
    recorded = strip_ids(team_graph().invoke({"messages": [("user", "Weather in Paris?")]},
                                             config={"callbacks": [AgentRLCallbackHandler()]}))
    assert recorded == plain
    assert store.one("select count(*) from events where event_type = 'handoff'") == 2
