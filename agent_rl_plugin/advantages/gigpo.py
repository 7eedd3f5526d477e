"""GiGPO advantages (Feng et al. 2025, arXiv 2505.10978), vectorised with numpy (pure: no
pyarrow, pandas or DuckDB import; Arrow tables and DataFrames are read by duck typing).

``A = A_E + omega * A_S`` for every step (row):

* ``A_E`` (episode): the trajectory's return ``R`` relative to the other trajectories of its
  episode group (same ``group_id``): ``R - mean`` (``mode="mean_norm"``) or
  ``(R - mean) / (std + epsilon)`` (``mode="mean_std_norm"``, unbiased std). With
  ``baseline="step"`` the mean and std are those of the group's steps (each trajectory counts
  once per step, the reference implementation's default); with ``baseline="trajectory"`` each
  trajectory counts once (the paper's Eq. 3). A group of one trajectory uses mean 0 and std 1.
* ``A_S`` (step): the discounted return ``G_t = sum_k gamma^k r_{t+k}`` of the trajectory from
  that step, relative to the other steps of its step group: same ``state_key`` in the same
  episode group (revisits inside one trajectory included; never across groups). A step group of
  one step gets 0.

``R`` is the ``episode_reward`` column when given (constant per trajectory), else the sum of the
trajectory's ``reward`` column. Groups whose values are all exactly equal get exactly 0. See
``docs/advantages.md`` for the formulas and every rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from agent_rl_plugin.advantages._groups import (
    compact_codes,
    factorize,
    finite_floats,
    group_stats,
    integer_column,
    safe_divide,
)

MODES = ("mean_norm", "mean_std_norm")
BASELINES = ("step", "trajectory")
REQUIRED_COLUMNS = ("group_id", "trajectory_id", "step_index", "state_key", "reward")


def as_columns(steps: Any) -> tuple[dict[str, Any], int]:
    """``(columns, n_rows)`` of ``steps``: a pyarrow Table or RecordBatch (its columns stay
    Arrow arrays), an object with ``to_arrow()`` (polars), a pandas DataFrame (duck-typed:
    neither library is imported here), a mapping of column name to values, or a list of row
    dicts. Raises ``ValueError`` for columns of different lengths or anything else."""
    if not hasattr(steps, "column_names") and hasattr(steps, "to_arrow") and callable(steps.to_arrow):
        steps = steps.to_arrow()
    if hasattr(steps, "column_names") and hasattr(steps, "column") and hasattr(steps, "num_rows"):
        return {name: steps.column(name) for name in steps.column_names}, int(steps.num_rows)
    if hasattr(steps, "to_dict") and hasattr(steps, "columns") and hasattr(steps, "dtypes"):
        return {str(name): steps[name].to_numpy() for name in steps.columns}, len(steps)
    if isinstance(steps, Mapping):
        columns = {str(name): values for name, values in steps.items()}
    else:
        try:
            rows = list(steps)
        except TypeError:
            raise ValueError(
                "steps must be a pandas DataFrame, a pyarrow Table, a mapping of columns or a list of dicts, "
                f"got {type(steps).__name__}"
            ) from None
        if not all(isinstance(row, Mapping) for row in rows):
            raise ValueError("steps given as a list must hold one dict per row")
        names: dict[str, None] = {}
        for row in rows:
            names.update(dict.fromkeys(row))
        columns = {name: [row.get(name) for row in rows] for name in names}
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"the columns of steps differ in length: {sorted(lengths)}")
    return columns, lengths.pop() if lengths else 0


def _item(column: Any, row: int) -> Any:
    value = column[row]
    return value.as_py() if hasattr(value, "as_py") else value.item() if hasattr(value, "item") else value


class _RowLabels:
    """Lazy descriptions of rows for error messages: ``trajectory 'x', step_index 3``."""

    def __init__(self, columns: Mapping[str, Any], n_rows: int) -> None:
        self.columns = columns
        self.n_rows = n_rows

    def __len__(self) -> int:
        return self.n_rows

    def __getitem__(self, row: int) -> str:
        traj = _item(self.columns["trajectory_id"], row)
        step = _item(self.columns["step_index"], row)
        return f"trajectory {traj!r}, step_index {step}"


def discounted_returns(rewards: np.ndarray, continues: np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = r_t + gamma * G_{t+1}`` for rows sorted by trajectory then step, where
    ``continues[i]`` says row ``i + 1`` is the next step of the same trajectory.

    Pointer jumping: after ``j`` rounds each row holds the discounted sum of its next ``2^j``
    rewards, so it takes ``ceil(log2(longest trajectory))`` vectorised rounds. It only adds
    partial sums of the same trajectory (no global cumulative sum whose subtraction would lose
    precision, and no ``gamma^-t`` rescaling that underflows on long trajectories).
    """
    n = rewards.size
    value = np.append(rewards.astype(np.float64), 0.0)  # index n: the end of every trajectory
    factor = np.full(n + 1, float(gamma))
    nxt = np.append(np.where(continues, np.arange(1, n + 1), n), n)
    while (nxt[:n] != n).any():
        value = value + factor * value[nxt]
        factor = factor * factor[nxt]
        nxt = nxt[nxt]
        value[n] = 0.0
    return value[:n]


