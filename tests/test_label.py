"""``agent-rl label``: --set and the interactive queue; labels land in ``labels`` and, through a
registered ``human_label`` reward, in ``rewards`` with source 'human'."""

from __future__ import annotations

import json

import pytest
from score_support import agent_rl, only_these_rewards, record_demo, rows

from agent_rl_plugin.rewards import RewardPlugin


class HumanLabel(RewardPlugin):
    """The latest human label as a reward (1.0 good, 0.0 bad; skip is not applicable)."""

    name = "human_label"
    source = "human"
    uses_labels = True  # relabelling is a new input for this reward

    def score(self, rollout):
        return rollout.label_value


@pytest.fixture
def recorded(db_path):
    results = record_demo()
    return db_path, sorted(results, key=lambda r: r.rollout_id)


def test_set_labels_with_id_prefixes(recorded, plugin_manager, monkeypatch):
    path, results = recorded
    monkeypatch.setenv("USER", "alice")
    only_these_rewards(plugin_manager, HumanLabel())
    good, bad, skip = results[0].rollout_id, results[1].rollout_id, results[2].rollout_id
    result = agent_rl("label", "--db", str(path), "--set", f"{good[:10]}=good", "--set", f"{bad}=b",
                      "--set", f"{skip[:12]}=skip", "--note", "checked by hand")
    assert result.exit_code == 0, result.output
    assert "Labelled 3 rollouts (1 good, 1 bad, 1 skip) as alice." in result.stdout
    labels = {r["rollout_id"]: r for r in rows(path, "select * from labels")}
    assert {k: (v["label"], v["value"]) for k, v in labels.items()} == {
        good: ("good", 1.0), bad: ("bad", 0.0), skip: ("skip", None)
    }
    assert all(v["labeller"] == "alice" and v["note"] == "checked by hand" for v in labels.values())
    human = rows(path, "select rollout_id, value, source, plugin, step_index from rewards where name = 'human_label'")
    assert {h["rollout_id"]: h["value"] for h in human} == {good: 1.0, bad: 0.0}  # skip: not applicable
    assert all(h["source"] == "human" and h["plugin"] == "test_rewards" and h["step_index"] is None for h in human)


def test_relabelling_writes_a_new_human_reward(recorded, plugin_manager):
    path, results = recorded
    only_these_rewards(plugin_manager, HumanLabel())
    rid = results[0].rollout_id
    assert agent_rl("label", "--db", str(path), "--set", f"{rid}=good").exit_code == 0
    assert agent_rl("label", "--db", str(path), "--set", f"{rid}=bad", "--labeller", "bob").exit_code == 0
    latest = rows(path, "select value from rewards where name = 'human_label' order by created_at desc limit 1")
    assert latest == [{"value": 0.0}]
    labellers = [r["labeller"] for r in rows(path, "select labeller from labels order by created_at")]
    assert len(labellers) == 2 and labellers[1] == "bob" and labellers[0]  # default: $USER


def test_bad_set_values_are_clear_errors(recorded, plugin_manager):
    path, results = recorded
    only_these_rewards(plugin_manager)
    wrong_label = agent_rl("label", "--db", str(path), "--set", f"{results[0].rollout_id}=great")
    assert wrong_label.exit_code == 1 and "unknown label 'great'" in wrong_label.stderr
    no_such = agent_rl("label", "--db", str(path), "--set", "zzzz=good")
    assert no_such.exit_code == 1 and "no rollout with id 'zzzz'" in no_such.stderr
    no_equals = agent_rl("label", "--db", str(path), "--set", "good")
    assert no_equals.exit_code == 1 and "is not ROLLOUT_ID=LABEL" in no_equals.stderr
    assert rows(path, "select count(*) as n from labels")[0]["n"] == 0


def test_interactive_queue_with_piped_answers(recorded, plugin_manager):
    path, _ = recorded
    only_these_rewards(plugin_manager, HumanLabel())
    queue = [r["rollout_id"] for r in rows(path, "select rollout_id from rollouts order by start_time, rollout_id")]
    result = agent_rl("label", "--db", str(path), "--labeller", "carol", input="g\nwhat\nb\nq\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "1/6" in out and "2/6" in out and "3/6" in out  # shown one by one, quit at the third
    assert "final output:" in out and "tool calls:" in out and "lookup(" in out and "emitted rewards: correct=" in out
    assert "please answer g, b, s or q" in out
    labels = rows(path, "select rollout_id, label, labeller from labels order by created_at")
    assert [(r["rollout_id"], r["label"]) for r in labels] == [(queue[0], "good"), (queue[1], "bad")]
    assert {r["labeller"] for r in labels} == {"carol"}
    human = rows(path, "select rollout_id, value from rewards where source = 'human' order by value desc")
    assert human == [{"rollout_id": queue[0], "value": 1.0}, {"rollout_id": queue[1], "value": 0.0}]

    # labelled rollouts leave the queue; --where narrows it; end of input stops like q
    again = agent_rl("label", "--db", str(path), "--where", "task_id = 'shop-1'", "--json", input="s\n")
    assert again.exit_code == 0
    labelled = json.loads(again.stdout[again.stdout.index('{\n  "labelled"'):])["labelled"]
    assert len(labelled) == 1 and labelled[0]["label"] == "skip"
    assert labelled[0]["rollout_id"] in [r["rollout_id"] for r in rows(path, "select rollout_id from rollouts where task_id = 'shop-1'")]
    assert labelled[0]["rollout_id"] not in queue[:2]


def test_without_a_human_label_reward_labels_are_still_stored(recorded, plugin_manager):
    path, results = recorded
    only_these_rewards(plugin_manager)
    result = agent_rl("label", "--db", str(path), "--set", f"{results[0].rollout_id}=good")
    assert result.exit_code == 0
    assert "No 'human_label' reward is registered" in result.stdout
    assert rows(path, "select label from labels") == [{"label": "good"}]
    assert rows(path, "select count(*) as n from rewards where source = 'human'")[0]["n"] == 0


def test_nothing_to_label(recorded, plugin_manager):
    path, _ = recorded
    only_these_rewards(plugin_manager)
    result = agent_rl("label", "--db", str(path), "--where", "task_id = 'none'")
    assert result.exit_code == 0 and "Nothing to label" in result.stdout
