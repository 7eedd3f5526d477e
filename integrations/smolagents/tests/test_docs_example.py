"""The ten-line example of docs/integrations/smolagents.md runs (scripted model) and its rollout's
LLM calls, tool calls and steps are in the views."""

from __future__ import annotations

import re
from pathlib import Path

from fakes import Lookup, ScriptedModel, divide, tool_calling_script

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "smolagents.md"


def example() -> str:
    return re.search(r"## Ten lines\n\n```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def test_example_is_ten_lines():
    assert len([line for line in example().splitlines() if line.strip()]) <= 10


def test_example_records_into_the_views(store, capsys):
    code = example().replace('"smolagents.duckdb"', repr(str(store.path)))
    exec(compile(code, str(DOC), "exec"), {"model": ScriptedModel(tool_calling_script()), "divide": divide, "lookup": Lookup()})
    assert capsys.readouterr().out.rstrip().endswith("6/3 = 2.0")
    (rollout,) = store.rows("select n_llm_calls, n_tool_calls, n_tool_errors from rollouts")
    assert rollout == {"n_llm_calls": 3, "n_tool_calls": 4, "n_tool_errors": 2}
    assert {s["kind"] for s in store.rows("select kind from steps")} == {"llm", "tool", "event"}
