"""The command line: query (read-only), traces list/show, db info, demo, clear errors."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

import agent_rl_plugin as arl
from agent_rl_plugin.cli.main import main
from agent_rl_plugin.demo.calculator import demo_tasks
from agent_rl_plugin.demo.run import run_groups
from agent_rl_plugin.store import lease

ROOT = Path(__file__).resolve().parents[1]


def agent_rl(capsys, *args: str) -> tuple[int | str, str, str]:
    """Run ``agent-rl ARGS`` in this process; returns (exit code, stdout, stderr); the code is
    whatever `SystemExit` carried (a message string exits 1)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code or 0, out, err


@pytest.fixture
def recorded(db_path: Path) -> tuple[Path, list]:
    """A database holding 2 tasks x 3 rollouts of the demo agent, released for reading."""
    results = asyncio.run(run_groups(demo_tasks(2), group_size=3, seed=1))
    assert arl.flush()
    arl.shutdown()
    return db_path, results


def test_query_shows_every_tool_call(recorded, capsys):
    path, results = recorded
    code, out, _ = agent_rl(
        capsys,
        "query",
        "--db",
        str(path),
        "--format",
        "json",
        "select rollout_id, tool_name, arguments, result, error from tool_calls",
    )
    assert code == 0
    rows = json.loads(out)
    assert {r["tool_name"] for r in rows} == {"lookup", "calculate"}
    assert {r["rollout_id"] for r in rows} == {r.rollout_id for r in results}
    lookups = [r for r in rows if r["tool_name"] == "lookup"]
    assert all(json.loads(r["arguments"])["item"] in {"notebook", "pen", "apple", "coffee"} for r in lookups)


def test_query_csv_and_table_formats(recorded, capsys):
    path, _ = recorded
    code, out, _ = agent_rl(capsys, "query", "--db", str(path), "--format", "csv", "select count(*) as n from rollouts")
    assert code == 0 and out.splitlines() == ["n", "6"]
    code, out, _ = agent_rl(capsys, "query", "--db", str(path), "select task_id from rollouts group by 1 order by 1")
    assert code == 0 and "shop-0" in out and "shop-1" in out and "2 rows" in out


@pytest.mark.parametrize(
    "sql",
    [
        "delete from spans",
        "drop view rollouts",
        "insert into rewards (name, value) values ('x', 1)",
        "update spans set name = 'x'",
        "create table t as select 1",
        "copy spans to 'stolen.csv'",
        "attach 'other.duckdb' as other",
        "select 1; delete from spans",
    ],
)
def test_query_refuses_writes_and_changes_nothing(recorded, capsys, sql, tmp_path, monkeypatch):
    path, _ = recorded
    monkeypatch.chdir(tmp_path)
    before = duckdb.connect(str(path), read_only=True).execute("select count(*) from spans").fetchone()
    code, out, err = agent_rl(capsys, "query", "--db", str(path), sql)
    assert code == 1
    assert "only reads" in err and "fix:" in err
    after = duckdb.connect(str(path), read_only=True).execute("select count(*) from spans").fetchone()
    assert before == after
    assert not (tmp_path / "stolen.csv").exists()


def test_query_reports_sql_errors_in_one_line(recorded, capsys):
    path, _ = recorded
    code, _, err = agent_rl(capsys, "query", "--db", str(path), "select nope from tool_calls")
    assert code == 1
    assert err.startswith("error: SQL error:") and "nope" in err
    assert "Traceback" not in err


def test_missing_database_is_a_clear_error(tmp_path, capsys):
    code, _, err = agent_rl(capsys, "query", "--db", str(tmp_path / "none.duckdb"), "select 1")
    assert code == 1
    assert "no database" in err and "agent-rl demo" in err


