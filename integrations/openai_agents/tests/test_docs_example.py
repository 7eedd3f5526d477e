"""The ten-line example of docs/integrations/openai-agents.md runs (with a scripted model) and
its rollout's LLM calls, tool calls and handoff are in the views."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fakes import ScriptedModel, call, say

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "openai-agents.md"


def example() -> str:
    return re.search(r"## Ten lines\n\n```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def test_example_is_ten_lines():
    assert len([line for line in example().splitlines() if line.strip()]) <= 10


def test_example_records_into_the_views(store, capsys):
    model = ScriptedModel([
        [call("add", {"a": 2, "b": 3}, "call_1")],
        [call("transfer_to_writer", {}, "call_2")],
        [say("2 + 3 = 5.")],
    ])
    code = example().replace('"agents.duckdb"', repr(str(store.path)))
    exec(compile(code, str(DOC), "exec"), {"model": model})
    assert capsys.readouterr().out.strip() == "2 + 3 = 5."
    (rollout,) = store.rows("select agent_name, n_llm_calls, n_tool_calls, output from rollouts")
    assert rollout == {"agent_name": "calc", "n_llm_calls": 3, "n_tool_calls": 1, "output": '"2 + 3 = 5."'}
    (tool,) = store.rows("select tool_name, arguments, result from tool_calls")
    assert (tool["tool_name"], json.loads(tool["arguments"]), tool["result"]) == ("add", {"a": 2, "b": 3}, "5")
    (event,) = store.rows("select event_type, agent_id, target from events")
    assert event == {"event_type": "handoff", "agent_id": "calc", "target": "writer"}
    assert [s["kind"] for s in store.rows("select kind from steps order by step_index")] == [
        "llm", "tool", "llm", "event", "llm"]
