"""LangGraph graphs: a hand-built StateGraph with a tool node, and a multi-agent graph whose
agents hand off with ``Command`` (from a node and from a handoff tool of a sub-agent)."""

from __future__ import annotations

import json
from typing import Annotated

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from langgraph.types import Command

from agent_rl_langchain import AgentRLCallbackHandler
from fakes import ScriptedChatModel, call, lookup, usage


def weather_graph(model):
    tools = [lookup]
    bound = model.bind_tools(tools)

    def call_model(state: MessagesState):
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(name="weather_graph")


def weather_script():
    return [
        AIMessage(content="", tool_calls=[call("lookup", {"city": "Atlantis"}, "t1")], usage_metadata=usage(5, 3)),
        AIMessage(content="", tool_calls=[call("lookup", {"city": "Paris"}, "t2")], usage_metadata=usage(9, 3)),
        AIMessage(content="Sunny in Paris.", usage_metadata=usage(14, 4)),
    ]


def test_state_graph_with_tool_node(recording, store):
    model = ScriptedChatModel(script=weather_script())
    result = weather_graph(model).invoke({"messages": [("user", "Weather?")]},
                                         config={"callbacks": [AgentRLCallbackHandler()]})
    assert result["messages"][-1].content == "Sunny in Paris."
    (rollout,) = store.rows("select name, status, n_llm_calls, n_tool_calls, n_tool_errors from rollouts")
    assert rollout == {"name": "invoke_agent weather_graph", "status": "ok", "n_llm_calls": 3, "n_tool_calls": 2,
                       "n_tool_errors": 1}
    steps = store.rows("select kind, name, status from steps order by step_index")
    assert [(s["kind"], s["name"], s["status"]) for s in steps] == [
        ("llm", "scripted-model", "ok"), ("tool", "lookup", "error"), ("llm", "scripted-model", "ok"),
        ("tool", "lookup", "ok"), ("llm", "scripted-model", "ok"), ("event", "final_answer", "ok")]
    # the graph's nodes are chain spans carrying LangGraph's node name and step
    nodes = store.rows("""select attributes->>'$."langgraph.node"' as node, attributes->>'$."langgraph.step"' as step
                          from spans where span_kind = 'chain' and name in ('model', 'tools') order by start_unix_nano""")
    assert [(n["node"], n["step"]) for n in nodes] == [("model", "1"), ("tools", "2"), ("model", "3"), ("tools", "4"),
                                                        ("model", "5")]
    # LLM and tool spans hang under their node's span
    (parent,) = store.rows("""select p.name from llm_calls l join spans p on p.span_id = l.parent_span_id
                              group by p.name""")
    assert parent["name"] == "model"


def test_record_chains_false_keeps_agents_llm_and_tools(recording, store):
    model = ScriptedChatModel(script=weather_script())
    weather_graph(model).invoke({"messages": [("user", "Weather?")]},
                                config={"callbacks": [AgentRLCallbackHandler(record_chains=False)]})
    assert store.one("select count(*) from spans where span_kind = 'chain'") == 0
    assert store.one("select count(*) from llm_calls") == 3
    assert store.one("select count(*) from tool_calls") == 2
    # every LLM call hangs directly under the graph's agent span
    assert store.one("""select count(*) from llm_calls l join spans p on p.span_id = l.parent_span_id
                        where p.name = 'invoke_agent weather_graph'""") == 3


