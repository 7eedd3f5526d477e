"""human_label: good 1.0, bad 0.0; unlabelled or skip: not applicable."""

from __future__ import annotations

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.human_label import HumanLabel


def test_good_and_bad_labels():
    good = HumanLabel().score(Rollout(rollout_id="r", label="good", label_value=1.0))
    bad = HumanLabel().score(Rollout(rollout_id="r", label="bad", label_value=0.0))
    assert good.score == 1.0 and good.metrics == {"label": "good"}
    assert bad.score == 0.0 and "bad" in bad.reason


def test_unlabelled_and_skipped_are_not_applicable():
    assert HumanLabel().score(Rollout(rollout_id="r")) is None
    assert HumanLabel().score(Rollout(rollout_id="r", label="skip", label_value=None)) is None


def test_source_is_human():
    assert HumanLabel.source == "human" and HumanLabel().describe()["source"] == "human"
