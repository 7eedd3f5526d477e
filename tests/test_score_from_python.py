"""Scoring from a script: record rollouts, register a reward defined in the script, score()."""

from __future__ import annotations

import duckdb
import pytest

import agent_rl_plugin as arl
from agent_rl_plugin.rewards import (
    DuplicateRewardError,
    RewardPlugin,
    RewardRegistrationError,
    register,
    reward,
    score,
    unregister,
)
from agent_rl_plugin.rewards.registry import collect_registered_rewards


@reward(name="short_answer", version="2")
def short_answer(rollout):
    """1.0 for an answer of at most 5 characters."""
    return 1.0 if len(rollout.final_output or "") <= 5 else 0.0


class LengthPenalty(RewardPlugin):
    name = "length_penalty"

    def score(self, rollout):
        return -len(rollout.final_output or "") / 100


def record_rollouts(path) -> None:
    arl.configure(db=str(path), export_delay_ms=50)

    @arl.trace_agent(name="answerer")
    def answer(question: str) -> str:
        return "4" if "2 + 2" in question else "I do not know the answer"

    for question in ["2 + 2?", "capital of Peru?"]:
        with arl.rollout(task_id=question, group_id="g"):
            answer(question)
    assert arl.flush()


def rewards_table(path) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return connection.execute(
            "select r.task_id, w.name, w.value, w.plugin, w.plugin_version from rewards w "
            "join rollouts r using (rollout_id) where w.plugin is not null order by w.name, w.value desc"
        ).fetchall()


def test_a_script_registers_a_reward_and_scores_its_rollouts(tmp_path, plugin_manager):
    path = tmp_path / "agent_rl.duckdb"
    record_rollouts(path)

    assert register(short_answer) == ["short_answer"]
    report = score(str(path), rewards=["short_answer"], workers=0)

    assert report.ok and report.rewards["short_answer"].scored == 2
    assert rewards_table(path) == [
        ("2 + 2?", "short_answer", 1.0, "script", "unknown/2"),
        ("capital of Peru?", "short_answer", 0.0, "script", "unknown/2"),
    ]
    # a second run finds the rows and writes nothing
    assert score(str(path), rewards=["short_answer"], workers=0).rewards["short_answer"].skipped == 2


def test_registered_rewards_run_in_worker_processes_and_from_the_facade(tmp_path, plugin_manager):
    path = tmp_path / "agent_rl.duckdb"
    record_rollouts(path)
    register(LengthPenalty, plugin="my_experiment")
    report = arl.score(str(path), rewards=["my_experiment"], workers=1)
    assert report.ok, report.to_dict()
    assert [(name, value, plugin) for _, name, value, plugin, _ in rewards_table(path)] == [
        ("length_penalty", -0.01, "my_experiment"),
        ("length_penalty", -0.24, "my_experiment"),
    ]


def test_registering_is_idempotent_and_unregister_removes(plugin_manager):
    assert register(short_answer) == ["short_answer"]
    assert register(short_answer) == ["short_answer"]
    registry = collect_registered_rewards(plugin_manager)
    assert registry.rewards["short_answer"].plugin == "script"
    assert "tool_success" in registry.rewards  # the built-ins are still there

    assert unregister("short_answer") == ["short_answer"]
    assert "short_answer" not in collect_registered_rewards(plugin_manager).rewards
    assert unregister(short_answer) == []
    assert plugin_manager.get_plugin("script") is None


def test_another_reward_with_a_taken_name_is_refused(plugin_manager):
    @reward(name="tool_success")  # a built-in's name
    def mine(rollout):
        return 1.0

    with pytest.raises(DuplicateRewardError, match="already registered by plugin 'rewards_builtin'") as excinfo:
        register(mine)
    assert "another name" in excinfo.value.hint

    register(short_answer)
    again = reward(name="short_answer")(lambda rollout: 0.0)
    with pytest.raises(DuplicateRewardError, match="with another object") as excinfo:
        register(again)
    assert "unregister" in excinfo.value.hint
    register(again, replace=True)
    assert collect_registered_rewards(plugin_manager).rewards["short_answer"].reward is again


def test_what_is_not_a_reward_is_refused_and_nothing_is_registered(plugin_manager):
    with pytest.raises(RewardRegistrationError, match="not a reward"):
        register(short_answer, lambda rollout: 1.0)
    assert plugin_manager.get_plugin("script") is None
    with pytest.raises(RewardRegistrationError, match="taken by an installed or built-in plugin"):
        register(short_answer, plugin="rewards_builtin")