# --- multi-agent: a supervisor node and two agents handing off with Command ----------------------
@tool
def transfer_to_writer(summary: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Hand the conversation to the writer."""
    message = ToolMessage(content=f"Transferred to writer: {summary}", tool_call_id=tool_call_id)
    return Command(goto="writer", graph=Command.PARENT, update={"messages": [message]})


def team_graph():
    researcher_model = ScriptedChatModel(model="researcher-model", script=[
        AIMessage(content="", tool_calls=[call("lookup", {"city": "Paris"}, "r1")], usage_metadata=usage(10, 2)),
        AIMessage(content="", tool_calls=[call("transfer_to_writer", {"summary": "sunny"}, "r2")],
                  usage_metadata=usage(20, 2)),
    ])
    writer_model = ScriptedChatModel(model="writer-model", script=[
        AIMessage(content="Paris is sunny today.", usage_metadata=usage(30, 5)),
    ])
    researcher = create_react_agent(researcher_model, [lookup, transfer_to_writer], name="researcher")
    writer = create_react_agent(writer_model, [], name="writer")

    def supervisor(state: MessagesState) -> Command:
        return Command(goto="researcher")

    graph = StateGraph(MessagesState)
    graph.add_node("supervisor", supervisor, destinations=("researcher",))
    graph.add_node("researcher", researcher, destinations=("writer",))
    graph.add_node("writer", writer)
    graph.add_edge(START, "supervisor")
    graph.add_edge("writer", END)
    return graph.compile(name="team")


def test_multi_agent_handoffs(recording, store):
    result = team_graph().invoke({"messages": [("user", "Weather in Paris?")]},
                                 config={"callbacks": [AgentRLCallbackHandler()]})
    assert result["messages"][-1].content == "Paris is sunny today."
    (rollout,) = store.rows("select name, status, n_llm_calls, n_tool_calls from rollouts")
    assert rollout == {"name": "invoke_agent team", "status": "ok", "n_llm_calls": 3, "n_tool_calls": 2}

    agents = store.rows("select agent_name, status, is_rollout_root from agents order by start_time")
    assert [(a["agent_name"], a["status"], a["is_rollout_root"]) for a in agents] == [
        ("team", "ok", True), ("researcher", "ok", False), ("writer", "ok", False)]  # a handoff is not a failure

    events = store.rows("select event_type, agent_id, target, data from events order by time")
    assert [(e["event_type"], e["agent_id"], e["target"]) for e in events] == [
        ("handoff", "supervisor", "researcher"), ("handoff", "researcher", "writer"), ("final_answer", "team", None)]
    assert json.loads(events[0]["data"]) == {"via": "node", "node": "supervisor"}
    via_tool = json.loads(events[1]["data"])
    assert via_tool["via"] == "tool" and via_tool["tool"] == "transfer_to_writer" and via_tool["graph"] == "parent"

    # LLM calls are attributed to their agent; the steps view interleaves them with the handoffs
    calls = store.rows("""select request_model, attributes->>'$."gen_ai.agent.name"' as agent
                          from llm_calls l join spans s using (span_id) order by l.start_time""")
    assert [(c["request_model"], c["agent"]) for c in calls] == [
        ("researcher-model", "researcher"), ("researcher-model", "researcher"), ("writer-model", "writer")]
    steps = store.rows("select kind, name from steps order by step_index")
    assert [(s["kind"], s["name"]) for s in steps] == [
        ("event", "handoff"), ("llm", "researcher-model"), ("tool", "lookup"), ("llm", "researcher-model"),
        ("tool", "transfer_to_writer"), ("event", "handoff"), ("llm", "writer-model"), ("event", "final_answer")]


def test_multi_agent_without_chain_spans(recording, store):
    """record_chains=False: the nested graphs are still agents (recorded when their first step
    starts, with their own start time), and the handoffs and LLM calls are the same."""
    team_graph().invoke({"messages": [("user", "Weather in Paris?")]},
                        config={"callbacks": [AgentRLCallbackHandler(record_chains=False)]})
    assert store.one("select count(*) from spans where span_kind = 'chain'") == 0
    agents = store.rows("select agent_name, status, input from agents order by start_time")
    assert [(a["agent_name"], a["status"]) for a in agents] == [("team", "ok"), ("researcher", "ok"), ("writer", "ok")]
    assert json.loads(agents[1]["input"])["messages"][0]["content"] == "Weather in Paris?"
    events = store.rows("select event_type, agent_id, target from events order by time")
    assert [(e["event_type"], e["agent_id"], e["target"]) for e in events] == [
        ("handoff", "supervisor", "researcher"), ("handoff", "researcher", "writer"), ("final_answer", "team", None)]
    # each agent's LLM calls hang under its agent span
    rows = store.rows("""select a.agent_name, count(*) as n from llm_calls l join agents a on a.span_id = l.parent_span_id
                         group by a.agent_name order by a.agent_name""")
    assert [(r["agent_name"], r["n"]) for r in rows] == [("researcher", 2), ("writer", 1)]
