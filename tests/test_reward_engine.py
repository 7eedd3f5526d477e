"""RewardEngine: combine, group_normalize, binary_labels, pareto_rank/front, aggregate_steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_rl_plugin.rewards.engine import RewardEngine


def rows(*items):
    return [{"rollout_id": r, "name": n, "value": v} for r, n, v in items]


# --- combine -------------------------------------------------------------------------------------


def test_combine_weighted_and_renormalised_over_present_rewards():
    engine = RewardEngine({"a": 2.0, "b": 1.0})
    table = rows(("r1", "a", 1.0), ("r1", "b", 0.0), ("r2", "a", 0.5), ("r3", "b", -1.0))
    assert engine.combine(table) == pytest.approx({"r1": 2 / 3, "r2": 0.5, "r3": -1.0})


def test_combine_default_weight_error_rows_and_step_rows():
    engine = RewardEngine({"a": 3.0}, default_weight=1.0)
    table = rows(("r1", "a", 1.0), ("r1", "c", 0.0), ("r2", "a", None))
    table.append({"rollout_id": "r1", "name": "a", "value": 5.0, "step_index": 2})  # step row: ignored
    assert engine.combine(table) == {"r1": 0.75, "r2": None}
    assert RewardEngine().combine(rows(("r", "x", 1.0), ("r", "y", 3.0))) == {"r": 2.0}
    assert RewardEngine({"a": 0.0}, default_weight=0.0).combine(rows(("r", "a", 1.0))) == {"r": None}


def test_combine_rejects_nan_and_duplicates():
    with pytest.raises(ValueError, match=r"table row 1: value nan of 'b'"):
        RewardEngine().combine(rows(("r", "a", 1.0), ("r", "b", float("nan"))))
    with pytest.raises(ValueError, match="table row 1: a second 'a' reward"):
        RewardEngine().combine(rows(("r", "a", 1.0), ("r", "a", 2.0)))
    with pytest.raises(ValueError, match="weight of 'a'"):
        RewardEngine({"a": float("inf")})


# --- group_normalize -----------------------------------------------------------------------------


def test_group_normalize_mean_and_mean_std():
    engine = RewardEngine()
    values, groups = [1.0, 3.0, 10.0, 0.0, 7.0], ["g", "g", "h", "g", "solo"]
    assert engine.group_normalize(values, groups, "mean") == pytest.approx([-1 / 3, 5 / 3, 0.0, -4 / 3, 0.0])
    std = math.sqrt(((1 - 4 / 3) ** 2 + (3 - 4 / 3) ** 2 + (0 - 4 / 3) ** 2) / 3)
    expected = [(v - 4 / 3) / (std + 1e-6) for v in (1.0, 3.0)] + [0.0, (0 - 4 / 3) / (std + 1e-6), 0.0]
    assert engine.group_normalize(values, groups, "mean_std") == pytest.approx(expected)


def test_group_normalize_equal_values_give_zero():
    assert RewardEngine().group_normalize([2.0, 2.0], [1, 1], "mean_std") == pytest.approx([0.0, 0.0])


def test_group_normalize_rank_with_ties():
    ranked = RewardEngine().group_normalize([5.0, 1.0, 5.0, 3.0, 9.0, 2.0], ["a", "a", "a", "a", "b", "c"], "rank")
    # group a sorted: 1 (rank 0), 3 (1), 5, 5 (2.5 each); 2r/(n-1) - 1 with n = 4
    assert ranked == pytest.approx([2 / 3, -1.0, 2 / 3, -1 / 3, 0.0, 0.0])


def test_group_normalize_validation():
    with pytest.raises(ValueError, match=r"values\[1\] is nan"):
        RewardEngine().group_normalize([1.0, float("nan")], ["g", "g"])
    with pytest.raises(ValueError, match="group_ids has 1 entries but there are 2 values"):
        RewardEngine().group_normalize([1.0, 2.0], ["g"])
    with pytest.raises(ValueError, match="method must be one of"):
        RewardEngine().group_normalize([1.0], ["g"], "zscore")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e6, 1e6), st.integers(0, 4)), min_size=1, max_size=30))
def test_group_normalize_mean_centres_every_group(pairs):
    values, groups = [v for v, _ in pairs], [g for _, g in pairs]
    out = RewardEngine().group_normalize(values, groups, "mean")
    for g in set(groups):
        members = [o for o, gg in zip(out, groups) if gg == g]
        assert abs(sum(members)) <= 1e-6 * max(1.0, max(abs(v) for v in values)) * len(members)


# --- binary_labels -------------------------------------------------------------------------------


def test_binary_labels_threshold_and_quantile():
    engine = RewardEngine()
    assert engine.binary_labels([0.2, 0.5, 0.9]) == [False, True, True]
    assert engine.binary_labels([1.0, 2.0, 3.0, 4.0], "quantile", quantile=0.75) == [False, False, False, True]
    assert engine.binary_labels([1.0, 2.0, 10.0, 20.0], "quantile", group_ids=["a", "a", "b", "b"]) == [False, True, False, True]


def test_binary_labels_group_top_bottom():
    engine = RewardEngine()
    values = [0.1, 0.9, 0.5, 0.7, 3.0, 3.0, 8.0]
    groups = ["g", "g", "g", "g", "same", "same", "alone"]
    assert engine.binary_labels(values, "group_top_bottom", group_ids=groups) == [False, True, None, None, None, None, None]
    assert engine.binary_labels(values[:4], "group_top_bottom", top_k=2, bottom_k=2, group_ids=groups[:4]) == [False, True, False, True]
    # ties: a "bottom" equal to the group's maximum is not labelled bad
    assert engine.binary_labels([1.0, 1.0, 1.0, 0.0], "group_top_bottom", top_k=2, bottom_k=2, group_ids="gggg") == [True, True, None, False]


def test_binary_labels_validation():
    with pytest.raises(ValueError, match="needs group_ids"):
        RewardEngine().binary_labels([1.0], "group_top_bottom")
    with pytest.raises(ValueError, match=r"values\[0\] is inf"):
        RewardEngine().binary_labels([float("inf")])
    with pytest.raises(ValueError, match="quantile must be within"):
        RewardEngine().binary_labels([1.0], "quantile", quantile=2)


# --- pareto --------------------------------------------------------------------------------------


def test_pareto_rank_fronts():
    matrix = [[1, 5], [2, 4], [1, 4], [0, 0], [3, 1], [2, 4]]
    # front 0: (1,5) (2,4) (3,1) (2,4 duplicate: equal rows do not dominate); front 1: (1,4); front 2: (0,0)
    assert RewardEngine().pareto_rank(matrix).tolist() == [0, 0, 1, 2, 0, 0]
    assert RewardEngine().pareto_front(matrix).tolist() == [0, 1, 4, 5]


def test_pareto_minimised_column_and_validation():
    matrix = [[1.0, 10.0], [1.0, 5.0]]  # second column is a cost
    assert RewardEngine().pareto_rank(matrix, maximize=[True, False]).tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"matrix\[1\]\[0\] is nan"):
        RewardEngine().pareto_rank([[1.0, 2.0], [float("nan"), 1.0]])
    with pytest.raises(ValueError, match="two-dimensional"):
        RewardEngine().pareto_rank([1.0, 2.0])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=25))
def test_pareto_rank_matches_brute_force(points):
    def dominates(a, b):
        return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))

    ranks = RewardEngine().pareto_rank(points)
    for i, p in enumerate(points):
        assert (ranks[i] == 0) == (not any(dominates(q, p) for q in points))
        for j, q in enumerate(points):
            if dominates(q, p):
                assert ranks[j] < ranks[i]


# --- aggregate_steps -----------------------------------------------------------------------------


def test_aggregate_steps():
    engine = RewardEngine()
    rewards, ids = [1.0, -1.0, 2.0, 4.0], ["a", "a", "b", "a"]
    assert engine.aggregate_steps(rewards, ids, "sum") == {"a": 4.0, "b": 2.0}
    assert engine.aggregate_steps(rewards, ids, "mean") == pytest.approx({"a": 4 / 3, "b": 2.0})
    assert engine.aggregate_steps(rewards, ids, "discounted", gamma=0.5) == pytest.approx({"a": 1 - 0.5 + 4 * 0.25, "b": 2.0})
    # ordered by step index: a's steps are 7 (1.0), 3 (-1.0), 5 (4.0) -> -1, 4, 1
    assert engine.aggregate_steps(rewards, ids, "discounted", gamma=0.5, step_indices=[7, 3, 0, 5]) == pytest.approx(
        {"a": -1 + 0.5 * 4 + 0.25 * 1, "b": 2.0}
    )


def test_aggregate_steps_validation():
    with pytest.raises(ValueError, match=r"step_rewards\[2\] is nan"):
        RewardEngine().aggregate_steps([1.0, 2.0, float("nan")], ["a", "a", "a"])
    with pytest.raises(ValueError, match="rollout_ids has 1 entries"):
        RewardEngine().aggregate_steps([1.0, 2.0], ["a"])
    with pytest.raises(ValueError, match="gamma"):
        RewardEngine().aggregate_steps([1.0], ["a"], "discounted", gamma=1.5)
    assert RewardEngine().aggregate_steps([], []) == {}


def test_numpy_inputs_are_accepted():
    out = RewardEngine().group_normalize(np.array([1.0, 3.0]), np.array(["g", "g"]), "mean")
    assert out.tolist() == [-1.0, 1.0]
