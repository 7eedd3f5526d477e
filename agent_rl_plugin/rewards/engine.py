"""Combining, normalising, labelling and ranking rewards, vectorised with numpy.

:class:`RewardEngine` turns the rows of the ``rewards`` table into what training needs:

* :meth:`~RewardEngine.combine`: one weighted reward per rollout (renormalised over the rewards
  a rollout has);
* :meth:`~RewardEngine.group_normalize`: rewards relative to their group (GRPO-style);
* :meth:`~RewardEngine.binary_labels`: good / bad / unlabelled for KTO;
* :meth:`~RewardEngine.pareto_rank` and :meth:`~RewardEngine.pareto_front`: multi-objective
  non-dominated sorting;
* :meth:`~RewardEngine.aggregate_steps`: step rewards summed, averaged or discounted per rollout.

Every method checks its inputs: a NaN or infinite value raises ``ValueError`` naming its
position, and sequences that must line up raise ``ValueError`` when their lengths differ.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

NORMALIZE_METHODS = ("mean", "mean_std", "rank")
LABEL_METHODS = ("threshold", "quantile", "group_top_bottom")
AGGREGATE_METHODS = ("sum", "mean", "discounted")


def _finite_array(values: Iterable[Any], what: str = "values") -> np.ndarray:
    """``values`` as a 1-D float array; ``ValueError`` naming the first non-finite position."""
    try:
        array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numbers: {exc}") from None
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ValueError(f"{what}[{bad[0]}] is {array[bad[0]]} (NaN or infinite values are not allowed)")
    return array


def _codes(keys: Sequence[Hashable], n: int, what: str) -> tuple[np.ndarray, list[Hashable]]:
    """Integer codes for ``keys`` (first-appearance order) and the distinct keys."""
    if len(keys) != n:
        raise ValueError(f"{what} has {len(keys)} entries but there are {n} values")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=n)
    return codes, list(index)


def _check_choice(what: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}, got {value!r}")


def _within_group_rank(values: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """0-based ascending rank of each value inside its group (ties get their average rank), and
    each value's group size."""
    n = values.size
    order = np.lexsort((values, codes))
    sorted_codes, sorted_values = codes[order], values[order]
    sizes = np.bincount(codes)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    position = np.arange(n) - starts[sorted_codes]
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (sorted_codes[1:] != sorted_codes[:-1]) | (sorted_values[1:] != sorted_values[:-1])
    run = np.cumsum(new_run) - 1
    average = np.bincount(run, weights=position) / np.bincount(run)
    ranks = np.empty(n)
    ranks[order] = average[run]
    return ranks, sizes[codes]


