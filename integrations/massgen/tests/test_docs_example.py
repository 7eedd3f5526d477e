"""The ten-line example of docs/integrations/massgen.md runs (with scripted backends) and its
rollout's LLM calls, tool calls and coordination events are in the views."""

from __future__ import annotations

import re
from pathlib import Path

from fakes import ScriptedBackend, two_agent_scripts

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "massgen.md"


def example() -> str:
    return re.search(r"## Ten lines\n\n```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def test_example_is_ten_lines():
    assert len([line for line in example().splitlines() if line.strip()]) <= 10


def test_example_records_into_the_views(tmp_path, store, capsys):
    scripts = two_agent_scripts()
    code = example().replace('"massgen.duckdb"', repr(str(store.path)))
    exec(compile(code, str(DOC), "exec"), {"backend_a": ScriptedBackend(scripts["agent_a"]),
                                             "backend_b": ScriptedBackend(scripts["agent_b"])})
    assert "Final answer: 4" in capsys.readouterr().out
    (rollout,) = store.rows("select n_llm_calls, n_tool_calls from rollouts")
    assert rollout == {"n_llm_calls": 6, "n_tool_calls": 1}
    kinds = {r["event_type"] for r in store.rows("select event_type from events")}
    assert {"new_answer", "vote", "restart", "final_answer"} <= kinds
