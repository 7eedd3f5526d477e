"""``score()``: episode and step rows, idempotency, batch groups, selection, prepare().

Each test records 2 tasks x 3 rollouts of the demo agent (groups ``shop-0/g1``, ``shop-1/g1``)
and scores them with test rewards registered on the test's own plugin manager.
"""

from __future__ import annotations

import json
import re

import pytest
from score_support import only_these_rewards, record_demo, rows

from agent_rl_plugin.rewards import EvaluateResult, RewardPlugin, StepOutput, reward
from agent_rl_plugin.rewards.registry import RegisteredReward, collect_registered_rewards
from agent_rl_plugin.rewards.runner import ScoringError, UnknownRewardError, group_indices, score


@reward(name="t_tools", version="1")
def t_tools(rollout):
    """Share of successful tool calls, with one step reward per tool call."""
    steps = [StepOutput(step_index=s.index, base_reward=0.0 if s.is_error else 1.0, reason=s.name)
             for s in rollout.tool_calls]
    return EvaluateResult(score=sum(s.base_reward for s in steps) / max(1, len(steps)), reason="tools",
                          metrics={"calls": len(steps)}, step_outputs=steps)


@reward(name="t_one")
def t_one(rollout):
    return 1.0


@pytest.fixture
def recorded(db_path):
    results = record_demo()
    return db_path, results


def test_scoring_writes_episode_and_step_rows(recorded, plugin_manager):
    path, results = recorded
    only_these_rewards(plugin_manager, t_tools)
    report = score(str(path), workers=2)
    assert report.ok and report.rollouts == 6
    stats = report.rewards["t_tools"]
    episode = rows(path, "select * from rewards where name = 't_tools' and step_index is null")
    steps = rows(path, "select * from rewards where name = 't_tools' and step_index is not null")
    assert {r["rollout_id"] for r in episode} == {r.rollout_id for r in results}
    assert stats.scored == 6 and stats.step_rows == len(steps) > 6
    for row in episode:
        assert row["plugin"] == "test_rewards" and row["plugin_version"] == "unknown/1"
        assert row["source"] == "code" and row["error"] is None and 0.0 <= row["value"] <= 1.0
        assert re.fullmatch(r"[0-9a-f]{64}", row["input_hash"]) and row["created_at"] is not None
        assert json.loads(row["metrics"])["calls"] >= 1
    # step rows point at tool steps of the steps view, carrying their span id
    joined = rows(
        path,
        "select s.kind, s.name, r.reason, r.span_id = s.span_id as same_span from rewards r join steps s "
        "on s.rollout_id = r.rollout_id and s.step_index = r.step_index where r.name = 't_tools'",
    )
    assert len(joined) == len(steps)
    assert all(j["kind"] == "tool" and j["name"] == j["reason"] and j["same_span"] for j in joined)
    # the per-rollout query of the issue
    per_rollout = rows(path, "select rollout_id, name, value from rewards where plugin is not null and step_index is null")
    assert len(per_rollout) == 6


def test_second_run_writes_nothing_and_rescore_writes_again(recorded, plugin_manager):
    path, _ = recorded
    only_these_rewards(plugin_manager, t_tools)
    first = score(str(path), workers=0)
    count = rows(path, "select count(*) as n from rewards where name = 't_tools'")[0]["n"]
    second = score(str(path), workers=0)
    assert second.rewards["t_tools"].skipped == 6 and second.rewards["t_tools"].scored == 0
    assert second.rows_written == 0 and second.ok
    assert rows(path, "select count(*) as n from rewards where name = 't_tools'")[0]["n"] == count
    third = score(str(path), workers=0, rescore=True)
    assert third.rewards["t_tools"].scored == 6 and third.rows_written == first.rows_written
    assert rows(path, "select count(*) as n from rewards where name = 't_tools'")[0]["n"] == 2 * count