def test_traces_list_and_show(recorded, capsys):
    path, results = recorded
    code, out, _ = agent_rl(capsys, "traces", "list", "--db", str(path), "--json")
    assert code == 0
    listed = json.loads(out)
    assert {r["rollout_id"] for r in listed} == {r.rollout_id for r in results}
    assert all(r["n_tool_calls"] >= 3 for r in listed)

    target = results[0]
    code, out, _ = agent_rl(capsys, "traces", "show", target.rollout_id[:10], "--db", str(path))
    assert code == 0
    assert f"rollout {target.rollout_id}" in out
    assert "invoke_agent TracedCalculatorAgent" in out
    assert "execute_tool lookup" in out and "execute_tool calculate" in out
    assert "chat scripted-shopper-1" in out
    assert re.search(r"reward correct = [01]\.0", out)

    code, out, _ = agent_rl(capsys, "traces", "show", target.rollout_id, "--db", str(path), "--json")
    tree = json.loads(out)
    (root,) = tree["spans"]
    assert root["name"] == "rollout shop-0" or root["name"].startswith("rollout ")
    agent_span = root["children"][0]
    assert agent_span["name"] == "invoke_agent TracedCalculatorAgent"
    child_names = {c["name"] for c in agent_span["children"]}
    assert {"execute_tool lookup", "execute_tool calculate", "chat scripted-shopper-1"} <= child_names
    assert tree["rewards"][0]["name"] == "correct"


def test_traces_show_unknown_id(recorded, capsys):
    path, _ = recorded
    code, _, err = agent_rl(capsys, "traces", "show", "does-not-exist", "--db", str(path))
    assert code == 1 and "no rollout" in err and "agent-rl traces list" in err


def test_db_info(recorded, capsys):
    path, _ = recorded
    code, out, _ = agent_rl(capsys, "db", "info", "--db", str(path), "--json")
    assert code == 0
    info = json.loads(out)
    assert info["row_counts"]["rollouts"] == 6
    assert info["row_counts"]["rewards"] == 6
    assert info["row_counts"]["tool_calls"] >= 18
    assert len(info["migrations"]) >= 1


def test_db_migrate_creates_then_has_nothing_left(tmp_path, capsys):
    path = tmp_path / "fresh.duckdb"
    code, out, _ = agent_rl(capsys, "db", "migrate", "--db", str(path), "--json")
    assert code == 0 and len(json.loads(out)["applied"]) >= 3
    code, out, _ = agent_rl(capsys, "db", "migrate", "--db", str(path), "--json")
    assert code == 0 and json.loads(out)["applied"] == []


def test_database_from_environment(recorded, capsys, monkeypatch):
    path, _ = recorded
    monkeypatch.setenv("AGENT_RL_DB", str(path))
    code, out, _ = agent_rl(capsys, "query", "--format", "csv", "select count(*) as n from rollouts")
    assert code == 0 and out.splitlines()[1] == "6"


def test_locked_database_names_the_fix(recorded, capsys, tmp_path, monkeypatch):
    path, _ = recorded
    monkeypatch.setattr(lease, "READ_WAIT_S", 1.0)  # the message, not the 15 s a reader waits by default
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(path)!r})
            print("locked", flush=True)
            time.sleep(30)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, _, err = agent_rl(capsys, "query", "--db", str(path), "select 1")
    finally:
        holder.kill()
        holder.wait()
    assert code == 1
    assert "locked" in err.lower() and f"PID {holder.pid}" in err and "close its connection" in err


