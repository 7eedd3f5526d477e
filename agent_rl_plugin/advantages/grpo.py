"""Episode-level advantages relative to a group: GRPO, RLOO and Dr. GRPO (vectorised).

Each function takes one reward per rollout and the rollout's group id, and returns one
advantage per rollout, in the input's order. Groups may have different sizes. Rules shared by
all three (see ``docs/advantages.md``):

* a group of one rollout gets advantage 0 (there is nothing to compare with);
* a group whose rewards are all exactly equal gets advantage 0 exactly;
* a NaN, infinite or missing reward raises ``ValueError`` naming the row (and its rollout id
  when ``rollout_ids`` is given); so does a missing group id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import numpy as np

from agent_rl_plugin.advantages._groups import GroupStats, factorize, finite_floats, group_stats, safe_divide

SCALES = ("group", "batch", "none")
#: TRL 1.16 ``GRPOTrainer._generate_and_score_completions`` divides by ``std + 1e-4``.
TRL_EPSILON = 1e-4


def _prepare(
    rewards: Sequence[float] | np.ndarray, group_ids: Sequence[Hashable] | np.ndarray, rollout_ids: Sequence[Any] | None
) -> tuple[np.ndarray, np.ndarray, GroupStats]:
    values = finite_floats(rewards, "reward", rollout_ids)
    if rollout_ids is not None and len(rollout_ids) != values.size:
        raise ValueError(f"rollout_ids has {len(rollout_ids)} entries but there are {values.size} rewards")
    if len(group_ids) != values.size:
        raise ValueError(f"group_ids has {len(group_ids)} entries but there are {values.size} rewards")
    codes, n_groups = factorize(group_ids, "group id", rollout_ids)
    return values, codes, group_stats(values, codes, n_groups)


def _centred(values: np.ndarray, codes: np.ndarray, stats: GroupStats) -> np.ndarray:
    """r - group mean, exactly 0 in groups of one and in groups of equal rewards."""
    zero = (stats.size[codes] < 2) | stats.all_equal[codes]
    return np.where(zero, 0.0, values - stats.mean[codes])


def grpo_advantages(
    rewards: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable] | np.ndarray,
    scale: str = "group",
    *,
    epsilon: float = TRL_EPSILON,
    rollout_ids: Sequence[Any] | None = None,
) -> np.ndarray:
    """GRPO advantages with TRL 1.16's ``scale_rewards`` meaning.

    ``A_i = r_i - mean(group)``, then divided by ``std + epsilon`` where std is the group's
    (``scale="group"``) or the whole batch's (``scale="batch"``) **unbiased** standard
    deviation (Bessel's correction, as ``trl.trainer.utils.nanstd``), or not divided
    (``scale="none"``). ``epsilon`` defaults to TRL's ``1e-4``. The batch std of a single
    reward is taken as 0. Groups of one, and groups of equal rewards, get 0.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    values, codes, stats = _prepare(rewards, group_ids, rollout_ids)
    centred = _centred(values, codes, stats)
    if scale == "none" or values.size == 0:
        return centred
    if scale == "group":
        std = stats.std[codes]
    else:
        std = np.full(values.size, values.std(ddof=1) if values.size > 1 else 0.0)
    return safe_divide(centred, std + epsilon)


def dr_grpo_advantages(
    rewards: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable] | np.ndarray,
    *,
    rollout_ids: Sequence[Any] | None = None,
) -> np.ndarray:
    """Dr. GRPO advantages (Liu et al. 2025, "Understanding R1-Zero-Like Training"):
    ``A_i = r_i - mean(group)``, with no division by the standard deviation (the same as
    ``grpo_advantages(..., scale="none")``). Groups of one and equal rewards give 0."""
    values, codes, stats = _prepare(rewards, group_ids, rollout_ids)
    return _centred(values, codes, stats)


def rloo_advantages(
    rewards: Sequence[float] | np.ndarray,
    group_ids: Sequence[Hashable] | np.ndarray,
    *,
    rollout_ids: Sequence[Any] | None = None,
) -> np.ndarray:
    """REINFORCE leave-one-out advantages: ``A_i = r_i - mean of the other rewards of the group``
    ``= r_i - (S - r_i) / (n - 1) = n / (n - 1) * (r_i - mean)`` for a group of ``n >= 2`` with
    sum ``S`` (TRL's ``RLOOTrainer`` without ``normalize_advantages``). A group of one gets 0."""
    values, codes, stats = _prepare(rewards, group_ids, rollout_ids)
    n = stats.size[codes]
    with np.errstate(invalid="ignore", divide="ignore"):
        others = np.bincount(codes, weights=values, minlength=stats.size.size)[codes] - values
        advantage = values - others / (n - 1)
    return np.where((n < 2) | stats.all_equal[codes], 0.0, advantage)


@dataclass
class GroupSummary:
    """How the rollouts fall into groups (for reports)."""

    rollouts: int
    groups: int
    singleton_groups: int
    all_equal_groups: int  # groups of two or more whose rewards are all equal

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def group_summary(rewards: Sequence[float] | np.ndarray, group_ids: Sequence[Hashable] | np.ndarray) -> GroupSummary:
    """Counts of groups, groups of one, and groups (of two or more) with all-equal rewards."""
    values, codes, stats = _prepare(rewards, group_ids, None)
    multi = stats.size >= 2
    return GroupSummary(
        rollouts=int(values.size),
        groups=int(stats.size.size),
        singleton_groups=int((stats.size == 1).sum()),
        all_equal_groups=int((multi & stats.all_equal).sum()),
    )