def test_a_new_reward_version_or_parameter_scores_again(recorded, plugin_manager):
    path, _ = recorded

    class Threshold(RewardPlugin):
        name = "t_threshold"
        version = "1"

        def score(self, rollout):
            return float(rollout.total_tokens > self.params.get("limit", 100))

    only_these_rewards(plugin_manager, Threshold(limit=100))
    assert score(str(path), workers=0).rewards["t_threshold"].scored == 6
    assert score(str(path), workers=0).rewards["t_threshold"].skipped == 6

    Threshold.version = "2"  # the scoring changed: bump the version
    only_these_rewards(plugin_manager, Threshold(limit=100))
    again = score(str(path), workers=0)
    assert again.rewards["t_threshold"].scored == 6
    assert again.rewards["t_threshold"].plugin_version == "unknown/2"

    only_these_rewards(plugin_manager, Threshold(limit=50))  # other parameters: another fingerprint
    assert score(str(path), workers=0).rewards["t_threshold"].scored == 6
    versions = rows(path, "select plugin_version, count(*) as n from rewards where name = 't_threshold' group by 1 order by 1")
    assert versions == [{"plugin_version": "unknown/1", "n": 6}, {"plugin_version": "unknown/2", "n": 12}]


def test_error_rows_do_not_count_as_done(recorded, plugin_manager, tmp_path):
    path, _ = recorded
    flag = tmp_path / "fail"
    flag.write_text("1")

    @reward(name="t_flaky")
    def t_flaky(rollout):
        if flag.exists():
            raise ConnectionError("judge unavailable")
        return 0.5

    only_these_rewards(plugin_manager, t_flaky)
    first = score(str(path), workers=2)
    assert not first.ok and first.rewards["t_flaky"].errors == 6
    flag.unlink()
    second = score(str(path), workers=2)
    assert second.ok and second.rewards["t_flaky"].scored == 6 and second.rewards["t_flaky"].skipped == 0
    assert score(str(path), workers=2).rewards["t_flaky"].skipped == 6
    errors = rows(path, "select error, value from rewards where name = 't_flaky' and error is not null")
    assert len(errors) == 6 and all(e["value"] is None and e["error"] == "ConnectionError: judge unavailable" for e in errors)


def test_batch_mode_receives_whole_groups(recorded, plugin_manager, tmp_path):
    path, results = recorded
    seen = tmp_path / "groups.jsonl"

    @reward(name="t_rank", mode="batch")
    def t_rank(rollouts):
        with seen.open("a") as out:  # written from the worker process
            out.write(json.dumps([[r.group_id, r.rollout_id] for r in rollouts]) + "\n")
        order = sorted(range(len(rollouts)), key=lambda i: rollouts[i].rollout_id)
        return [EvaluateResult(score=order.index(i) / (len(rollouts) - 1), reason="rank") for i in range(len(rollouts))]

    only_these_rewards(plugin_manager, t_rank)
    report = score(str(path), workers=2)
    assert report.ok and report.rewards["t_rank"].scored == 6
    calls = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(calls) == 2
    expected = {}
    for r in results:
        expected.setdefault(r.group_id, set()).add(r.rollout_id)
    assert sorted(sorted(i for _, i in call) for call in calls) == sorted(sorted(ids) for ids in expected.values())
    assert all(len({g for g, _ in call}) == 1 for call in calls)
    values = rows(path, "select rollout_id, value, input_hash from rewards where name = 't_rank'")
    assert sorted(v["value"] for v in values) == [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]
    assert len({v["input_hash"] for v in values}) == 2  # one hash per group


def test_groups_fall_back_to_task_then_alone():
    from agent_rl_plugin.rewards import Rollout

    rollouts = [
        Rollout(rollout_id="a", group_id="g", task_id="t1"),
        Rollout(rollout_id="b", task_id="t1"),
        Rollout(rollout_id="c", group_id="g", task_id="t2"),
        Rollout(rollout_id="d", task_id="t1"),
        Rollout(rollout_id="e"),
    ]
    assert group_indices(rollouts) == [(0, 2), (1, 3), (4,)]


def test_where_and_rollout_ids_select(recorded, plugin_manager):
    path, results = recorded
    only_these_rewards(plugin_manager, t_one)
    report = score(str(path), where="task_id = 'shop-0'", workers=0)
    assert report.rollouts == 3
    scored = rows(path, "select r.rollout_id, o.task_id from rewards r join rollouts o using (rollout_id) where r.name = 't_one'")
    assert {s["task_id"] for s in scored} == {"shop-0"} and len(scored) == 3
    one = [r.rollout_id for r in results if r.task_id == "shop-1"][:1]
    assert score(str(path), rollout_ids=one, workers=0).rewards["t_one"].scored == 1


