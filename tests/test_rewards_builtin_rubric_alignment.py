"""rubric_alignment: -(generated - ground truth)^2, or -|difference|, from metadata or callables."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.rubric_alignment import RubricAlignment


def with_scores(generated, truth, where: str = "metadata") -> Rollout:
    return Rollout(rollout_id="r", **{where: {"rubric_scores": {"generated": generated, "ground_truth": truth}}})


def test_agreeing_rubrics_score_zero():
    result = RubricAlignment().score(with_scores(0.8, 0.8))
    assert result.score == 0.0 and result.metrics["difference"] == 0.0


def test_squared_difference_by_default_and_absolute_on_request():
    assert RubricAlignment().score(with_scores(0.72, 0.85)).score == pytest.approx(-(0.13**2))
    result = RubricAlignment(distance="absolute").score(with_scores(0.72, 0.85))
    assert result.score == pytest.approx(-0.13)
    assert result.metrics["generated"] == 0.72 and result.metrics["ground_truth"] == 0.85


def test_per_criterion_lists():
    assert RubricAlignment().score(with_scores([1, 0.5], [0, 0.5])).score == pytest.approx(-1.0)
    assert RubricAlignment(distance="euclidean").score(with_scores([3, 0], [0, 4])).score == pytest.approx(-5.0)
    with pytest.raises(ValueError, match="differ in length"):
        RubricAlignment().score(with_scores([1, 2], [1]))


def test_task_metadata_is_used_when_the_rollout_has_none():
    assert RubricAlignment().score(with_scores(0.5, 1.0, where="task_metadata")).score == pytest.approx(-0.25)


def test_callables_take_precedence_and_only_their_names_are_parameters():
    def generated(rollout):
        return len(rollout.final_output or "") / 10

    def truth(rollout):
        return 1.0

    reward = RubricAlignment(generated_rubric=generated, ground_truth_rubric=truth)
    assert reward.score(Rollout(rollout_id="r", final_output="12345")).score == pytest.approx(-0.25)
    assert reward.params["generated_rubric"].endswith("generated")
    assert "0x" not in reward.fingerprint() and len(reward.fingerprint()) == 16


def test_missing_scores_are_not_applicable():
    assert RubricAlignment().score(Rollout(rollout_id="r")) is None
    assert RubricAlignment().score(with_scores(0.5, None)) is None
    assert RubricAlignment(ground_truth_rubric=lambda r: None).score(with_scores(0.5, 0.5)) is None


def test_bad_scores_and_parameters_are_rejected():
    with pytest.raises(ValueError, match="finite number"):
        RubricAlignment().score(with_scores("high", 0.5))
    with pytest.raises(ValueError, match="parameter distance"):
        RubricAlignment(distance="cosine")
    with pytest.raises(ValueError, match="callable"):
        RubricAlignment(generated_rubric=3)
