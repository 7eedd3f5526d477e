"""``agent-rl score`` and ``agent-rl plugins`` on the command line (in-process)."""

from __future__ import annotations

import json

import pytest
from score_support import agent_rl, only_these_rewards, record_demo, rows

from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.rewards import RewardPlugin, StepOutput, EvaluateResult, reward


@reward(name="t_one", version="3")
def t_one(rollout):
    """Always 1."""
    return 1.0


@reward(name="t_steps")
def t_steps(rollout):
    return EvaluateResult(score=0.5, step_outputs=[StepOutput(step_index=0, base_reward=0.25)])


class Scaled(RewardPlugin):
    """Tokens times a factor given in the config."""

    name = "t_scaled"
    mode = "batch"

    def __init__(self, factor: float = 1.0, weight: float | None = None) -> None:
        super().__init__(weight=weight, factor=factor)

    def score_batch(self, rollouts):
        return [self.params["factor"] for _ in rollouts]


@pytest.fixture
def recorded(db_path):
    record_demo()
    return db_path


def test_score_prints_a_summary_and_exits_0(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one, t_steps)
    result = agent_rl("score", "--db", str(recorded))
    assert result.exit_code == 0, result.output
    assert "t_one" in result.stdout and "t_steps" in result.stdout and "6 rollouts" in result.stdout
    again = agent_rl("score", "--db", str(recorded), "--json")
    report = json.loads(again.stdout)
    assert report["ok"] and report["rows_written"] == 0
    assert {r["name"]: r["skipped"] for r in report["rewards"]} == {"t_one": 6, "t_steps": 6}


def test_score_json_report(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one, t_steps)
    result = agent_rl("score", "--db", str(recorded), "--json", "--workers", "0")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["ok"] and report["rollouts"] == 6 and report["rows_written"] == 18
    by_name = {r["name"]: r for r in report["rewards"]}
    assert by_name["t_one"]["plugin_version"] == "unknown/3" and by_name["t_steps"]["step_rows"] == 6
    assert report["rollouts_per_s"] > 0 and set(report["timings_s"]) == {"load", "plan", "prepare", "score"}


def test_plugin_option_runs_only_that_reward(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one, t_steps)
    result = agent_rl("score", "--db", str(recorded), "--plugin", "t_one", "--json")
    assert [r["name"] for r in json.loads(result.stdout)["rewards"]] == ["t_one"]
    assert rows(recorded, "select distinct name from rewards where plugin is not null") == [{"name": "t_one"}]


def test_unknown_plugin_lists_the_known_ones(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one, t_steps)
    result = agent_rl("score", "--db", str(recorded), "--plugin", "t_nope")
    assert result.exit_code == 1
    assert "unknown reward 't_nope'; known rewards: t_one, t_steps" in result.stderr
    assert "Traceback" not in result.output


def test_where_selects_and_bad_where_is_one_line(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one)
    result = agent_rl("score", "--db", str(recorded), "--where", "task_id = 'shop-1'", "--json")
    assert json.loads(result.stdout)["rollouts"] == 3
    bad = agent_rl("score", "--db", str(recorded), "--where", "task_idd = 'x'")
    assert bad.exit_code == 1
    first = bad.stderr.strip().splitlines()[0]
    assert first.startswith("error: bad where SQL:") and "task_idd" in first
    assert "Traceback" not in bad.output


def test_empty_selection_says_so_and_exits_0(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one)
    result = agent_rl("score", "--db", str(recorded), "--where", "task_id = 'none'")
    assert result.exit_code == 0
    assert "No rollouts to score" in result.stdout