def test_empty_selection_is_ok(recorded, plugin_manager):
    path, _ = recorded
    only_these_rewards(plugin_manager, t_one)
    report = score(str(path), where="task_id = 'no-such-task'")
    assert report.ok and report.rollouts == 0 and report.rows_written == 0


def test_unknown_reward_and_bad_where_are_clear_errors(recorded, plugin_manager):
    path, _ = recorded
    only_these_rewards(plugin_manager, t_one, t_tools)
    with pytest.raises(UnknownRewardError, match=r"unknown reward 'nope'; known rewards: t_one, t_tools"):
        score(str(path), rewards=["nope"])
    with pytest.raises(ScoringError, match=r"bad where SQL: .*no_such_column"):
        score(str(path), where="no_such_column = 1")
    with pytest.raises(ScoringError, match="bad where SQL"):
        score(str(path), where="1 = 1) ; delete from spans; select (1")
    assert rows(path, "select count(*) as n from spans")[0]["n"] > 0


def test_a_plugin_name_selects_all_its_rewards(recorded, plugin_manager):
    path, _ = recorded
    only_these_rewards(plugin_manager, t_one, t_tools, name="mine")
    report = score(str(path), rewards=["mine"], workers=0)
    assert set(report.rewards) == {"t_one", "t_tools"}


def test_not_applicable_writes_no_row(recorded, plugin_manager):
    path, _ = recorded

    @reward(name="t_none")
    def t_none(rollout):
        return None if rollout.task_id == "shop-0" else 1.0

    only_these_rewards(plugin_manager, t_none)
    report = score(str(path), workers=0)
    assert report.rewards["t_none"].not_applicable == 3 and report.rewards["t_none"].scored == 3
    assert rows(path, "select count(*) as n from rewards where name = 't_none'")[0]["n"] == 3


def test_prepare_runs_once_and_workers_inherit_its_state(recorded, plugin_manager, tmp_path):
    path, _ = recorded
    calls = tmp_path / "prepare-calls"

    class Fitted(RewardPlugin):
        """Learns the mean token count of shop-0 in prepare(), scores against it."""

        name = "t_fitted"

        def prepare(self, context):
            with calls.open("a") as out:
                out.write("x")
            found = context.load_rollouts("task_id = 'shop-0'")
            self.mean = sum(r.total_tokens for r in found) / len(found)
            self.closure = lambda r: r.total_tokens - self.mean  # not picklable: fork inherits it

        def score(self, rollout):
            return self.closure(rollout)

    only_these_rewards(plugin_manager, Fitted())
    report = score(str(path), workers=2)
    assert report.ok and report.rewards["t_fitted"].scored == 6
    assert calls.read_text() == "x"
    assert score(str(path), workers=2).rewards["t_fitted"].skipped == 6
    assert calls.read_text() == "x"  # nothing left to score: no prepare()


def test_workers_zero_gives_the_same_values(recorded, plugin_manager):
    path, _ = recorded
    only_these_rewards(plugin_manager, t_tools)
    score(str(path), workers=0)
    in_process = rows(path, "select rollout_id, step_index, value from rewards where name = 't_tools' order by all")
    score(str(path), workers=2, rescore=True)
    both = rows(path, "select rollout_id, step_index, value from rewards where name = 't_tools' order by all")
    assert both[::2] == in_process and both[1::2] == in_process


def test_config_weight_and_class_parameters(plugin_manager):
    from agent_rl_plugin.config import RLConfig

    class Param(RewardPlugin):
        name = "t_param"

    only_these_rewards(plugin_manager, Param, t_one)
    config = RLConfig(db_path=None, rewards={"t_param": {"limit": 3, "weight": 0.25}, "t_one": {"weight": 2}})
    registry = collect_registered_rewards(plugin_manager, config)
    param = registry.rewards["t_param"]
    assert isinstance(param, RegisteredReward) and param.reward.params == {"limit": 3}
    assert param.reward.weight == 0.25 and registry.rewards["t_one"].reward.weight == 2.0
    assert param.describe()["plugin"] == "test_rewards"
