"""task_completion: normalized (default) / exact / equal / contains / numeric against the ground truth."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.task_completion import TaskCompletion, normalise, parse_numbers


def run(answer: str | None, truth, **params) -> float | None:
    result = TaskCompletion(**params).score(Rollout(rollout_id="r", final_output=answer, ground_truth=truth))
    return None if result is None else result.score


def test_exact():
    assert run(" Paris\n", "Paris", mode="exact") == 1.0
    assert run("paris", "Paris", mode="exact") == 0.0


def test_equal_ignores_case_punctuation_articles_and_spaces_only():
    assert normalise("  The  Eiffel Tower! ") == "eiffel tower"
    assert run("the eiffel   tower.", "Eiffel Tower", mode="equal") == 1.0
    assert run("the eiffel tower in Paris", "Eiffel Tower", mode="equal") == 0.0
    assert run("the eiffel tower in Paris", "Eiffel Tower", mode="normalised") == 1.0  # old spelling: normalized


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("The total is 1,234.5 dollars.", 1234.5, 1.0),
        ("It costs $12.", 12, 1.0),
        ("About 50% of them.", 0.5, 1.0),
        ("About 50% of them.", 50, 1.0),
        ("First 3, then 7, so the answer is 10", "10", 1.0),
        ("The answer is 10, not 3", "10", 1.0),  # the number after the last answer marker counts
        ("I got 10, then rechecked: 3", "10", 0.0),  # no marker: the LAST number counts
        ("It is -$3", -3, 1.0),
        ("no numbers here", 5, 0.0),
        ("1.0000001", 1, 1.0),
    ],
)
def test_numeric(answer, truth, expected):
    assert run(answer, truth, mode="numeric") == expected


def test_numeric_tolerances():
    assert run("3.1", 3.14159, mode="numeric") == 0.0
    assert run("3.1", 3.14159, mode="numeric", abs_tol=0.05) == 1.0
    assert run("105", 100, mode="numeric", rel_tol=0.1) == 1.0


def test_contains_matches_whole_words():
    assert run("I think the answer is Paris, France.", "paris", mode="contains") == 1.0
    assert run("Parisian food", "paris", mode="contains") == 0.0


def test_default_compares_numbers_as_numbers_and_texts_normalised():
    assert run("So it is $1,000.", "1000", mode="auto") == 1.0  # old spelling of the default
    result = TaskCompletion().score(Rollout(rollout_id="r", final_output="the Moon", ground_truth="moon"))
    assert result.score == 1.0 and result.metrics["mode"] == "normalized" and result.metrics["rule"] == "equal"


def test_list_of_acceptable_answers_and_dict_ground_truth():
    assert run("NYC", ["New York", "NYC"]) == 1.0
    assert run("Boston", ["New York", "NYC"]) == 0.0
    assert run("42", {"answer": 42, "explanation": "..."}) == 1.0


def test_extract_takes_the_marked_answer():
    assert run("Reasoning: 2+2=4... Answer: four", "four", extract=r"Answer:\s*(.+)") == 1.0


def test_missing_answer_fails_and_missing_truth_is_not_applicable():
    assert run(None, "x") == 0.0
    assert run("x", None) is None
    assert run("x", []) is None
    assert run("x", {"other": 1}) is None


def test_parse_numbers():
    assert parse_numbers("-$3, +4, 1e-3 and 2.") == [(-3.0, False), (4.0, False), (0.001, False), (2.0, False)]


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="parameter mode"):
        TaskCompletion(mode="fuzzy")
    with pytest.raises(ValueError, match="rel_tol"):
        TaskCompletion(rel_tol=-1)
    with pytest.raises(ValueError, match="invalid extract"):
        TaskCompletion(extract="(")
    with pytest.raises(ValueError, match="not a number"):
        run("5", "five", mode="numeric")
