"""answer_quality: structure 0..0.3 + depth 0..0.4 + similarity 0..0.3 (or rescaled)."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.answer_quality import AnswerQuality, named_entities, quality

GOOD = """# Why the sky is blue

The sky looks blue because of Rayleigh scattering: shorter wavelengths scatter more strongly,
therefore blue light (about 450 nm) reaches our eyes from every direction.

## Key points

- Scattering scales with 1/wavelength^4, so blue scatters about 5.5 times more than red at 700 nm.
- For example, at sunset light crosses more air, hence the sky turns red and orange.
- John William Strutt (Lord Rayleigh) described this in 1871.

As a result, on Mars the dusty sky looks butterscotch, which means the effect depends on the
particles in the Atmosphere; for instance, volcanic ash changes sunsets on Earth.
"""


def test_well_structured_answer_scores_high_with_every_part_in_metrics():
    result = AnswerQuality().score(Rollout(rollout_id="r", final_output=GOOD))
    m = result.metrics
    assert m["headings"] == m["lists"] == m["paragraphs"] == pytest.approx(0.1)
    assert m["examples"] == m["reasoning"] == m["specificity"] == m["length"] == pytest.approx(0.1)
    assert m["similarity"] is None and not m["has_reference"]
    # no reference: (structure + depth) / 0.7
    assert result.score == pytest.approx((m["structure"] + m["depth"]) / 0.7) == pytest.approx(1.0)
    assert "no reference" in result.reason


def test_short_unstructured_answer_scores_low():
    result = AnswerQuality().score(Rollout(rollout_id="r", final_output="It is blue."))
    assert result.score < 0.1
    assert result.metrics["structure"] == 0.0


def test_similarity_to_ground_truth_uses_token_f1():
    reference = "Rayleigh scattering makes the sky blue"
    good = AnswerQuality().score(Rollout(rollout_id="r", final_output=GOOD, ground_truth=reference))
    assert good.metrics["has_reference"]
    assert 0 < good.metrics["similarity"] <= 0.3
    assert good.score == pytest.approx(good.metrics["structure"] + good.metrics["depth"] + good.metrics["similarity"])
    exact = AnswerQuality().score(Rollout(rollout_id="r", final_output=reference, ground_truth=reference))
    wrong = AnswerQuality().score(Rollout(rollout_id="r", final_output="Clouds are made of cheese", ground_truth=reference))
    assert exact.metrics["similarity"] == pytest.approx(0.3)
    assert wrong.metrics["similarity"] == 0.0
    assert exact.score > wrong.score


def test_reference_from_metadata_and_difflib():
    rollout = Rollout(rollout_id="r", final_output="the sky is blue", metadata={"reference": "the sky is blue"})
    assert AnswerQuality(similarity="difflib").score(rollout).metrics["similarity"] == pytest.approx(0.3)
    task = Rollout(rollout_id="r", final_output="the sky is blue", task_metadata={"reference": "grass is green"})
    assert AnswerQuality().score(task).metrics["has_reference"]


def test_list_ground_truth_takes_the_best_reference():
    rollout = Rollout(rollout_id="r", final_output="forty two", ground_truth=["seven", "forty two"])
    assert AnswerQuality().score(rollout).metrics["similarity"] == pytest.approx(0.3)


def test_empty_answer_scores_zero():
    for text in (None, "", "   \n"):
        result = AnswerQuality().score(Rollout(rollout_id="r", final_output=text, ground_truth="x"))
        assert result.score == 0.0 and result.reason == "empty answer"


def test_length_outside_bounds_is_scaled():
    assert quality("word " * 25, min_words=50)["length"] == pytest.approx(0.05)
    assert quality("word " * 1600, max_words=800)["length"] == pytest.approx(0.05)


def test_named_entities_skip_sentence_starts():
    assert named_entities("Paris is in France. The Seine flows; NASA too.") == {"France", "Seine", "NASA"}


@pytest.mark.parametrize("kwargs", [{"min_words": 0}, {"max_words": 10, "min_words": 20}, {"similarity": "bleu"}])
def test_bad_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError, match="answer_quality"):
        AnswerQuality(**kwargs)
