"""``agent-rl rollouts run MODULE:FUNC --tasks FILE``: an agent module in the current folder."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from score_support import agent_rl, rows

from agent_rl_plugin.rewards.runner import score

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "rollouts"

AGENT_MODULE = '''
import asyncio

import agent_rl_plugin as arl

NOT_AN_AGENT = 42


@arl.trace_tool(name="calculate")
def calculate(expression):
    return eval(expression, {"__builtins__": {}})


async def solve(task):
    if task["task_id"] == "broken":
        raise RuntimeError("this task breaks the agent")
    if task["task_id"] == "slow":
        await asyncio.sleep(30)
    await asyncio.sleep(0.01)
    arl.record_llm_call("fake-model", task["prompt"], "calling calculate")
    return f"The answer is {calculate(task['metadata']['expression'])}"


def always_fails(task):
    raise ValueError("no API key")
'''

TASKS = [
    {"task_id": "add", "prompt": "2+2?", "ground_truth": 4, "metadata": {"expression": "2+2"}},
    {"task_id": "mul", "prompt": "6*7?", "ground_truth": 42, "metadata": {"expression": "6*7"}},
    {"task_id": "broken", "prompt": "?", "ground_truth": 0, "metadata": {"expression": "0"}},
]


@pytest.fixture
def folder(tmp_path, monkeypatch, plugin_manager):
    """tmp_path as the current folder, holding the agent module and a task file; sys.path and
    the imported module are restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"cli_agent_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(AGENT_MODULE))
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    yield tmp_path, name
    sys.modules.pop(name, None)


def test_run_an_agent_module_from_the_current_folder(folder):
    tmp_path, module = folder
    db = tmp_path / "runs.duckdb"
    result = agent_rl("rollouts", "run", f"{module}:solve", "--tasks", "tasks.jsonl", "--group-size", "3",
                      "--concurrency", "4", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["rollouts"], summary["ok"], summary["error"], summary["timeout"]) == (9, 6, 3, 0)
    per_task = {row["task_id"]: row for row in summary["per_task"]}
    assert (per_task["add"]["ok"], per_task["broken"]["error"]) == (3, 3)
    assert per_task["mul"]["group_id"] == f"mul/{summary['run_id']}"
    assert summary["error_examples"] == ["RuntimeError: this task breaks the agent"]
    stored = rows(db, "select task_id, group_id, status, output, n_llm_calls, n_tool_calls from rollouts order by task_id")
    assert len(stored) == 9
    assert {(r["task_id"], r["status"]) for r in stored} == {("add", "ok"), ("mul", "ok"), ("broken", "error")}
    assert {json.loads(r["output"]) for r in stored if r["task_id"] == "mul"} == {"The answer is 42"}
    assert all((r["n_llm_calls"], r["n_tool_calls"]) == (1, 1) for r in stored if r["status"] == "ok")
    assert {r["task_id"] for r in rows(db, "select task_id from tasks")} == {"add", "mul", "broken"}


def test_summary_table_and_timeout(folder):
    tmp_path, module = folder
    (tmp_path / "slow.jsonl").write_text('{"task_id": "slow", "prompt": "?"}\n{"task_id": "add", "prompt": "2+2?", "metadata": {"expression": "2+2"}}\n')
    result = agent_rl("rollouts", "run", f"{module}:solve", "--tasks", "slow.jsonl", "--group-size", "2",
                      "--timeout", "0.2", "--db", str(tmp_path / "runs.duckdb"))
    assert result.exit_code == 0, result.output
    assert "rollouts per task" in result.stdout
    assert "Ran 4 rollouts (2 tasks x 2)" in result.stdout and "2 ok, 2 failed (2 timed out)" in result.stdout
    assert "error: TimeoutError: rollout timed out after 0.2 s" in result.stdout


