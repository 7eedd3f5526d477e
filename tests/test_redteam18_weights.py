"""Red team (issue 18): weights that broke the combined episode reward.

Before the fix ``-r task_completion=-1`` (or ``[rewards.X] weight = -2``) was recorded and made
every ``rollouts.total_reward`` NULL or inverted; ``1e308`` overflowed every total to 0; a
config ``weight = nan`` crashed ``agent-rl score`` with a bare ``ValueError`` and no message.
Real store, real scoring, the real command line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from score_support import agent_rl, rows

import agent_rl_plugin as arl
from agent_rl_plugin.rewards.runner import ScoringError, score
from agent_rl_plugin.rewards.weights import MAX_WEIGHT, check_weights


@pytest.fixture
def db(db_path: Path, plugin_manager) -> Path:
    arl.configure(db=str(db_path), export_delay_ms=50)
    for rollout_id, answer in {"rw-right": "Paris", "rw-wrong": "Lyon"}.items():
        with arl.rollout(task_id="capital", group_id="g", rollout_id=rollout_id, metadata={"ground_truth": "Paris"}):
            arl.record_llm_call("m", [{"role": "user", "content": "Capital of France?"}], answer)
            arl.emit_reward(0.5, name="feedback")
    assert arl.flush()
    arl.shutdown()
    return db_path


@pytest.mark.parametrize("weight", [-1.0, -0.5, -1e-9, MAX_WEIGHT * 10, 1e308, float("nan"), float("inf")])
def test_check_weights_refuses_negative_huge_and_non_finite(weight):
    with pytest.raises(ValueError, match="task_completion"):
        check_weights({"task_completion": weight})


def test_check_weights_keeps_zero_and_ordinary_weights():
    assert check_weights({"a": 0, "b": 1.5, "c": MAX_WEIGHT}) == {"a": 0.0, "b": 1.5, "c": MAX_WEIGHT}


@pytest.mark.parametrize("weight", ["-1", "-0.5", "1e308"])
def test_a_bad_cli_weight_is_refused_and_nothing_is_recorded(db: Path, weight: str):
    result = agent_rl("score", "--db", str(db), "-r", f"task_completion={weight}", "-j", "0")
    assert result.exit_code == 1
    assert "weight of reward 'task_completion' must be from 0 to" in result.output
    assert rows(db, "select * from reward_weights") == []
    totals = {r["rollout_id"]: r["total_reward"] for r in rows(db, "select rollout_id, total_reward from rollouts")}
    assert totals == {"rw-right": 0.5, "rw-wrong": 0.5}  # the emitted reward alone, untouched


@pytest.mark.parametrize("line", ["weight = nan", "weight = -2", "weight = 1e308", "weight = inf"])
def test_a_bad_configured_weight_is_a_clear_error(db: Path, tmp_path: Path, line: str):
    config = tmp_path / "rewards.toml"
    config.write_text(f"[rewards.task_completion]\n{line}\n")
    result = agent_rl("score", "--db", str(db), "-r", "task_completion", "-c", str(config), "-j", "0")
    assert result.exit_code == 1
    assert "weight of reward 'task_completion' must be" in result.output
    assert "[rewards.NAME] weight" in result.output  # the fix names where weights are set
    assert rows(db, "select * from reward_weights") == []


def test_scoring_api_raises_scoring_error_for_a_bad_configured_weight(db: Path):
    from agent_rl_plugin.config import RLConfig

    config = RLConfig.from_env(rewards={"task_completion": {"weight": -3}})
    with pytest.raises(ScoringError, match="must be from 0 to"):
        score(str(db), rewards=["task_completion"], config=config, workers=0)


def test_good_weights_still_combine(db: Path):
    assert score(str(db), rewards=["task_completion"], workers=0, weights={"task_completion": 3}).ok
    totals = {r["rollout_id"]: r["total_reward"] for r in rows(db, "select rollout_id, total_reward from rollouts")}
    assert totals == pytest.approx({"rw-right": (3 * 1.0 + 0.5) / 4, "rw-wrong": (3 * 0.0 + 0.5) / 4})
