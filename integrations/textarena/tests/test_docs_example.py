"""The examples of docs/integrations/textarena.md run: the ten lines play every training and
held-out lake with a policy that reads the board, and the recording snippet stores rollouts."""

from __future__ import annotations

import re
from pathlib import Path

from policies import BoardReadingPolicy

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "textarena.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_first_example_is_ten_lines():
    assert len([line for line in examples()[0].splitlines() if line.strip()]) <= 10


def test_the_examples_play_and_record(db_path, store, capsys):
    ten_lines, recording = examples()[:2]
    namespace = {"policy": BoardReadingPolicy()}
    exec(compile(ten_lines, str(DOC), "exec"), namespace)
    assert capsys.readouterr().out.strip() == "5 of 5 held-out lakes crossed"
    assert all(r.total_reward == 1.0 and r.steps == 6 for r in namespace["train"])
    exec(compile(recording.replace('"lake.duckdb"', repr(str(db_path))), str(DOC), "exec"), namespace)
    rows = store.rows("select count(*) as n, min(total_reward) as low, sum(n_llm_calls) as calls from rollouts")
    assert rows == [{"n": 80, "low": 1.0, "calls": 480}]  # 10 lakes x 8 samples x 6 steps
