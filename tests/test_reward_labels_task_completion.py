"""task_completion labels sentence answers honestly by default, and stuffing candidates does not pay.

Issue 18 ("wrong labels by default"): correct answers written as sentences must score 1.0 with
the default settings, wrong ones 0.0, and a policy listing many candidates must not match.
"""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.task_completion import TaskCompletion

# (ground truth, a correct answer written as a sentence, a wrong answer written the same way)
CASES = [
    ("Paris", "The capital of France is Paris.", "The capital of France is Lyon."),
    ("3.5", "The total comes to $3.50.", "The total comes to $3.05."),
    ("1000", "The tank holds 1,000 litres.", "The tank holds 100 litres."),
    ("Jupiter", "Jupiter is the largest planet in the solar system.", "Saturn is the largest planet."),
    ("George Washington", "The first US president was George Washington.", "The first US president was John Adams."),
    (42, "The answer is 42 (6 times 7).", "The answer is 41 (6 times 7 minus 1)."),
    ("blue", "The sky looks blue because of Rayleigh scattering.", "The sky looks red at noon."),
    ("H2O", "Water's chemical formula is H2O.", "Water's chemical formula is CO2."),
    ("1,945", "World War II ended in 1945.", "World War II ended in 1944."),
    ("Mount Everest", "Mount Everest, at 8,849 m, is the highest mountain.", "K2 is the highest mountain."),
    ("Shakespeare", "Romeo and Juliet was written by William Shakespeare.", "It was written by Marlowe."),
    ("0.25", "A quarter written as a decimal is 0.25.", "A quarter written as a decimal is 0.4."),
]


def scores(answers: list[str], truths: list, **params) -> list[float | None]:
    reward = TaskCompletion(**params)
    results = [
        reward.score(Rollout(rollout_id=f"r{i}", final_output=a, ground_truth=t))
        for i, (a, t) in enumerate(zip(answers, truths))
    ]
    return [None if r is None else r.score for r in results]


def test_exact_match_scores_no_sentence_answer_but_the_default_scores_all():
    truths = [c[0] for c in CASES]
    correct = [c[1] for c in CASES]
    assert scores(correct, truths, mode="exact") == [0.0] * 12  # the friction: 0 of 12
    assert scores(correct, truths) == [1.0] * 12  # the default (normalized) labels them correct


def test_wrong_sentence_answers_still_score_zero():
    assert scores([c[2] for c in CASES], [c[0] for c in CASES]) == [0.0] * 12


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        ("3.50", "3.5"),
        ("3.5", "3.50"),
        ("1,000", "1000"),
        ("1000", "1,000"),
        ("$1,000.00", 1000),
        ("  PARIS!! ", "paris"),
    ],
)
def test_numbers_and_texts_are_compared_normalised(answer, truth):
    assert scores([answer], [truth]) == [1.0]


STUFFED_NUMBERS = "Candidates: " + ", ".join(str(n) for n in range(1, 101))  # 1, 2, ..., 100


@pytest.mark.parametrize("mode", ["normalized", "contains", "numeric"])
def test_listing_every_candidate_number_does_not_match(mode):
    # 42 is in the list as a whole token; only the committed (last) number may count
    assert scores([STUFFED_NUMBERS], [42], mode=mode) == [0.0]
    assert scores(["The answer is 42 or 43."], [42], mode=mode if mode != "numeric" else "normalized") == [0.0]


@pytest.mark.parametrize("mode", ["normalized", "contains"])
@pytest.mark.parametrize(
    "answer", ["Paris, London, Berlin, Madrid, Rome", "It is Paris or Lyon.", "Paris / Lyon / Nice"]
)
def test_listing_text_candidates_does_not_match(mode, answer):
    assert scores([answer], ["Paris"], mode=mode) == [0.0]


def test_contains_needs_whole_words_and_a_lone_number():
    assert scores(["Parisian food is good."], ["Paris"], mode="contains") == [0.0]
    assert scores(["It costs 1234 dollars."], [123], mode="contains") == [0.0]
    assert scores(["It is 42, so 42 it is."], [42], mode="contains") == [1.0]
    assert scores(["6 x 7 = 42"], [42], mode="contains") == [0.0]  # other numbers: use normalized


def test_long_answers_do_not_match_by_containment_by_default():
    essay = "Many people think Sydney is the capital. " * 10 + "Canberra is often mentioned too. Sydney it is."
    assert scores([essay], ["Canberra"]) == [0.0]
    assert scores([essay], ["Canberra"], max_words=1000) == [1.0]  # a documented parameter


def test_mode_is_set_through_the_rewards_config(tmp_path):
    from agent_rl_plugin.config import RLConfig
    from agent_rl_plugin.rewards.registry import collect_registered_rewards

    config = RLConfig.from_env(rewards={"task_completion": {"mode": "exact", "max_words": 20}})
    reward = collect_registered_rewards(config=config).rewards["task_completion"].reward
    assert reward.params["mode"] == "exact" and reward.params["max_words"] == 20
    assert scores(["The capital of France is Paris."], ["Paris"], **{"mode": reward.params["mode"]}) == [0.0]