class RewardEngine:
    """Vectorised reward arithmetic. ``weights`` maps reward names to weights (names not in it
    get ``default_weight``, 1.0 unless given)."""

    def __init__(self, weights: Mapping[str, float] | None = None, default_weight: float = 1.0) -> None:
        self.weights = dict(weights or {})
        for name, weight in [*self.weights.items(), ("default_weight", default_weight)]:
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                raise ValueError(f"weight of {name!r} must be a finite number, got {weight!r}")
        self.default_weight = float(default_weight)

    def weight(self, name: str) -> float:
        return float(self.weights.get(name, self.default_weight))

    def combine(self, table: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
        """One reward per rollout: sum(w_i * r_i) / sum(w_i) over the rewards the rollout has.

        ``table``: rows (dicts) with ``rollout_id``, ``name`` and ``value``. Rows whose value is
        ``None`` (error rows) and step rows (a non-``None`` ``step_index``) are ignored. A missing
        reward does not count as 0: the weights are renormalised over the rewards present, so
        ``{a: 2, b: 1}`` with only ``a`` present gives ``a``. A rollout with no usable reward, or
        whose present weights sum to 0, gets ``None``. Returns ``{rollout_id: combined}`` in
        first-appearance order. Two rows for the same rollout and name raise ``ValueError``, as
        does a NaN value (naming the row).
        """
        rows: list[int] = []
        names: list[str] = []
        raw: list[float] = []
        order: dict[Hashable, int] = {}
        seen: set[tuple[Hashable, str]] = set()
        for position, row in enumerate(table):
            order.setdefault(row["rollout_id"], len(order))
            value = row.get("value")
            if value is None or row.get("step_index") is not None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"table row {position}: value {value!r} of {row['name']!r} is not a finite number")
            key = (row["rollout_id"], row["name"])
            if key in seen:
                raise ValueError(
                    f"table row {position}: a second {row['name']!r} reward for rollout {row['rollout_id']!r}"
                )
            seen.add(key)
            rows.append(order[row["rollout_id"]])
            names.append(row["name"])
            raw.append(float(value))
        values = np.asarray(raw, dtype=float)
        name_codes, distinct_names = _codes(names, len(names), "names")
        weights = np.array([self.weight(str(n)) for n in distinct_names])[name_codes] if names else np.zeros(0)
        index = np.asarray(rows, dtype=np.int64)
        total = np.bincount(index, weights=weights * values, minlength=len(order))
        norm = np.bincount(index, weights=weights, minlength=len(order))
        return {str(rid): (float(total[i] / norm[i]) if norm[i] != 0 else None) for rid, i in order.items()}

    def group_normalize(
        self, values: Sequence[float], group_ids: Sequence[Hashable], method: str = "mean_std", epsilon: float = 1e-6
    ) -> np.ndarray:
        """Each value relative to its group.

        ``mean``: v - group mean. ``mean_std``: (v - group mean) / (group std + epsilon), std
        with ddof=0 (GRPO). ``rank``: 2 * r / (n - 1) - 1 with r the 0-based ascending rank in the
        group (ties averaged), so the worst is -1 and the best +1. A group of one gives 0.
        """
        _check_choice("method", method, NORMALIZE_METHODS)
        array = _finite_array(values)
        codes, _ = _codes(group_ids, array.size, "group_ids")
        if array.size == 0:
            return array
        sizes = np.bincount(codes)
        if method == "rank":
            ranks, size = _within_group_rank(array, codes)
            return np.where(size > 1, 2 * ranks / np.maximum(size - 1, 1) - 1, 0.0)
        mean = np.bincount(codes, weights=array) / sizes
        centred = array - mean[codes]
        if method == "mean_std":
            std = np.sqrt(np.bincount(codes, weights=centred**2) / sizes)
            centred = centred / (std[codes] + epsilon)
        return np.where(sizes[codes] > 1, centred, 0.0)

    def binary_labels(
        self,
        values: Sequence[float] | np.ndarray,
        method: str = "threshold",
        threshold: float = 0.5,
        quantile: float = 0.5,
        top_k: int = 1,
        bottom_k: int = 1,
        group_ids: Sequence[Hashable] | None = None,
    ) -> list[bool | None]:
        """KTO labels: ``True`` (desirable), ``False`` (undesirable) or ``None`` (not labelled).

        ``threshold``: v >= threshold is True, else False. ``quantile``: v >= the ``quantile``
        of the values (of its group when ``group_ids`` are given; numpy's linear interpolation)
        is True, else False. ``group_top_bottom`` (needs ``group_ids``): in each group, the
        ``top_k`` highest values are True and the ``bottom_k`` lowest False (at most half the
        group each; ties keep input order), the rest ``None``; a "top" value equal to the group's
        minimum, or a "bottom" value equal to its maximum, stays ``None`` (so groups of one or of
        equal values give no labels).
        """
        _check_choice("method", method, LABEL_METHODS)
        array = _finite_array(values)
        if method == "threshold":
            return [bool(v) for v in array >= float(threshold)]
        if method == "quantile":
            if not 0.0 <= quantile <= 1.0:
                raise ValueError(f"quantile must be within [0, 1], got {quantile}")
            if group_ids is None:
                return [bool(v) for v in array >= np.quantile(array, quantile)] if array.size else []
            codes, _ = _codes(group_ids, array.size, "group_ids")
            cut = np.empty(array.size)
            for code in np.unique(codes):
                members = codes == code
                cut[members] = np.quantile(array[members], quantile)
            return [bool(v) for v in array >= cut]
        if group_ids is None:
            raise ValueError("method 'group_top_bottom' needs group_ids")
        if top_k < 0 or bottom_k < 0:
            raise ValueError(f"top_k and bottom_k must be >= 0, got {top_k} and {bottom_k}")
        codes, _ = _codes(group_ids, array.size, "group_ids")
        labels: list[bool | None] = [None] * array.size
        if array.size == 0:
            return labels
        order = np.lexsort((-array, codes))  # by group, highest first, stable within ties
        sizes = np.bincount(codes)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        position = np.arange(array.size) - starts[codes[order]]
        size = sizes[codes[order]]
        lo = np.minimum.reduceat(array[order], starts)[codes[order]]
        hi = np.maximum.reduceat(array[order], starts)[codes[order]]
        value = array[order]
        top = (position < np.minimum(top_k, size // 2)) & (value > lo)
        bottom = (position >= size - np.minimum(bottom_k, size // 2)) & (value < hi)
        for index in order[top]:
            labels[index] = True
        for index in order[bottom]:
            labels[index] = False
        return labels

    def pareto_rank(self, matrix: Sequence[Sequence[float]], maximize: Sequence[bool] | None = None) -> np.ndarray:
        """Non-dominated sorting: rank 0 = the Pareto front, 1 = the front once 0 is removed, ...

        ``matrix``: one row per candidate, one column per objective, every column maximised
        (``maximize`` may flip columns to minimised). Row i dominates j when it is >= on every
        objective and > on one. The dominance matrix is built at once (O(n^2 x m) memory).
        """
        m = np.asarray(matrix, dtype=float)
        if m.ndim != 2:
            raise ValueError(f"matrix must be two-dimensional (candidates x objectives), got shape {m.shape}")
        bad = np.argwhere(~np.isfinite(m))
        if bad.size:
            raise ValueError(
                f"matrix[{bad[0][0]}][{bad[0][1]}] is {m[tuple(bad[0])]} (NaN or infinite values are not allowed)"
            )
        if maximize is not None:
            if len(maximize) != m.shape[1]:
                raise ValueError(f"maximize has {len(maximize)} entries but the matrix has {m.shape[1]} columns")
            m = m * np.where(np.asarray(maximize, dtype=bool), 1.0, -1.0)
        ge = (m[:, None, :] >= m[None, :, :]).all(axis=2)
        gt = (m[:, None, :] > m[None, :, :]).any(axis=2)
        dominates = ge & gt  # dominates[i, j]: i dominates j
        ranks = np.full(m.shape[0], -1, dtype=np.int64)
        remaining = np.ones(m.shape[0], dtype=bool)
        front = 0
        while remaining.any():
            dominated = (dominates & remaining[:, None]).any(axis=0)
            current = remaining & ~dominated
            ranks[current] = front
            remaining &= ~current
            front += 1
        return ranks

    def pareto_front(self, matrix: Sequence[Sequence[float]], maximize: Sequence[bool] | None = None) -> np.ndarray:
        """Indices (ascending) of the non-dominated rows: :meth:`pareto_rank` == 0."""
        return np.flatnonzero(self.pareto_rank(matrix, maximize) == 0)

    def aggregate_steps(
        self,
        step_rewards: Sequence[float],
        rollout_ids: Sequence[Hashable],
        how: str = "sum",
        gamma: float = 0.99,
        step_indices: Sequence[int] | None = None,
    ) -> dict[Hashable, float]:
        """Step rewards aggregated per rollout: ``sum``, ``mean`` or ``discounted``
        (sum of gamma^t * r_t, t = 0, 1, ... the position of the step among that rollout's
        rewarded steps, ordered by ``step_indices`` when given, else by input order).
        Returns ``{rollout_id: value}`` in first-appearance order."""
        _check_choice("how", how, AGGREGATE_METHODS)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be within [0, 1], got {gamma}")
        rewards = _finite_array(step_rewards, "step_rewards")
        codes, distinct = _codes(rollout_ids, rewards.size, "rollout_ids")
        if rewards.size == 0:
            return {}
        counts = np.bincount(codes)
        if how == "discounted":
            steps = np.arange(rewards.size) if step_indices is None else _finite_array(step_indices, "step_indices")
            if steps.size != rewards.size:
                raise ValueError(f"step_indices has {steps.size} entries but there are {rewards.size} step rewards")
            order = np.lexsort((np.arange(rewards.size), steps, codes))
            starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
            t = np.empty(rewards.size)
            t[order] = np.arange(rewards.size) - starts[codes[order]]
            totals = np.bincount(codes, weights=rewards * gamma**t).astype(float)
        else:
            totals = np.bincount(codes, weights=rewards).astype(float)
            if how == "mean":
                totals = totals / counts
        return {rid: float(totals[i]) for i, rid in enumerate(distinct)}


__all__ = ["RewardEngine", "NORMALIZE_METHODS", "LABEL_METHODS", "AGGREGATE_METHODS"]