def test_missing_database_is_a_clear_error(tmp_path, plugin_manager):
    only_these_rewards(plugin_manager, t_one)
    result = agent_rl("score", "--db", str(tmp_path / "missing.duckdb"))
    assert result.exit_code == 1 and "no database at" in result.stderr


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_config_file_sets_reward_parameters_and_weights(recorded, plugin_manager, tmp_path, suffix):
    only_these_rewards(plugin_manager, Scaled, t_one)
    config = tmp_path / f"rewards{suffix}"
    if suffix == ".toml":
        config.write_text("[rewards.t_scaled]\nfactor = 0.75\nweight = 2.0\n\n[rewards.t_one]\nweight = 0.5\n")
    else:
        config.write_text(json.dumps({"rewards": {"t_scaled": {"factor": 0.75, "weight": 2.0}, "t_one": {"weight": 0.5}}}))
    result = agent_rl("score", "--db", str(recorded), "--config", str(config), "--plugin", "t_scaled", "--json")
    assert result.exit_code == 0, result.output
    assert {r["value"] for r in rows(recorded, "select value from rewards where name = 't_scaled'")} == {0.75}
    listed = agent_rl("plugins", "--json")
    assert {r["name"]: r["weight"] for r in json.loads(listed.stdout)["rewards"]} == {"t_scaled": 1.0, "t_one": 1.0}


def test_bad_config_file_is_a_clear_error(recorded, plugin_manager, tmp_path):
    only_these_rewards(plugin_manager, t_one)
    config = tmp_path / "bad.toml"
    config.write_text("[rewards.t_one\nweight = 1\n")
    result = agent_rl("score", "--db", str(recorded), "--config", str(config))
    assert result.exit_code == 1 and f"cannot parse {config}" in result.stderr
    config.write_text("colour = 'red'\n")
    result = agent_rl("score", "--db", str(recorded), "--config", str(config))
    assert result.exit_code == 1 and "bad config" in result.stderr and "colour" in result.stderr


def test_plugins_lists_rewards(plugin_manager):
    only_these_rewards(plugin_manager, t_one, Scaled, name="my_rewards")
    result = agent_rl("plugins", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    mine = next(p for p in data["plugins"] if p["name"] == "my_rewards")
    assert mine["hooks"] == ["agent_rl_register_rewards"]
    assert mine["rewards"] == [
        {"name": "t_one", "version": "3", "mode": "pointwise", "source": "code", "weight": 1.0},
        {"name": "t_scaled", "version": "1", "mode": "batch", "source": "code", "weight": 1.0},
    ]
    described = {r["name"]: r for r in data["rewards"]}
    assert described["t_one"]["description"] == "Always 1." and described["t_one"]["plugin"] == "my_rewards"
    assert described["t_scaled"]["plugin_version"] == "unknown/1" and described["t_scaled"]["params"] == {"factor": 1.0}
    table = agent_rl("plugins")
    assert table.exit_code == 0 and "my_rewards" in table.stdout and "t_scaled" in table.stdout


def test_duplicate_reward_names_name_both_plugins(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one, name="first_plugin")

    class Second:
        @hookimpl
        def agent_rl_register_rewards(self, register, config):
            register(reward(lambda r: 0.0, name="t_one"))

    plugin_manager.register(Second(), name="second_plugin")
    result = agent_rl("score", "--db", str(recorded))
    assert result.exit_code == 1
    assert "reward name 't_one' is registered by two plugins: " in result.stderr
    assert "'first_plugin'" in result.stderr and "'second_plugin'" in result.stderr
    listed = agent_rl("plugins", "--json")
    assert "second_plugin" in json.loads(listed.stdout)["reward_errors"]["*"]


def test_a_broken_registration_is_reported_and_fails_a_full_run(recorded, plugin_manager):
    only_these_rewards(plugin_manager, t_one)

    class Broken:
        @hookimpl
        def agent_rl_register_rewards(self, register, config):
            register("not a reward")
            raise ImportError("needs torch")

    plugin_manager.register(Broken(), name="broken_plugin")
    result = agent_rl("score", "--db", str(recorded), "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and not report["ok"]
    assert "ImportError: needs torch" in report["registration_errors"]["broken_plugin"]
    assert "plugin 'broken_plugin' could not register its rewards" in result.stderr
    assert report["rewards"][0]["scored"] == 6  # the others still score
    only_t_one = agent_rl("score", "--db", str(recorded), "--plugin", "t_one", "--rescore")
    assert only_t_one.exit_code == 0  # not asked for: not a failure of this run
