"""The ten-line example of docs/integrations/langchain.md runs (with a scripted model) and its
rollout's LLM calls and tool calls are in the views; the README points at the same page."""

from __future__ import annotations

import re
from pathlib import Path

from langchain_core.messages import AIMessage

from fakes import ScriptedChatModel, call, usage

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "integrations" / "langchain.md"


def example() -> str:
    return re.search(r"## Ten lines\n\n```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def test_example_is_ten_lines():
    assert len([line for line in example().splitlines() if line.strip()]) <= 10


def test_example_records_into_the_views(store, capsys):
    model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[call("add", {"a": 2, "b": 3}, "c1")], usage_metadata=usage(20, 8)),
        AIMessage(content="2 + 3 = 5", usage_metadata=usage(31, 6)),
    ])
    code = example().replace('"langchain.duckdb"', repr(str(store.path)))
    exec(compile(code, str(DOC), "exec"), {"model": model})
    assert capsys.readouterr().out.strip() == "2 + 3 = 5"
    (rollout,) = store.rows("select agent_name, n_llm_calls, n_tool_calls, input_tokens, output_tokens from rollouts")
    assert rollout == {"agent_name": "calculator", "n_llm_calls": 2, "n_tool_calls": 1, "input_tokens": 51,
                       "output_tokens": 14}
    (tool,) = store.rows("select tool_name, arguments, result, status from tool_calls")
    assert tool == {"tool_name": "add", "arguments": '{"a": 2, "b": 3}', "result": '"5"', "status": "ok"}
    assert store.one("select content from events where event_type = 'final_answer'") == "2 + 3 = 5"


def test_readme_points_at_the_docs_page():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "docs/integrations/langchain.md" in readme
