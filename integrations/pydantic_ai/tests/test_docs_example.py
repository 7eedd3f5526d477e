"""The ten-line example of docs/integrations/pydantic-ai.md runs with the entry point loaded the
way an installed package is (no other code), and its run is in the views."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from agent_rl_plugin import plugins

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "pydantic-ai.md"


def example() -> str:
    return re.search(r"## Ten lines\n\n```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def scripted_model() -> FunctionModel:
    def script(messages, info):
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("divide", {"a": 6, "b": 3}, tool_call_id="d1")])
        return ModelResponse(parts=[TextPart("6/3 = 2.0")])

    return FunctionModel(script, model_name="scripted")


def test_example_is_ten_lines():
    assert len([line for line in example().splitlines() if line.strip()]) <= 10


def test_example_records_into_the_views(store, capsys):
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=True))  # as installed
    code = example().replace('"pydantic_ai.duckdb"', repr(str(store.path)))
    exec(compile(code, str(DOC), "exec"), {"model": scripted_model()})
    assert capsys.readouterr().out == "6/3 = 2.0\n"
    (rollout,) = store.rows("select agent_name, input, output, n_llm_calls, n_tool_calls from rollouts")
    assert rollout == {"agent_name": "calc", "input": "What is 6/3?", "output": "6/3 = 2.0",
                       "n_llm_calls": 2, "n_tool_calls": 1}
    (tool,) = store.rows("select tool_name, arguments, result, status from tool_calls")
    assert (tool["tool_name"], json.loads(tool["arguments"]), tool["result"], tool["status"]) == (
        "divide", {"a": 6, "b": 3}, "2.0", "ok")
    assert [s["kind"] for s in store.rows("select kind from steps order by step_index")] == ["llm", "tool", "llm"]
