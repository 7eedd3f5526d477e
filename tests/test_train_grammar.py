"""The training commands' grammar and the frictions of issue 18 (item 5, training parts), each
on a tiny real model and a real recorded store:

* boolean options are ``--x/--no-x`` flags with no ``<bool>`` shown, ``use_cpu``/``bf16`` included;
* ``--run NAME`` names a training run (its run_id, ``./runs/NAME``); a finished name is not reused;
* a template from ``train config`` loads with ``--config`` as written (``output_dir: ""``);
* ``--resume latest`` on a first run starts fresh with a note;
* a ``--dataset`` run is recorded in ``training_runs``;
* ``train gigpo`` uses the newest matching stored ``advantages compute`` run and says so,
  ``--recompute`` computes afresh;
* online GRPO whose reward is one constant all run warns (naming the cause) and records it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

pytest.importorskip("trl")
pytest.importorskip("peft")

from score_support import RewardsPlugin, record_demo  # noqa: E402

from agent_rl_plugin.cli.main import build_app, main  # noqa: E402
from agent_rl_plugin.rewards import reward  # noqa: E402
from agent_rl_plugin.rewards.runner import score  # noqa: E402
from agent_rl_plugin.train import build_tiny_model  # noqa: E402
from agent_rl_plugin.train.runs import constant_reward  # noqa: E402

SMALL = ("--max-steps", "1", "--batch-size", "2", "--lora-r", "2")


def agent_rl(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code or 0, out, err


def training_runs(path: Path) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(
            "select run_id, method, status, dataset_sql, output_dir, final_metrics from training_runs order by started_at"
        ).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", hidden_size=32, layers=1))


@pytest.fixture
def scored(db_path: Path) -> Path:
    record_demo(tasks=2, group_size=2, seed=1)
    score(db_path, rewards=["task_completion", "tool_success"], workers=0)
    return db_path


# -- help ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["kto", "grpo", "gigpo"])
def test_boolean_options_are_flags_without_a_bool_metavar(command):
    result = CliRunner().invoke(build_app(), ["train", command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    text = result.output
    for flag in ("--use-cpu", "--allow-download"):
        assert re.search(rf"{flag}\s+--no-{flag[2:]}", text), f"{flag} is not a --x/--no-x flag in train {command}"
    assert "--bf16" in text and "--no-bf16" in text
    rows = [line for line in text.splitlines() if re.search(r"--(use-cpu|bf16|allow-download|offline|tasks|per-group|"
                                                            r"from-table|recompute)\b", line)]
    assert rows and not [row for row in rows if "<bool>" in row], rows
    assert "--run" in text


def test_loop_and_policy_take_the_grammar_flags():
    for args, flags in (
        (["loop", "--help"], ("--run", "--out", "--allow-download", "-m", "-c", "-o")),
        (["policy", "serve", "--help"], ("--allow-download", "-m")),
    ):
        result = CliRunner().invoke(build_app(), args, env={"COLUMNS": "250"})
        assert result.exit_code == 0, result.output
        shown = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", result.output))
        assert set(flags) <= shown, (args, set(flags) - shown)
        assert "--name" not in shown and "--output-dir" not in shown  # old spellings: hidden


# -- naming, templates, resume, dataset runs ---------------------------------------------------


def test_run_names_the_training_run_and_its_output_directory(scored, tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = ("train", "kto", "-m", tiny, "--db", str(scored), "--label", "group", *SMALL, "--json")
    code, out, err = agent_rl(capsys, *base, "--run", "exp-1")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["run_id"] == "exp-1"
    assert Path(summary["output_dir"]) == Path("runs") / "exp-1" and (tmp_path / "runs" / "exp-1" / "adapter").is_dir()
    assert [r[:3] for r in training_runs(scored)] == [("exp-1", "kto", "ok")]
    # a finished run's name is not reused: the error names it and the fix
    code, _, err = agent_rl(capsys, *base, "--run", "exp-1")
    assert code == 1 and "'exp-1' is already recorded" in err and "--run" in err
    code, _, err = agent_rl(capsys, *base, "--run", "bad name/..")
    assert code == 1 and "run name" in err
    # resuming the named run continues it and replaces its record (one row per name)
    code, out, err = agent_rl(capsys, *base, "--run", "exp-1", "--resume", "latest")
    assert code == 0, err
    assert "not recorded" not in err
    (again,) = training_runs(scored)
    assert again[:3] == ("exp-1", "kto", "ok")
    assert json.loads(again[5])["train_runtime"] == json.loads(out)["metrics"]["train_runtime"]  # the new run's


def test_a_template_loads_with_config_as_written(scored, tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = agent_rl(capsys, "train", "config", "kto", "--out", "kto.yaml")
    assert code == 0, err
    assert 'output_dir: ""' in (tmp_path / "kto.yaml").read_text()
    code, out, err = agent_rl(
        capsys, "train", "kto", "-c", "kto.yaml", "-m", tiny, "--db", str(scored), "--label", "group", *SMALL, "--json"
    )
    assert code == 0, err
    assert Path(json.loads(out)["output_dir"]).parent == Path("runs")  # empty output_dir: the default


def test_resume_latest_on_a_first_run_starts_fresh_with_a_note(scored, tiny, tmp_path, capsys):
    code, out, err = agent_rl(
        capsys, "train", "kto", "-m", tiny, "--db", str(scored), "--label", "group", *SMALL,
        "--out", str(tmp_path / "first"), "--resume", "latest", "--json",
    )
    assert code == 0, err
    assert "no checkpoint under" in err and "starts fresh" in err
    summary = json.loads(out)
    assert summary["resumed_from"] is None and summary["steps"] == 1


def test_a_dataset_run_is_recorded(scored, tiny, tmp_path, capsys):
    file = tmp_path / "kto.jsonl"
    code, _, err = agent_rl(capsys, "dataset", "build", "kto", "--db", str(scored), "--label", "group", "--out", str(file))
    assert code == 0, err
    code, out, err = agent_rl(
        capsys, "train", "kto", "-m", tiny, "--dataset", str(file), "--db", str(scored), *SMALL,
        "--out", str(tmp_path / "run"), "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["run_id"]
    (run_id, method, status, dataset_sql, _, _), = training_runs(scored)
    assert (run_id, method, status) == (summary["run_id"], "kto", "ok")
    assert dataset_sql == f"file:{file}"


# -- gigpo and stored advantages --------------------------------------------------------------


def test_gigpo_uses_the_latest_matching_stored_advantages_run(scored, tiny, tmp_path, capsys):
    def compute(*extra: str) -> str:
        code, out, err = agent_rl(capsys, "advantages", "compute", "--method", "gigpo", "--db", str(scored),
                                  "-r", "task_completion", *extra, "--json")
        assert code == 0, err
        return json.loads(out)["run_id"]

    older = compute()
    newest = compute()
    compute("--where", "task_id is not null")  # another selection: not a match for a run over all rollouts
    args = ("train", "gigpo", "-m", tiny, "--db", str(scored), "-r", "task_completion", *SMALL)
    code, out, err = agent_rl(capsys, *args, "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert f"advantages: stored run {newest}" in out and older not in out
    # --advantages-run picks one; --recompute computes afresh
    code, out, err = agent_rl(capsys, *args, "--advantages-run", older, "--out", str(tmp_path / "c"), "--json")
    assert code == 0, err
    assert json.loads(out)["advantages"] == {"source": "stored", "run_id": older}
    code, out, err = agent_rl(capsys, *args, "--recompute", "--out", str(tmp_path / "d"), "--json")
    assert code == 0, err
    assert json.loads(out)["advantages"]["source"] == "computed"
    # other rewards: no stored run matches, so they are computed
    code, out, err = agent_rl(capsys, "train", "gigpo", "-m", tiny, "--db", str(scored), "-r", "tool_success", *SMALL,
                              "--out", str(tmp_path / "e"))
    assert code == 0, err
    assert "advantages: computed for this run" in out


# -- online GRPO with a constant reward --------------------------------------------------------


@reward(name="always_half")
def always_half(rollout):
    """The same reward whatever the completion: GRPO gets no signal."""
    return 0.5


def test_online_grpo_with_a_constant_reward_warns_and_records_it(scored, tiny, tmp_path, capsys, plugin_manager):
    plugin_manager.register(RewardsPlugin(always_half), name="constant-reward")
    code, out, err = agent_rl(
        capsys, "train", "grpo", "-m", tiny, "--db", str(scored), "-r", "always_half", "--num-generations", "2",
        "--batch-size", "2", "--max-steps", "2", "--max-completion-length", "4", "--out", str(tmp_path / "g"), "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    (warning,) = summary["warnings"]
    assert "0.5 for every sampled completion" in warning and "always_half" in warning and "constant" in warning
    assert "0.5 for every sampled completion" in err  # said at the end of the run, on stderr
    (_, method, status, _, _, final_metrics), = training_runs(scored)
    assert (method, status) == ("grpo", "ok") and json.loads(final_metrics)["constant_reward"] == 0.5


def test_constant_reward_is_only_flagged_when_nothing_varied():
    assert constant_reward([{"reward": 0.0, "reward_std": 0.0}, {"reward": 0.0, "reward_std": 0.0}]) == 0.0
    assert constant_reward([{"reward": 0.2, "reward_std": 0.0}, {"reward": 0.3, "reward_std": 0.0}]) is None
    assert constant_reward([{"reward": 0.2, "reward_std": 0.1}, {"reward": 0.2, "reward_std": 0.0}]) is None
    assert constant_reward([{"loss": 1.0}]) is None
