"""A framework-less, FlowAgent-style agent recorded with ``instrument(cls, methods, tool_methods)``
(docs/integrations/generic.md): the example runs as written, results are unchanged, and the views
hold the agent run, its tool calls (arguments, results, errors) and its LLM calls."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

import agent_rl_plugin as arl
from score_support import rows

DOC = Path(__file__).resolve().parents[1] / "docs" / "integrations" / "generic.md"


class FlowAgent:
    """An agent as a user writes it: an async entry point, two tools, a scripted model."""

    agent_id = "flow-1"

    def __init__(self) -> None:
        self.script = iter(["search: 6 * 7", "calculate: 6 * 7", "calculate: 6 / 0", "answer"])

    async def a_run(self, question: str) -> str:
        notes = []
        for decision in self.script:
            await asyncio.sleep(0)
            arl.record_llm_call("scripted", question, decision, input_tokens=5, output_tokens=2)
            action, _, argument = decision.partition(": ")
            if action == "search":
                notes.append(self.search(argument))
            elif action == "calculate":
                try:
                    notes.append(str(await self.calculate(argument)))
                except ZeroDivisionError as exc:
                    notes.append(f"error: {exc}")
        return f"The answer is {notes[1]} ({'; '.join(notes)})"

    def search(self, query: str) -> str:
        return f"found {query}"

    async def calculate(self, expression: str) -> float:
        left, op, right = expression.split()
        a, b = float(left), float(right)
        return a * b if op == "*" else a / b


@pytest.fixture
def flow_agents(monkeypatch):
    """``my_project.agents.FlowAgent`` importable, as in the doc's example."""
    package, module = types.ModuleType("my_project"), types.ModuleType("my_project.agents")
    module.FlowAgent = FlowAgent
    package.agents = module
    monkeypatch.setitem(sys.modules, "my_project", package)
    monkeypatch.setitem(sys.modules, "my_project.agents", module)
    yield
    arl.uninstrument(FlowAgent)


def test_the_documented_example_records_the_agent_its_tools_and_llm_calls(flow_agents, tmp_path, monkeypatch, capsys):
    untraced = asyncio.run(FlowAgent().a_run("What is 6 * 7?"))
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(textwrap.dedent(example), str(DOC), "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out.strip() == untraced  # the same answer as without the plugin
    assert arl.flush()
    arl.shutdown()
    db = tmp_path / "runs.duckdb"
    (rollout,) = rows(db, "select rollout_id, task_id, group_id, status, n_tool_errors from rollouts")
    assert rollout["task_id"] == "math-1" and rollout["group_id"] == "math-1/g0" and rollout["n_tool_errors"] == 1
    (agent,) = rows(db, "select agent_name, agent_id from agents")
    assert agent == {"agent_name": "FlowAgent", "agent_id": "flow-1"}
    tools = rows(db, "select tool_name, arguments, result, error_type from tool_calls order by start_time")
    assert [t["tool_name"] for t in tools] == ["search", "calculate", "calculate"]
    assert json.loads(tools[0]["arguments"]) == {"query": "6 * 7"}
    assert json.loads(tools[1]["result"]) == 42.0
    assert tools[2]["error_type"] == "ZeroDivisionError"
    assert rows(db, "select count(*) as n, sum(input_tokens) as tokens from llm_calls") == [{"n": 4, "tokens": 20}]
    kinds = [r["kind"] for r in rows(db, "select kind from steps order by step_index")]
    assert kinds.count("tool") == 3 and kinds.count("llm") == 4


def test_uninstrument_restores_the_class_exactly(flow_agents):
    before = dict(vars(FlowAgent))
    arl.instrument(FlowAgent, methods=["a_run"], tool_methods=["search", "calculate"])
    assert vars(FlowAgent)["a_run"] is not before["a_run"]
    arl.uninstrument(FlowAgent)
    assert all(vars(FlowAgent)[name] is value for name, value in before.items())
