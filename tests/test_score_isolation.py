"""A reward that raises, hangs, dies or returns nonsense leaves error rows; the others score.

Plugins run in forked worker processes with a per-rollout timeout; see
``agent_rl_plugin/rewards/workers.py``.
"""

from __future__ import annotations

import math
import os
import time

import pytest
from score_support import agent_rl, only_these_rewards, record_demo, rows

from agent_rl_plugin.rewards import EvaluateResult, StepOutput, reward
from agent_rl_plugin.rewards.runner import score


@reward(name="t_good")
def t_good(rollout):
    return 1.0


@reward(name="t_boom")
def t_boom(rollout):
    raise RuntimeError(f"boom on {rollout.task_id}")


@reward(name="t_hang")
def t_hang(rollout):
    time.sleep(60)
    return 1.0


@pytest.fixture
def recorded(db_path):
    record_demo()
    return db_path


def test_a_raising_plugin_gives_error_rows_and_exit_code_1(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_good, t_boom)
    result = agent_rl("score", "--db", str(recorded))
    assert result.exit_code == 1
    assert "reward 't_boom' failed on 6 of 6 rollouts (RuntimeError: boom on shop-" in result.stderr
    assert 'agent-rl query "select * from rewards where error is not null"' in result.stderr
    errors = rows(recorded, "select * from rewards where error is not null")
    assert len(errors) == 6
    assert all(e["name"] == "t_boom" and e["value"] is None and e["error"].startswith("RuntimeError: boom on shop-")
               and e["plugin"] == "test_rewards" for e in errors)
    assert "t_boom" in errors[0]["metrics"]  # the traceback names the plugin's function
    assert rows(recorded, "select count(*) as n from rewards where name = 't_good' and value = 1")[0]["n"] == 6


def test_a_hanging_plugin_is_killed_at_the_timeout(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_good, t_hang)
    started = time.monotonic()
    result = agent_rl("score", "--db", str(recorded), "--timeout", "1", "--workers", "3", "--json")
    elapsed = time.monotonic() - started
    assert result.exit_code == 1
    assert elapsed < 10, f"took {elapsed:.1f} s"
    hang = rows(recorded, "select error from rewards where name = 't_hang'")
    assert len(hang) == 6 and all(h["error"] for h in hang)
    timed_out = [h for h in hang if h["error"] == "timed out after 1 s"]
    assert len(timed_out) >= 3
    # after its first 3 rollouts all timed out, the rest fail at once instead of waiting
    assert all(h in timed_out or h["error"].startswith("not run: reward 't_hang' timed out") for h in hang)
    assert rows(recorded, "select count(*) as n from rewards where name = 't_good' and value = 1")[0]["n"] == 6


def test_every_rollout_waits_out_its_timeout_when_stopping_is_off(recorded, plugin_manager):
    @reward(name="t_slow_shop0")
    def slow(rollout):
        if rollout.task_id == "shop-0":
            time.sleep(60)
        return 1.0

    only_these_rewards(plugin_manager, slow)
    report = score(str(recorded), workers=3, timeout_s=1.0, stop_after_timeouts=0)
    stats = report.rewards["t_slow_shop0"]
    assert stats.errors == 3 and stats.scored == 3 and stats.error_examples == ["timed out after 1 s"]


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (math.nan, "score must be finite, got nan"),
        (math.inf, "score must be finite, got inf"),
        ("a string", "expected a number or EvaluateResult, got str"),
        (object(), "expected a number or EvaluateResult, got object"),
        (True, "expected a number or EvaluateResult, got bool"),
        ({"score": 1.0, "bogus": 1}, "Extra inputs are not permitted"),
        (EvaluateResult(score=1.0, step_outputs=[StepOutput(step_index=999, base_reward=1.0)]),
         "step_index 999 is past the rollout's"),
        (EvaluateResult(score=1.0, metrics={"x": math.nan}), "metrics are not JSON"),
    ],
)
def test_out_of_contract_results_are_error_rows_naming_the_reward(recorded, plugin_manager, value, detail):
    @reward(name="t_weird")
    def t_weird(rollout):
        return value

    only_these_rewards(plugin_manager, t_weird, t_good)
    report = score(str(recorded), workers=1)
    assert not report.ok and report.rewards["t_weird"].errors == 6 and report.rewards["t_good"].scored == 6
    errors = rows(recorded, "select error from rewards where name = 't_weird'")
    assert len(errors) == 6
    for row in errors:
        assert row["error"].startswith("invalid result: ") and detail in row["error"]
        assert row["error"].endswith("(reward 't_weird')")


def test_a_batch_reward_returning_the_wrong_number_of_results(recorded, plugin_manager):
    @reward(name="t_short", mode="batch")
    def t_short(rollouts):
        return [1.0]

    only_these_rewards(plugin_manager, t_short)
    report = score(str(recorded), workers=1)
    assert report.rewards["t_short"].errors == 6
    assert report.rewards["t_short"].error_examples == ["invalid result: 1 results for a group of 3 rollouts (reward 't_short')"]


def test_a_worker_that_dies_is_replaced(recorded, plugin_manager):
    @reward(name="t_exit")
    def t_exit(rollout):
        if rollout.task_id == "shop-0":
            os._exit(3)
        return 1.0

    only_these_rewards(plugin_manager, t_exit, t_good)
    report = score(str(recorded), workers=2)
    assert report.rewards["t_exit"].errors == 3 and report.rewards["t_exit"].scored == 3
    assert report.rewards["t_exit"].error_examples == ["worker process died (exit code 3)"]
    assert report.rewards["t_good"].scored == 6


def test_sys_exit_and_prepare_failures_are_errors_too(recorded, plugin_manager):
    from agent_rl_plugin.rewards import RewardPlugin

    @reward(name="t_sysexit")
    def t_sysexit(rollout):
        raise SystemExit(2)

    class BadPrepare(RewardPlugin):
        name = "t_bad_prepare"

        def prepare(self, context):
            raise FileNotFoundError("model.pkl")

        def score(self, rollout):
            return 1.0

    only_these_rewards(plugin_manager, t_sysexit, BadPrepare(), t_good)
    report = score(str(recorded), workers=0)
    assert report.rewards["t_sysexit"].error_examples == ["SystemExit: 2"]
    assert report.rewards["t_bad_prepare"].error_examples == ["prepare failed: FileNotFoundError: model.pkl"]
    assert report.rewards["t_good"].scored == 6
