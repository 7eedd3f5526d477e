"""learned_reward: logistic regression on human labels, fitted with fit() or prepare()."""

from __future__ import annotations

import random

import numpy as np
import pytest

from agent_rl_plugin.rewards import EvaluateResult, Rollout, ScoringContext, Step
from agent_rl_plugin.rewards.builtin.learned_reward import FEATURES, LABELLED_WHERE, LearnedReward, NotEnoughLabels, features


def synthetic(i: int, good: bool, rng: random.Random) -> Rollout:
    """Good rollouts' tools work; bad ones fail about 60% of the time. Other features are noise."""
    steps = []
    for k in range(rng.randint(2, 6)):
        steps.append(Step(index=2 * k, kind="llm", name="m", output="thinking"))
        failed = (not good) and rng.random() < 0.6
        steps.append(Step(index=2 * k + 1, kind="tool", name="t", output=None if failed else {"ok": k},
                          status="error" if failed else "ok", error="boom" if failed else None))
    return Rollout(
        rollout_id=f"r{i}",
        steps=steps,
        final_output="answer " * rng.randint(5, 60),
        input_tokens=rng.randint(100, 3000),
        duration_ms=rng.uniform(100, 5000),
        label="good" if good else "bad",
        label_value=1.0 if good else 0.0,
    )


def dataset(n: int, seed: int) -> list[Rollout]:
    rng = random.Random(seed)
    return [synthetic(i, i % 2 == 0, rng) for i in range(n)]


def test_fit_and_held_out_accuracy_is_high():
    train, test = dataset(60, seed=1), dataset(40, seed=2)
    reward = LearnedReward().fit(train, [r.label_value for r in train])
    probabilities = reward.predict_proba(test)
    accuracy = np.mean((probabilities >= 0.5) == np.array([r.label == "good" for r in test]))
    assert accuracy >= 0.85
    assert reward.coefficients()["tool_error_rate"] < 0
    result = reward.score(test[0])
    assert isinstance(result, EvaluateResult) and 0 <= result.score <= 1
    assert result.metrics["n_train"] == 60 and set(FEATURES) <= set(result.metrics)


def test_fit_is_deterministic_and_changes_the_fingerprint():
    train = dataset(30, seed=3)
    a = LearnedReward().fit(train, [r.label_value for r in train])
    b = LearnedReward().fit(train, [r.label_value for r in train])
    assert np.array_equal(a.predict_proba(train), b.predict_proba(train))
    assert a.fingerprint() == b.fingerprint() != LearnedReward().fingerprint()


def test_too_few_labels_or_one_class_gives_an_error_result():
    reward = LearnedReward()
    unfitted = reward.score(dataset(1, seed=0)[0])
    assert unfitted.score is None and unfitted.error.startswith(
        "learned_reward needs at least 8 labelled rollouts of both classes; label more with `agent-rl label`"
    )
    few = dataset(4, seed=0)
    with pytest.raises(NotEnoughLabels, match="found 4: 2 good, 2 bad"):
        reward.fit(few, [r.label_value for r in few])
    one_class = dataset(10, seed=0)
    with pytest.raises(NotEnoughLabels, match="10 good, 0 bad"):
        reward.fit(one_class, [1.0] * 10)


def test_prepare_fits_on_the_labelled_rollouts_it_loads():
    labelled = dataset(20, seed=4) + [Rollout(rollout_id="skipped", label="skip")]
    calls = []

    def load_rollouts(where=None):
        calls.append(where)
        return labelled

    reward = LearnedReward()
    reward.prepare(ScoringContext(db_path=":memory:", load_rollouts=load_rollouts))
    assert calls == [LABELLED_WHERE]
    assert reward.fitted and reward.n_train == 20
    assert reward.score(Rollout(rollout_id="new")).error is None


def test_prepare_with_too_few_labels_records_why():
    reward = LearnedReward(min_labels=8)
    reward.prepare(ScoringContext(db_path=":memory:", load_rollouts=lambda where=None: dataset(3, seed=0)))
    assert not reward.fitted
    assert "found 3" in reward.why_unfitted
    assert reward.score(Rollout(rollout_id="x")).error == reward.why_unfitted


def test_features_of_an_empty_rollout():
    assert features(Rollout(rollout_id="x")) == [0.0] * len(FEATURES)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="2 rollouts but 1 labels"):
        LearnedReward().fit(dataset(2, seed=0), [1])
    with pytest.raises(ValueError, match="must be 1/True"):
        LearnedReward().fit(dataset(2, seed=0), [1, 0.5])
    with pytest.raises(ValueError, match="min_labels"):
        LearnedReward(min_labels=1)