_DENSE_MAX_STEPS = 4096  # longest trajectory for the sort-free path (one vectorised round per step)


def _dense_step_returns(
    traj: np.ndarray, n_traj: int, step_index: np.ndarray, reward: np.ndarray, gamma: float
) -> np.ndarray | None:
    """``G_t`` without sorting, when every trajectory's ``step_index`` values are consecutive
    and unique (the usual case) and a ``steps x trajectories`` grid stays small: rewards are
    scattered into the grid (one row per step position, one column per trajectory), then
    ``G = r + gamma * G_next`` runs one vectorised round per position from the last one, the
    same operations in the same order as a per-trajectory loop. ``None`` when it does not
    apply (gaps, duplicates, very long or very uneven trajectories): the caller sorts."""
    first = np.full(n_traj, np.iinfo(np.int64).max)
    last = np.full(n_traj, np.iinfo(np.int64).min)
    np.minimum.at(first, traj, step_index)
    np.maximum.at(last, traj, step_index)
    span = last - first + 1
    width = int(span.max())
    if width > _DENSE_MAX_STEPS or n_traj * width > 4 * traj.size + 1024:
        return None
    if not np.array_equal(span, np.bincount(traj, minlength=n_traj)):
        return None  # gaps or duplicates
    cell = (step_index - first[traj]) * n_traj + traj  # row = position in the trajectory
    if np.bincount(cell, minlength=n_traj * width).max() > 1:
        return None  # duplicates (each trajectory's span equals its size, so there are gaps too)
    grid = np.zeros((width, n_traj))
    grid.reshape(-1)[cell] = reward
    running = np.zeros(n_traj)
    for position in range(width - 1, -1, -1):  # padding past a trajectory's end stays exactly 0
        running = grid[position] + gamma * running
        grid[position] = running
    return grid.reshape(-1)[cell]


def _step_returns(
    traj: np.ndarray,
    n_traj: int,
    step_index: np.ndarray,
    group: np.ndarray,
    reward: np.ndarray,
    gamma: float,
    labels: _RowLabels,
) -> np.ndarray:
    """``G_t`` per row (input order), after checking that no trajectory repeats a
    ``step_index`` or spans two groups (``ValueError`` naming the row, the same row whichever
    path runs: the message comes from one stable sort)."""
    traj_group = np.zeros(n_traj, dtype=np.int64)
    traj_group[traj] = group
    moved_somewhere = bool((traj_group[traj] != group).any())
    dense = None if moved_somewhere else _dense_step_returns(traj, n_traj, step_index, reward, gamma)
    if dense is not None:
        return dense
    # Sort by trajectory, then step_index (stable): the input's order does not matter.
    order = np.lexsort((step_index, traj))
    s_traj, s_step, s_group = traj[order], step_index[order], group[order]
    same_traj = s_traj[1:] == s_traj[:-1]
    dup = np.flatnonzero(same_traj & (s_step[1:] == s_step[:-1]))
    if dup.size:
        raise ValueError(
            f"two steps with the same step_index: {labels[int(order[dup[0] + 1])]} (step_index must be unique per trajectory)"
        )
    moved = np.flatnonzero(same_traj & (s_group[1:] != s_group[:-1]))
    if moved.size:
        raise ValueError(
            f"a trajectory is in two groups: {labels[int(order[moved[0] + 1])]} (each trajectory_id must have one group_id)"
        )
    step_return = np.empty(traj.size)
    step_return[order] = discounted_returns(reward[order], np.append(same_traj, False), gamma)
    return step_return


