"""The README's promises hold: its quickstart runs, and CI runs its install and test commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_quickstart_records_a_tool_call(tmp_path):
    (quickstart,) = [b for b in code_blocks("python") if "RLAgentMixin" in b]
    result = subprocess.run(
        [sys.executable, "-c", quickstart], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "I found: HI"
    con = duckdb.connect(str(tmp_path / "agent_rl.duckdb"), read_only=True)
    assert con.execute("select tool_name, arguments, result from tool_calls").fetchall() == [
        ("search", '{"query": "hi"}', '"HI"')
    ]
    assert con.execute("select name, value from rewards").fetchall() == [("user_feedback", 1.0)]


def test_ci_runs_the_readme_install_and_test_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    bash_blocks = code_blocks("bash")
    install = next(b.strip() for b in bash_blocks if b.strip().startswith("pip install"))
    test = next(b.strip() for b in bash_blocks if "pytest" in b)
    assert install in ci
    assert test in ci


def test_pipeline_from_rollouts_to_a_kto_dataset(tmp_path):
    """The README's 'From scored rollouts to training data' commands, run as written."""
    import json
    import os
    import shlex
    import shutil

    (block,) = [b for b in code_blocks("bash") if "agent-rl rollouts run" in b]
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "AGENT_RL_DB": str(tmp_path / "pipeline.duckdb"), "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"}
    exe = shutil.which("agent-rl") or str(Path(sys.executable).parent / "agent-rl")
    for line in block.strip().splitlines():
        args = shlex.split(line)
        assert args[0] == "agent-rl"
        result = subprocess.run([exe, *args[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
    rows = [json.loads(line) for line in (tmp_path / "kto.jsonl").read_text().splitlines()]
    assert len(rows) == 32  # 4 tasks x 8 rollouts
    assert {type(r["label"]) for r in rows} == {bool} and any(r["label"] for r in rows)
    assert rows[0]["prompt"][0]["role"] == "user" and rows[0]["completion"][0]["role"] == "assistant"
    con = duckdb.connect(str(tmp_path / "pipeline.duckdb"), read_only=True)
    (n_advantages,) = con.execute("select count(*) from advantages where method = 'gigpo'").fetchone()
    assert n_advantages > 32
