"""Red team (issue 18): answers a policy could produce that the default ``task_completion``
labelled correct without being correct, and answers that made it slow.

Each case was scored 1.0 (or took seconds) before the fix; see the report of the red-team pass.
"""

from __future__ import annotations

import time

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin import task_completion as tc
from agent_rl_plugin.rewards.builtin.task_completion import TaskCompletion

MODES = ("normalized", "contains", "numeric")


def score(answer: str, truth, mode: str = "normalized") -> float | None:
    result = TaskCompletion(mode=mode).score(Rollout(rollout_id="r", final_output=answer, ground_truth=truth))
    return None if result is None else result.score


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "answer",
    ["not 42", "The answer is not 42.", "It isn't 42", "The result is never exactly 42", "The answer is 43, not 42"],
)
def test_a_negated_number_is_not_the_answer(answer, mode):
    assert score(answer, 42, mode) == 0.0


@pytest.mark.parametrize("mode", ("normalized", "contains"))
@pytest.mark.parametrize(
    "answer", ["It is not Paris.", "The answer is NOT Paris", "not Paris", "Paris? No, not Paris."]
)
def test_a_negated_text_is_not_the_answer(answer, mode):
    assert score(answer, "Paris", mode) == 0.0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("answer", ["\u221242", "The answer is \u221242", "\uff0d42", "\u201342", "\\boxed{\u221242}"])
def test_a_unicode_minus_is_a_minus(answer, mode):
    assert score(answer, 42, mode) == 0.0
    assert score(answer, -42, mode) == 1.0


@pytest.mark.parametrize("mode", ("normalized", "numeric"))
def test_two_different_boxed_results_are_alternatives(mode):
    assert score("\\boxed{41} \\boxed{42}", 42, mode) == 0.0
    assert score("\\boxed{42} then \\boxed{41}", 41, mode) == 0.0
    assert score("so \\boxed{42}, and again \\boxed{42}", 42, mode) == 1.0  # the same result twice commits


@pytest.mark.parametrize("mode", ("normalized", "contains"))
@pytest.mark.parametrize(
    "answer",
    [
        "Paris and London",
        "Paris, London",
        "Paris / London",
        "maybe Paris maybe London",
        "Paris nor London",
        "It is Paris. Alternatively, it is London.",
    ],
)
def test_two_short_candidates_are_a_hedge(answer, mode):
    assert score(answer, "Paris", mode) == 0.0
    assert score(answer, "London", mode) == 0.0


def test_honest_answers_still_match():
    assert score("The answer is 42, not 43", 42) == 1.0
    assert score("Romeo and Juliet was written by William Shakespeare.", "Shakespeare") == 1.0
    assert score("I cannot be sure, but the answer is 42", 42) == 1.0
    assert score("The capital of France is Paris, not Lyon.", "Paris") == 1.0
    assert score("-42", -42) == 1.0 and score("+42", 42) == 1.0
    assert score("Yes and no", "yes and no") == 1.0  # equal to the reference: not a hedge of it


def test_the_committed_number_converts_one_number_however_many_there_are(monkeypatch):
    converted = []
    real = tc._value
    monkeypatch.setattr(tc, "_value", lambda m: converted.append(m) or real(m))
    answer = "1, " * 100_000 + "so 42"
    assert tc.committed_number(answer) == (42.0, False)
    assert len(converted) <= 2
    converted.clear()
    assert score("7 " * 100_000, 42, "contains") == 0.0  # stops at the first other number
    assert len(converted) <= 2


@pytest.mark.parametrize(
    "answer",
    ["1," * 500_000, "$-" * 500_000, "1%" * 500_000, "\\boxed{" * 140_000, "\\boxed{1}" * 100_000, "a " * 500_000],
)
def test_a_megabyte_answer_scores_quickly(answer):
    started = time.perf_counter()
    for mode, truth in (("normalized", 42), ("normalized", "Paris"), ("contains", 42), ("numeric", 42)):
        score(answer, truth, mode)
    assert time.perf_counter() - started < 8.0  # 4 scorings of 1 MB; seconds each before the fix


@pytest.mark.parametrize("mode", ("normalized", "contains"))
def test_a_boxed_text_answer_is_read_inside_its_box(mode):
    assert score(r"The answer is \boxed{Paris}.", "Paris", mode) == 1.0
    assert score(r"\boxed{Paris}", "Paris", mode) == 1.0
    assert score(r"\boxed{Lyon}", "Paris", mode) == 0.0