@dataclass
class GiGPOResult:
    """Per-row arrays (in the input's row order) and a summary of the grouping."""

    advantage: np.ndarray  # A_E + omega * A_S
    episode_advantage: np.ndarray  # A_E of the row's trajectory
    step_advantage: np.ndarray  # A_S (before the omega weight)
    step_return: np.ndarray  # G_t
    episode_reward: np.ndarray  # R of the row's trajectory
    step_group_size: np.ndarray  # how many steps share this row's step group
    summary: dict[str, Any] = field(default_factory=dict)


def _check_parameters(omega: float, gamma: float, mode: str, epsilon: float, baseline: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    if not (isinstance(gamma, (int, float)) and 0.0 <= gamma <= 1.0):
        raise ValueError(f"gamma must be within [0, 1], got {gamma!r}")
    if not (isinstance(omega, (int, float)) and np.isfinite(omega)):
        raise ValueError(f"omega must be a finite number, got {omega!r}")
    if not (isinstance(epsilon, (int, float)) and 0.0 <= epsilon < np.inf):
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")


def _empty_result() -> GiGPOResult:
    z = np.zeros(0)
    return GiGPOResult(z, z, z, z, z, np.zeros(0, dtype=np.int64), summary=_summary_counts())


def _summary_counts(**counts: Any) -> dict[str, Any]:
    keys = (
        "rows",
        "trajectories",
        "groups",
        "singleton_groups",
        "all_equal_groups",
        "step_groups",
        "singleton_step_groups",
        "all_equal_step_groups",
        "rows_in_shared_step_groups",
        "revisits",
    )
    out: dict[str, Any] = {k: int(counts.get(k, 0)) for k in keys}
    out["mean_step_group_size"] = float(counts.get("mean_step_group_size", 0.0))
    out["advantage_mean"] = float(counts.get("advantage_mean", 0.0))
    out["advantage_std"] = float(counts.get("advantage_std", 0.0))
    return out


def compute_gigpo(
    steps: Any,
    *,
    omega: float = 1.0,
    gamma: float = 0.95,
    mode: str = "mean_norm",
    epsilon: float = 1e-6,
    baseline: str = "step",
) -> GiGPOResult:
    """GiGPO advantages and their parts for ``steps`` (see the module doc and
    :func:`gigpo_advantages`). Returns a :class:`GiGPOResult` aligned with the input rows."""
    _check_parameters(omega, gamma, mode, epsilon, baseline)
    table, n = as_columns(steps)
    if n == 0:  # nothing to compute (an empty list of dicts has no columns either)
        return _empty_result()
    missing = [c for c in REQUIRED_COLUMNS if c not in table]
    if missing:
        raise ValueError(f"steps lack the column(s) {', '.join(missing)}; needed: {', '.join(REQUIRED_COLUMNS)}")
    labels = _RowLabels(table, n)
    traj, n_traj = factorize(table["trajectory_id"], "trajectory_id", None)
    group, n_groups = factorize(table["group_id"], "group_id", labels)
    state, n_states = factorize(table["state_key"], "state_key", labels)
    step_index = integer_column(table["step_index"], "step_index", labels)
    reward = finite_floats(table["reward"], "reward", labels)

    # Step returns G_t (the checks of step_index and group_id come with them).
    step_return = _step_returns(traj, n_traj, step_index, group, reward, gamma, labels)

    # Episode return R per trajectory.
    steps_per_traj = np.bincount(traj, minlength=n_traj)
    traj_group = np.zeros(n_traj, dtype=np.int64)
    traj_group[traj] = group
    if "episode_reward" in table:
        per_row = finite_floats(table["episode_reward"], "episode_reward", labels)
        traj_reward: np.ndarray = np.zeros(n_traj)  # float64 in both branches (bincount with weights)
        traj_reward[traj] = per_row
        differs = np.flatnonzero(per_row != traj_reward[traj])
        if differs.size:
            raise ValueError(f"episode_reward differs between the steps of one trajectory: {labels[int(differs[0])]}")
    else:
        traj_reward = np.bincount(traj, weights=reward, minlength=n_traj)

    # A_E: per trajectory, relative to its episode group.
    weights = steps_per_traj if baseline == "step" else None
    ep = group_stats(traj_reward, traj_group, n_groups, weights)
    traj_count = np.bincount(traj_group, minlength=n_groups)
    single = traj_count == 1
    mean = np.where(single, 0.0, ep.mean)
    std = np.where(single, 1.0, ep.std)
    centred = np.where((ep.all_equal & ~single)[traj_group], 0.0, traj_reward - mean[traj_group])
    traj_adv = centred if mode == "mean_norm" else safe_divide(centred, std[traj_group] + epsilon)
    episode_advantage = traj_adv[traj]

    # A_S: per step, relative to its step group (same state key inside the same episode group).
    step_group, n_step_groups = compact_codes(group * n_states + state, n_groups * n_states)
    st = group_stats(step_return, step_group, n_step_groups)
    size = st.size.astype(np.int64)
    zero = (size[step_group] < 2) | st.all_equal[step_group]
    step_centred = np.where(zero, 0.0, step_return - st.mean[step_group])
    step_advantage = step_centred if mode == "mean_norm" else safe_divide(step_centred, st.std[step_group] + epsilon)
    step_advantage = np.where(zero, 0.0, step_advantage)

    advantage = episode_advantage + omega * step_advantage
    # Distinct (trajectory, state key) pairs = distinct (step group, trajectory) pairs, since
    # each trajectory has one group (checked above).
    _, n_pairs = compact_codes(traj * n_states + state, n_traj * n_states)
    summary = _summary_counts(
        rows=n,
        trajectories=n_traj,
        groups=n_groups,
        singleton_groups=int(single.sum()),
        all_equal_groups=int((ep.all_equal & ~single).sum()),
        step_groups=n_step_groups,
        singleton_step_groups=int((size == 1).sum()),
        all_equal_step_groups=int(((size > 1) & st.all_equal).sum()),
        rows_in_shared_step_groups=int((size[step_group] > 1).sum()),
        revisits=n - n_pairs,
        mean_step_group_size=n / n_step_groups,
        advantage_mean=advantage.mean(),
        advantage_std=advantage.std(),
    )
    return GiGPOResult(
        advantage=advantage,
        episode_advantage=episode_advantage,
        step_advantage=step_advantage,
        step_return=step_return,
        episode_reward=traj_reward[traj],
        step_group_size=size[step_group],
        summary=summary,
    )


def gigpo_advantages(
    steps: Any,
    *,
    omega: float = 1.0,
    gamma: float = 0.95,
    mode: str = "mean_norm",
    epsilon: float = 1e-6,
    baseline: str = "step",
) -> np.ndarray:
    """GiGPO advantage ``A_E + omega * A_S`` of every row of ``steps``, in the input's order.

    ``steps``: a pandas DataFrame, pyarrow Table, mapping of columns or list of dicts with
    columns ``group_id``, ``trajectory_id``, ``step_index``, ``state_key``, ``reward`` (the
    step's own reward ``r_t``) and optionally ``episode_reward`` (the trajectory's ``R``, the
    same on all its rows; default: the sum of its ``reward``). Rows may come in any order; they
    are sorted by ``step_index`` inside each trajectory (gaps allowed: the discount counts
    steps, not index differences). ``mode``: ``"mean_norm"`` (divide by 1) or
    ``"mean_std_norm"`` (divide by unbiased std + ``epsilon``). ``baseline``: ``"step"``
    (episode mean/std weighted by steps, the reference implementation) or ``"trajectory"`` (one
    value per trajectory, the paper's Eq. 3).

    Raises ``ValueError`` (naming the trajectory and step) for a missing column, a missing id or
    state key, a NaN or infinite reward, two rows with the same ``step_index`` in a trajectory,
    a trajectory in two groups, or an ``episode_reward`` that changes inside a trajectory.
    """
    return compute_gigpo(steps, omega=omega, gamma=gamma, mode=mode, epsilon=epsilon, baseline=baseline).advantage


__all__: Sequence[str] = (
    "BASELINES",
    "GiGPOResult",
    "MODES",
    "REQUIRED_COLUMNS",
    "as_columns",
    "compute_gigpo",
    "discounted_returns",
    "gigpo_advantages",
)
