"""``agent-rl train grpo`` (online and ``--offline``), ``agent-rl train gigpo``, ``--config``
files, ``--resume`` and ``agent-rl train config``: tiny model, demo rollouts in a real store,
every run recorded in training_runs with the SQL that selected its data."""

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
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2"))


@pytest.fixture
def scored(db_path: Path) -> Path:
    record_demo(tasks=2, group_size=4, seed=1)
    score(db_path, rewards=["task_completion", "tool_success"], workers=0)
    return db_path


def runs(path: Path) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("select method, status, dataset_sql, n_rows from training_runs order by started_at").fetchall()
    finally:
        con.close()


SMALL = ("--max-steps", "3", "--batch-size", "4", "--lora-r", "4", "--lr", "5e-3")


def test_offline_grpo_trains_every_llm_call_of_multi_step_rollouts(scored, tiny, tmp_path, capsys):
    code, out, err = agent_rl(
        capsys, "train", "grpo", "--offline", "--model", tiny, "--db", str(scored), "--where", "task_id is not null",
        *SMALL, "--out", str(tmp_path / "grpo"), "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["method"] == "offline_grpo" and summary["recipe"] == "steps"
    con = duckdb.connect(str(scored), read_only=True)
    try:
        llm_calls = con.execute("select count(*) from llm_calls where task_id is not null").fetchone()[0]
        grpo_rows = con.execute("select count(*) from advantages where method = 'grpo'").fetchone()[0]
    finally:
        con.close()
    # the demo agent makes several calls per rollout: each is a training row, with its episode's advantage
    assert summary["extra"]["format"] == "completions" and summary["extra"]["advantage_level"] == "step"
    assert summary["extra"]["steps_total"] if "steps_total" in summary["extra"] else True
    assert grpo_rows == 8 and llm_calls > 8
    assert runs(scored) == [("offline_grpo", "ok", "task_id is not null", summary["rows"])]


def test_offline_grpo_recipe_groups_trains_one_completion_per_rollout(scored, tiny, tmp_path, capsys):
    code, out, err = agent_rl(
        capsys, "train", "grpo", "--offline", "--model", tiny, "--db", str(scored), "--where", "task_id is not null",
        "--recipe", "groups", *SMALL, "--out", str(tmp_path / "grpo"), "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["method"] == "offline_grpo" and summary["steps"] == 3 and summary["recipe"] == "groups"
    assert summary["rows"] > 0 and summary["extra"]["format"] == "groups"
    assert set(summary["moved"]) <= {"logp/positive", "logp/negative"} and summary["moved"]
    assert Path(summary["adapter_path"], "adapter_config.json").is_file()
    assert "hardware: cpu" in err  # the profile is printed at start (stderr with --json)
    assert runs(scored) == [("offline_grpo", "ok", "task_id is not null", summary["rows"])]


def test_gigpo_reads_the_advantages_table(scored, tiny, tmp_path, capsys):
    code, out, err = agent_rl(capsys, "advantages", "compute", "--method", "gigpo", "--db", str(scored),
                              "--reward", "task_completion", "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    code, out, err = agent_rl(
        capsys, "train", "gigpo", "--model", tiny, "--db", str(scored), "--from-table", "--advantages-run", run_id,
        *SMALL, "--out", str(tmp_path / "gigpo"),
    )
    assert code == 0, err
    assert "Trained GIGPO (LoRA)" in out and "log-prob per token of positive-advantage actions" in out
    assert "hardware: cpu" in out and "run_id:" in out
    (method, status, _, n_rows), = runs(scored)
    assert (method, status) == ("gigpo", "ok") and n_rows > 8  # one row per LLM step, more than rollouts


def test_online_grpo_samples_and_scores_with_reward_plugins(scored, tiny, tmp_path, capsys):
    code, out, err = agent_rl(
        capsys, "train", "grpo", "--model", tiny, "--db", str(scored), "--reward", "task_completion",
        "--num-generations", "2", "--batch-size", "2", "--max-steps", "2", "--max-completion-length", "8",
        "--out", str(tmp_path / "online"), "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["method"] == "grpo" and summary["steps"] == 2
    assert summary["rows"] == 2  # the two tasks' prompts, deduplicated over 8 rollouts
    assert summary["extra"]["reward_names"] == ["task_completion"]
    assert "rewards/task_completion/mean" in summary["metrics"]
    assert runs(scored) == [("grpo", "ok", "all rollouts", 2)]


def test_a_config_file_with_flags_on_top_and_resume(scored, tiny, tmp_path, capsys):
    template = tmp_path / "gigpo.yaml"
    code, out, err = agent_rl(capsys, "train", "config", "gigpo", "--out", str(template))
    assert code == 0, err and template.is_file()
    config = tmp_path / "train.toml"
    out_dir = tmp_path / "resumable"
    config.write_text(
        f'method = "gigpo"\nmodel = "{tiny}"\noutput_dir = "{out_dir}"\nlearning_rate = 5e-3\n'
        "batch_size = 4\nlora_r = 4\nmax_steps = 99\n",
        encoding="utf-8",
    )
    code, out, err = agent_rl(capsys, "train", "gigpo", "--config", str(config), "--db", str(scored),
                              "--max-steps", "2", "--save-steps", "1", "--json")
    assert code == 0, err
    first = json.loads(out)
    assert first["steps"] == 2 and first["output_dir"] == str(out_dir)  # the flag won over max_steps = 99
    assert (out_dir / "checkpoint-2").is_dir()
    code, out, err = agent_rl(capsys, "train", "gigpo", "--config", str(config), "--db", str(scored),
                              "--max-steps", "3", "--resume", "latest", "--json")
    assert code == 0, err
    second = json.loads(out)
    assert second["steps"] == 3 and second["resumed_from"].endswith("checkpoint-2")
    # the offline method of a config file must agree with the command
    code, _, err = agent_rl(capsys, "train", "kto", "--config", str(config), "--db", str(scored))
    assert code == 1 and "gigpo" in err


def test_clear_errors(scored, tiny, tmp_path, capsys):
    out = ("--out", str(tmp_path / "x"))
    code, _, err = agent_rl(capsys, "train", "grpo", "--model", tiny, "--db", str(scored), *out)
    assert code == 1 and "at least one --reward" in err and "task_completion" in err
    code, _, err = agent_rl(capsys, "train", "grpo", "--model", tiny, "--db", str(scored), "--dataset", "x.jsonl", *out)
    assert code == 1 and "need --offline" in err
    code, _, err = agent_rl(capsys, "train", "grpo", "--offline", "--num-generations", "4", "--model", tiny,
                            "--db", str(scored), *out)
    assert code == 1 and "online options" in err
    code, _, err = agent_rl(capsys, "train", "grpo", "--model", tiny, "--db", str(scored), "--reward", "nope", *out)
    assert code == 1 and "nope" in err
    code, _, err = agent_rl(capsys, "train", "gigpo", "--db", str(scored), *out)
    assert code == 1 and "--model" in err
    code, _, err = agent_rl(capsys, "train", "grpo", "--offline", "--model", tiny, "--db", str(scored),
                            "--where", "task_id = 'none'", *out)
    assert code == 1 and "no rollouts match" in err
    assert runs(scored) == []


def test_training_while_agent_rl_serve_holds_the_store(scored, tiny, tmp_path, capsys):
    """The dataset comes from a snapshot the receiver writes; the run trains and says plainly that
    it could not be recorded (the receiver is the file's only writer)."""
    import signal
    import subprocess
    import sys
    import time

    from agent_rl_plugin.receiver import find_receiver

    server = subprocess.Popen(
        [sys.executable, "-m", "agent_rl_plugin", "serve", "--db", str(scored), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while (find_receiver(scored) or {}).get("pid") != server.pid:
            assert server.poll() is None and time.monotonic() < deadline, server.communicate()
            time.sleep(0.05)
        code, out, err = agent_rl(capsys, "train", "gigpo", "--model", tiny, "--db", str(scored), *SMALL,
                                  "--out", str(tmp_path / "held"), "--json")
        assert code == 0, err
        summary = json.loads(out)
        assert summary["steps"] == 3 and summary["run_id"] is None
        assert "not recorded" in err and "adapter" in err
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert runs(scored) == []