def test_every_rollout_failing_exits_non_zero(folder):
    tmp_path, module = folder
    result = agent_rl("rollouts", "run", f"{module}:always_fails", "--tasks", "tasks.jsonl", "--group-size", "1",
                      "--db", str(tmp_path / "runs.duckdb"))
    assert result.exit_code == 1
    assert "Every rollout failed" in result.stdout and "ValueError: no API key" in result.stdout
    assert len(rows(tmp_path / "runs.duckdb", "select * from rollouts where status = 'error'")) == 3


def test_a_file_path_works_as_the_module(folder):
    tmp_path, module = folder
    result = agent_rl("rollouts", "run", f"./{module}.py:solve", "--tasks", "tasks.jsonl", "--group-size", "1",
                      "--db", str(tmp_path / "runs.duckdb"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] == 2


@pytest.mark.parametrize(
    ("target", "message", "hint"),
    [
        ("no_such_module_xyz:run", "no module named 'no_such_module_xyz' (looked in", "run from the folder"),
        ("{module}:nope", "has no attribute 'nope'", "always_fails, calculate, solve"),
        ("{module}:NOT_AN_AGENT", "is not callable (it is a int)", "point at a function"),
        ("{module}", "is not MODULE:FUNC", "e.g. agent-rl rollouts run"),
        ("missing_file.py:run", "no file at", "pass an existing .py file"),
    ],
)
def test_clear_errors_for_the_agent(folder, target, message, hint):
    tmp_path, module = folder
    result = agent_rl("rollouts", "run", target.format(module=module), "--tasks", "tasks.jsonl", "--db", str(tmp_path / "x.duckdb"))
    assert result.exit_code == 1
    assert message in result.stderr and hint in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "x.duckdb").exists()


def test_a_module_that_fails_to_import_is_told_apart_from_a_missing_one(folder):
    tmp_path, _ = folder
    (tmp_path / "needs_dep_mod.py").write_text("import some_uninstalled_dependency_xyz\n")
    result = agent_rl("rollouts", "run", "needs_dep_mod:run", "--tasks", "tasks.jsonl", "--db", str(tmp_path / "x.duckdb"))
    sys.modules.pop("needs_dep_mod", None)
    assert result.exit_code == 1
    assert "importing needs_dep_mod failed: No module named 'some_uninstalled_dependency_xyz'" in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"task_id": "a"}\n{"prompt": "no id"}\n{oops\n', "2 bad lines in bad.jsonl: line 2: task_id is missing; line 3: invalid JSON"),
        ("", "no tasks in bad.jsonl"),
        ("\n\n", "no tasks in bad.jsonl"),
    ],
)
def test_clear_errors_for_the_task_file(folder, content, message):
    tmp_path, module = folder
    (tmp_path / "bad.jsonl").write_text(content)
    result = agent_rl("rollouts", "run", f"{module}:solve", "--tasks", "bad.jsonl", "--db", str(tmp_path / "x.duckdb"))
    assert result.exit_code == 1
    assert message in result.stderr
    missing = agent_rl("rollouts", "run", f"{module}:solve", "--tasks", "nope.jsonl")
    assert missing.exit_code == 1 and "no task file at nope.jsonl" in missing.stderr


def test_the_example_agent_runs_and_its_rollouts_score(tmp_path, monkeypatch, plugin_manager):
    for name in ("shop_agent.py", "tasks.jsonl"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "shop_agent", raising=False)
    db = tmp_path / "shop.duckdb"
    result = agent_rl("rollouts", "run", "shop_agent:run", "--tasks", "tasks.jsonl", "--group-size", "2",
                      "--seed", "3", "--db", str(db), "--json")
    sys.modules.pop("shop_agent", None)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] == 8
    report = score(str(db), rewards=["tool_success", "task_completion"], workers=0)
    assert report.ok and report.rewards["task_completion"].scored == 8
    assert rows(db, "select count(*) as n from steps where kind = 'tool'")[0]["n"] >= 8 * 3
