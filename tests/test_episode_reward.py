"""One definition of the episode reward: the ``episode_rewards`` view.

Rule (docs/schema.md): per rollout and reward name, the latest usable episode-level row counts,
whatever its source (a re-emission or a re-scoring replaces, it does not add); step rewards are
not part of it; a rollout's episode reward is the weighted mean over its names (weight 1 each:
``rollouts.total_reward``). Every reader reports the same number: the rollouts view, the CLI,
advantages, the dataset builders and the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from score_support import agent_rl, only_these_rewards, rows

import agent_rl_plugin as arl
from agent_rl_plugin.data import build_grpo_dataset, build_kto_dataset
from agent_rl_plugin.report import queries
from agent_rl_plugin.rewards.base import reward
from agent_rl_plugin.rewards.rollout import load_rollouts
from agent_rl_plugin.rewards.runner import score
from agent_rl_plugin.rl import episode_rewards

#: What each rollout should end with, by the rule.
EXPECTED = {
    "r-repeat": 0.5,  # fb 0.25 then fb 0.5: the latest wins (the old rollouts view said 0.75)
    "r-mixed": (1.0 + 0.2) / 2,  # fb 1.0 and the scorer's judge 0.2; the step reward 9.0 is not in it
    "r-rescored": (0.0 + 0.2) / 2,  # fb 0.0, and judge 0.2 (scored after the agent's own judge 0.9)
}


@reward(name="judge")
def judge(rollout) -> float:
    """A stored score: 0.2 for every rollout."""
    return 0.2


def _record(db: Path) -> None:
    """Three rollouts of one group, with repeated, step and re-scored rewards."""
    arl.configure(db=str(db), export_delay_ms=50)
    for rollout_id, emits in {
        "r-repeat": [(0.25, "fb", None), (0.5, "fb", None)],
        "r-mixed": [(1.0, "fb", None), (9.0, "fb", 0)],
        "r-rescored": [(0.9, "judge", None), (0.0, "fb", None)],
    }.items():
        with arl.rollout(task_id="t1", group_id="g1", rollout_id=rollout_id):
            arl.record_llm_call("m", [{"role": "user", "content": "2+2?"}], "4")
            for value, name, step in emits:
                arl.emit_reward(value, name=name, step=step)
    assert arl.flush()
    arl.shutdown()


@pytest.fixture
def db(db_path: Path, plugin_manager) -> Path:
    _record(db_path)
    only_these_rewards(plugin_manager, judge)
    # judge scores r-mixed and r-rescored (r-repeat is left unscored by its where)
    assert score(str(db_path), rewards=["judge"], where="rollout_id <> 'r-repeat'", workers=0).ok
    return db_path


def _cli_json(*args: str) -> object:
    result = agent_rl(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _by_rollout(table) -> dict[str, float]:
    return dict(zip(table.column("rollout_id").to_pylist(), table.column("reward").to_pylist()))


def test_every_reader_reports_the_same_episode_reward(db: Path):
    # the rollouts view and its source, the episode_rewards view
    total = {r["rollout_id"]: r["total_reward"] for r in rows(db, "select rollout_id, total_reward from rollouts")}
    assert total == pytest.approx(EXPECTED)
    per_name = rows(db, "select rollout_id, name, value, n_recorded from episode_rewards order by rollout_id, name")
    assert [(r["rollout_id"], r["name"], r["value"], r["n_recorded"]) for r in per_name] == [
        ("r-mixed", "fb", 1.0, 1),
        ("r-mixed", "judge", 0.2, 1),
        ("r-repeat", "fb", 0.5, 2),
        ("r-rescored", "fb", 0.0, 1),
        ("r-rescored", "judge", 0.2, 2),
    ]

    # the CLI: the rollouts list and a GRPO run (the reward each advantage was computed from)
    listed = _cli_json("traces", "list", "--db", str(db))
    assert {r["rollout_id"]: r["total_reward"] for r in listed} == pytest.approx(EXPECTED)
    run = _cli_json("advantages", "compute", "--db", str(db), "--method", "grpo")
    stored = rows(db, "select rollout_id, reward from advantages where run_id = ?", [run["run_id"]])
    assert {r["rollout_id"]: r["reward"] for r in stored} == pytest.approx(EXPECTED)

    connection = duckdb.connect(str(db), read_only=True)
    try:
        # the input of compute_advantages' GRPO, RLOO and Dr. GRPO
        assert _by_rollout(episode_rewards(connection)) == pytest.approx(EXPECTED)

        # the dataset builders
        kto = build_kto_dataset(connection)
        assert dict(zip(kto["rollout_id"], kto["reward"])) == pytest.approx(EXPECTED)
        (group,) = build_grpo_dataset(connection)
        assert dict(zip(group["rollout_ids"], group["rewards"])) == pytest.approx(EXPECTED)

        # the report's data
        connection.register("sel", queries.select(connection, None))
        combined = {r["rollout_id"]: r["reward"] for r in queries.combined(connection, "sel")}
        assert combined == pytest.approx(EXPECTED)
    finally:
        connection.close()


def test_weights_and_reward_names_apply_on_top_of_the_view(db: Path):
    weights = {"fb": 3.0, "judge": 1.0}
    expected = {"r-repeat": 0.5, "r-mixed": (3 * 1.0 + 0.2) / 4, "r-rescored": (3 * 0.0 + 0.2) / 4}
    with duckdb.connect(str(db), read_only=True) as connection:
        assert _by_rollout(episode_rewards(connection, weights=weights)) == pytest.approx(expected)
    kto = build_kto_dataset(str(db), weights=weights)
    assert dict(zip(kto["rollout_id"], kto["reward"])) == pytest.approx(expected)

    only_fb = {"r-repeat": 0.5, "r-mixed": 1.0, "r-rescored": 0.0}
    run = _cli_json("advantages", "compute", "--db", str(db), "--method", "grpo", "--reward", "fb")
    stored = rows(db, "select rollout_id, reward from advantages where run_id = ?", [run["run_id"]])
    assert {r["rollout_id"]: r["reward"] for r in stored} == pytest.approx(only_fb)
    kto = build_kto_dataset(str(db), weights=["fb"])
    assert dict(zip(kto["rollout_id"], kto["reward"])) == pytest.approx(only_fb)


def test_reward_plugins_see_the_emitted_reward_that_counts(db: Path):
    # A scorer reading rollout.emitted_rewards gets the same value the view keeps: the latest
    # emission of a name, not the sum of its emissions (and never the step reward).
    with duckdb.connect(str(db), read_only=True) as connection:
        seen = {r.rollout_id: r.emitted_rewards for r in load_rollouts(connection)}
    assert seen["r-repeat"] == {"fb": 0.5}
    assert seen["r-mixed"] == {"fb": 1.0}
    assert seen["r-rescored"] == {"fb": 0.0}  # its emitted judge 0.9 was replaced by the scorer's 0.2