def test_demo_runs_end_to_end_from_the_console_script(tmp_path, demo_tour):
    db, summary = demo_tour.db, demo_tour.summary  # `agent-rl demo --tour --json`, run once per session
    assert summary["rollouts_run"] == 16
    rows = summary["rows"]
    assert rows["rollouts"] == 16 and rows["events"] == 16
    # the agent's own reward, plus the built-in reward plugins' episode and step rows
    scoring = {r["name"]: r for r in summary["scoring"]["rewards"]}
    assert summary["scoring"]["ok"] is True
    assert scoring["task_completion"]["scored"] == 16 and scoring["tool_success"]["scored"] == 16
    assert rows["rewards"] == 16 + sum(r["scored"] + r["step_rows"] for r in scoring.values())
    assert rows["tool_calls"] >= 16 * 3 and rows["llm_calls"] >= 16 * 4
    assert 0 < summary["correct"] < 16  # a stochastic agent: groups differ
    # GRPO and GiGPO advantages of this run's groups land in the advantages table
    assert summary["advantages"]["grpo"]["rows"] == 16 and summary["advantages"]["gigpo"]["rows"] >= 16 * 3
    # a few steps each of KTO, offline GRPO and offline GiGPO on a tiny model, recorded as training runs
    training = {run["method"]: run for run in summary["training"]}
    assert set(training) == {"kto", "offline_grpo", "gigpo"}, summary["training"]
    assert all("skipped" not in run for run in training.values()), summary["training"]
    kto = training["kto"]
    assert kto["steps"] == 8 and kto["rows"] == 16 and kto["final_loss"] is not None
    assert kto["labels"] == {"desirable": summary["correct"], "undesirable": 16 - summary["correct"]}
    assert "loss" in kto["metrics"] and "train_runtime" in kto["metrics"]
    for name in ("offline_grpo", "gigpo"):
        run = training[name]
        assert run["steps"] == 16 and run["final_loss"] is not None
        assert set(run["moved"]) == {"logp/positive", "logp/negative"}
        (pos_base, pos_trained), (neg_base, neg_trained) = run["moved"]["logp/positive"], run["moved"]["logp/negative"]
        assert pos_trained - neg_trained > pos_base - neg_base  # positive actions gained on negative ones
    assert training["gigpo"]["rows"] > training["offline_grpo"]["rows"]  # one row per LLM step
    for run in training.values():
        assert Path(run["adapter_path"], "adapter_config.json").is_file()
    con = duckdb.connect(str(db), read_only=True)
    assert sorted(con.execute("select method, status, n_rows from training_runs").fetchall()) == sorted(
        (name, "ok", run["rows"]) for name, run in training.items()
    )
    runs = dict(con.execute("select method, run_id from training_runs where status = 'ok'").fetchall())
    assert set(runs) == {"kto", "offline_grpo", "gigpo"}
    for method, run_id in runs.items():
        assert con.execute(
            "select count(distinct step) from training_metrics where run_id = ? and name = 'loss'", [run_id]
        ).fetchone() == ((8,) if method == "kto" else (16,)), method
    con.close()
    assert demo_tour.seconds < 180


def test_demo_human_output_prints_the_tree_the_training_and_the_next_queries(
    tmp_path, demo_tour, plugin_manager, capsys, monkeypatch
):
    """``agent-rl demo --tour`` without ``--json``, in this process: it records, scores and
    computes advantages for real; its training step (the same ``train_all`` call the JSON run
    above makes from the console script, checked there) answers with that run's training
    summaries, so the human rendering of them is checked without training three adapters again."""
    from agent_rl_plugin.demo import training

    db = tmp_path / "demo2.duckdb"
    calls: list[tuple] = []

    def trained_once(path, ids, advantages, on_start=None):
        calls.append((path, ids, advantages))
        return demo_tour.summary["training"]

    monkeypatch.setattr(training, "train_all", trained_once)
    code, out, err = agent_rl(capsys, "demo", "--tour", "--db", str(db))
    assert code == 0, err
    # the training step got this run's database, its 16 rollouts and the advantages just computed
    ((path, ids, advantages),) = calls
    assert path == str(db) and ids.count("'") == 2 * 16
    assert advantages["grpo"]["rows"] == 16 and advantages["gigpo"]["rows"] >= 16 * 3
    assert "Try next" in out and "execute_tool calculate" in out
    assert "training runs" in out and "GiGPO" in out
    assert "Advantages" in out
