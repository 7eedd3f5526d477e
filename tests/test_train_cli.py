"""``agent-rl train kto``: trains a tiny model on demo rollouts scored with task_completion,
records the run in training_runs / training_metrics, prints a summary; clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.cli.main import main  # noqa: E402
from agent_rl_plugin.rewards.runner import score  # noqa: E402
from agent_rl_plugin.train import build_tiny_model  # noqa: E402
from score_support import record_demo  # noqa: E402


def agent_rl(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code or 0, out, err


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", hidden_size=32)


@pytest.fixture
def scored(db_path: Path) -> tuple[Path, list]:
    results = record_demo(tasks=2, group_size=4, seed=1)
    score(db_path, rewards=["task_completion"], workers=0)
    return db_path, results


def test_train_kto_on_the_store_records_the_run(scored, tiny, tmp_path, capsys):
    path, results = scored
    out_dir = tmp_path / "run"
    code, out, err = agent_rl(
        capsys, "train", "kto", "--model", tiny, "--db", str(path), "--label", "group", "--where", "true",
        "--max-steps", "2", "--batch-size", "2", "--lora-r", "4", "--out", str(out_dir), "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["steps"] == 2 and summary["rows"] >= 2
    assert summary["labels"]["desirable"] > 0 and summary["labels"]["undesirable"] > 0
    assert summary["final_loss"] is not None
    assert Path(summary["adapter_path"], "adapter_config.json").is_file()
    con = duckdb.connect(str(path), read_only=True)
    run = con.execute("select method, status, n_rows, dataset_sql, model, adapter_path from training_runs").fetchall()
    assert run == [("kto", "ok", summary["rows"], "true", tiny, summary["adapter_path"])]
    steps = con.execute(
        "select distinct step from training_metrics where run_id = ? and name = 'loss' order by step", [summary["run_id"]]
    ).fetchall()
    assert steps == [(1,), (2,)]
    con.close()
    # the human-readable summary
    code, out, err = agent_rl(
        capsys, "train", "kto", "--model", tiny, "--db", str(path), "--label", "group",
        "--max-steps", "1", "--batch-size", "2", "--out", str(tmp_path / "run2"),
    )
    assert code == 0, err
    assert "steps: 1, final loss:" in out and "adapter:" in out and "run_id:" in out and "desirable" in out


def test_train_kto_from_a_dataset_file(scored, tiny, tmp_path, capsys):
    path, _ = scored
    file = tmp_path / "kto.jsonl"
    code, _, err = agent_rl(capsys, "dataset", "build", "kto", "--db", str(path), "--label", "group", "--out", str(file))
    assert code == 0, err
    code, out, err = agent_rl(
        capsys, "train", "kto", "--model", tiny, "--dataset", str(file), "--db", str(path), "--max-steps", "1",
        "--batch-size", "2", "--out", str(tmp_path / "run"), "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["steps"] == 1
    # a dataset run is recorded too, in --db (issue 18), with the file as its selection
    con = duckdb.connect(str(path), read_only=True)
    recorded = con.execute("select run_id, dataset_sql from training_runs").fetchall()
    con.close()
    assert recorded == [(summary["run_id"], f"file:{file}")]


def test_train_kto_errors(scored, tiny, tmp_path, capsys):
    path, _ = scored
    common = ("--max-steps", "1", "--batch-size", "2", "--out", str(tmp_path / "run"))
    code, _, err = agent_rl(capsys, "train", "kto", "--model", str(tmp_path / "missing" / "model"), "--db", str(path), *common)
    assert code == 1 and "does not exist" in err and "fix:" in err
    code, _, err = agent_rl(capsys, "train", "kto", "--model", tiny, "--db", str(path), "--threshold", "-1", *common)
    assert code == 1 and "one label class" in err and "--label quantile" in err
    code, _, err = agent_rl(capsys, "train", "kto", "--model", tiny, "--db", str(path), "--where", "task_id = 'nope'", *common)
    assert code == 1 and "no rollouts match" in err and "fix:" in err
    code, _, err = agent_rl(capsys, "train", "kto", "--model", tiny, "--db", str(tmp_path / "none.duckdb"), *common)
    assert code == 1 and "does not exist" in err
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("select count(*) from training_runs").fetchone() == (0,)
    con.close()
