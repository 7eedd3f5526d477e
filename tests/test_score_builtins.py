"""The built-in rewards, registered like any plugin, score a recorded demo end to end."""

from __future__ import annotations

import json

from score_support import agent_rl, record_demo, rows

from agent_rl_plugin.rewards.builtin import BUILTIN_REWARDS


def test_plugins_lists_every_builtin_reward(plugin_manager):
    result = agent_rl("plugins", "--json")
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    builtin = {r["name"] for r in listing["rewards"] if r["plugin"] == "rewards_builtin"}
    # format_compliance needs a pattern or schema, so it is registered only when configured;
    # llm_judge without a judge is its keyword heuristic, listed under its own name and source
    assert builtin == set(BUILTIN_REWARDS) - {"format_compliance", "llm_judge"} | {"llm_judge_heuristic"}
    heuristic = next(r for r in listing["rewards"] if r["name"] == "llm_judge_heuristic")
    assert heuristic["source"] == "heuristic" and heuristic["weight"] == 0.0


def test_builtins_score_the_demo_and_agree_with_the_agents_own_reward(db_path, plugin_manager):
    results = record_demo(tasks=3, group_size=4)
    result = agent_rl("score", "--db", str(db_path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    by_name = {stats["name"]: stats for stats in report["rewards"]}
    assert "learned_reward" not in by_name  # needs labels: runs only when named
    assert by_name["tool_success"]["scored"] == len(results)
    assert by_name["code_execution"]["not_applicable"] == len(results)  # no code in these answers

    # task_completion against the tasks' ground truth equals what the agent emitted itself
    scored = {
        r["rollout_id"]: r["value"]
        for r in rows(db_path, "select rollout_id, value from rewards where name = 'task_completion'")
    }
    assert scored == {r.rollout_id: (1.0 if r.correct else 0.0) for r in results}

    # tool_success: an episode row per rollout plus one step row per tool call
    episode = rows(db_path, "select count(*) as n from rewards where name = 'tool_success' and step_index is null")
    steps = rows(db_path, "select count(*) as n from rewards where name = 'tool_success' and step_index is not null")
    tool_calls = rows(db_path, "select count(*) as n from tool_calls")
    assert episode[0]["n"] == len(results)
    assert steps[0]["n"] == tool_calls[0]["n"]
    # step rows point at tool steps of their rollout
    mismatched = rows(
        db_path,
        "select count(*) as n from rewards w join steps s on s.rollout_id = w.rollout_id and s.step_index = w.step_index "
        "where w.name = 'tool_success' and s.kind <> 'tool'",
    )
    assert mismatched[0]["n"] == 0
    audit = rows(db_path, "select distinct plugin, plugin_version, source from rewards where name = 'tool_success'")
    assert audit == [{"plugin": "rewards_builtin", "plugin_version": "0.1.0/1", "source": "code"}]

    # nothing to do the second time
    again = json.loads(agent_rl("score", "--db", str(db_path), "--json").stdout)
    assert all(stats["scored"] == 0 for stats in again["rewards"])
    assert sum(stats["skipped"] for stats in again["rewards"]) >= 3 * len(results)


def test_learned_reward_runs_when_named_and_explains_missing_labels(db_path, plugin_manager):
    record_demo()
    result = agent_rl("score", "--db", str(db_path), "--plugin", "learned_reward", "--json")
    assert result.exit_code == 1
    errors = rows(db_path, "select distinct error from rewards where name = 'learned_reward'")
    assert len(errors) == 1 and "agent-rl label" in errors[0]["error"]


def test_format_compliance_is_registered_when_configured(db_path, plugin_manager, tmp_path):
    record_demo()
    config = tmp_path / "rewards.toml"
    config.write_text(
        '[rewards.format_compliance]\npattern = "The total is [0-9]+\\\\.[0-9]{2}\\\\."\nmatch = "search"\n'
    )
    result = agent_rl("score", "--db", str(db_path), "--plugin", "format_compliance", "--config", str(config), "--json")
    assert result.exit_code == 0, result.output
    values = {r["value"] for r in rows(db_path, "select value from rewards where name = 'format_compliance'")}
    assert values <= {0.0, 1.0} and 1.0 in values
