"""GRPO groups: one row per group with ``prompt``, ``completions``, ``rewards``, ``advantages``.

A group is the rollouts sharing a ``group_id`` (else a ``task_id``); the row holds the shared
prompt (the first rollout's; groups whose rollouts saw different prompts are reported), every
rollout's completion (oldest first), their combined rewards and their GRPO advantages from
:func:`agent_rl_plugin.rl.grpo_advantages` (TRL's ``scale_rewards`` meaning).

Rules: groups smaller than ``min_group_size`` (default 2: a group of one has nothing to be
compared with, and TRL's GRPO needs several completions per prompt) are dropped and reported;
groups whose rewards are all equal keep advantages of exactly 0 and are reported. Failed
rollouts (error, timeout, cancelled) follow ``failed_rollouts`` before groups are formed (see
:mod:`agent_rl_plugin.data.episodes`): excluded ones shrink their group.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.advantages.failed import DEFAULT_FAILED_ROLLOUTS, FailedRollouts
from agent_rl_plugin.data.episodes import Episodes, episode_rows, rollout_examples
from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.split import prompt_keys
from agent_rl_plugin.data.sql import arrow, open_store, registered

SMALL_GROUP = "in a group smaller than min_group_size"
SMALL_GROUP_FIX = (
    "record at least {n} rollouts per task under one group_id (arl.rollout(group_id=...), or "
    "agent-rl rollouts run --group-size 4), or lower min_group_size (--min-group-size)"
)
GRPO_COLUMNS = ("prompt", "completions", "rewards", "advantages")
EXTRA_COLUMNS = ("group_id", "task_id", "rollout_ids")


class _Labels:
    """Rollout ids for error messages, read from an Arrow column only when one is needed."""

    def __init__(self, ids: pa.ChunkedArray | pa.Array) -> None:
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, row: int) -> Any:
        return self._ids[row].as_py()


def _advantages(
    rewards: np.ndarray, group_keys: pa.ChunkedArray | pa.Array, rollout_ids: pa.ChunkedArray | pa.Array, scale: str
) -> np.ndarray:
    """GRPO advantages; the Arrow columns go to the estimator as they are (its Arrow fast path
    hashes the group keys in C++: no Python list of 100k ids)."""
    from agent_rl_plugin.rl import grpo_advantages

    try:
        return np.asarray(
            grpo_advantages(rewards, group_keys, scale=scale, rollout_ids=_Labels(rollout_ids)),  # type: ignore[arg-type]  # a lazy RowLabels
            dtype=float,
        )
    except ValueError as exc:
        raise DatasetError(f"GRPO advantages: {exc}") from None


def _group(connection: Any, episodes: Episodes, kept: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """One row per group (groups in order of their first rollout, rollouts oldest first), with
    per-group flags (mixed prompts, all-equal rewards). Only ids and numbers go through DuckDB;
    the messages are taken once, in group order."""
    small = kept.select(["group_key", "ordinal", "reward"]).append_column(
        "row", pa.array(np.arange(kept.num_rows), pa.int64())
    )
    with registered(connection, small, "grpo") as k:
        groups = arrow(
            connection,
            f"""
            SELECT group_key, count(*) AS n, min(ordinal) AS first_ordinal, min(reward) = max(reward) AS all_equal
            FROM {k} GROUP BY group_key ORDER BY first_ordinal
            """,
        )
        order = arrow(
            connection,
            f"""
            SELECT k.row FROM {k} k
            JOIN (SELECT group_key, min(ordinal) AS first_ordinal FROM {k} GROUP BY group_key) g
              ON g.group_key = k.group_key
            ORDER BY g.first_ordinal, k.ordinal
            """,
        ).column("row")
    rows = kept.take(order)
    prompts, completions = episodes.messages(rows.column("ordinal").to_numpy())
    sizes = groups.column("n").to_numpy()
    offsets_np = np.concatenate(([0], np.cumsum(sizes)))
    offsets = pa.array(offsets_np, pa.int32())
    firsts = offsets_np[:-1]
    keys = prompt_keys(prompts)
    member_group = np.repeat(np.arange(len(sizes)), sizes)
    differs = ~pc.equal(keys, keys.take(pa.array(firsts[member_group]))).to_numpy(zero_copy_only=False)
    mixed = np.bincount(member_group[differs], minlength=len(sizes)) > 0

    def nested(values: Any) -> pa.Array:
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        return pa.ListArray.from_arrays(offsets, values)

    table = pa.table(
        {
            "prompt": prompts.take(pa.array(firsts)),
            "completions": nested(completions),
            "rewards": nested(rows.column("reward")),
            "advantages": nested(rows.column("advantage")),
            "group_id": groups.column("group_key"),
            "task_id": rows.column("task_id").take(pa.array(firsts)),
            "rollout_ids": nested(rows.column("rollout_id")),
        }
    )
    return table, mixed, groups.column("all_equal").to_numpy(zero_copy_only=False)


def grpo_table(
    connection: Any,
    where: str | None = None,
    sql: str | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    report: BuildReport | None = None,
    min_group_size: int = 2,
    scale: str = "group",
    extra_columns: bool = True,
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
    *,
    episodes: Episodes | None = None,
) -> pa.Table:
    """The GRPO group rows as an Arrow table (see :func:`build_grpo_dataset`). ``episodes``: rows already
    built by :func:`~agent_rl_plugin.data.episodes.episode_rows` for the same selection, their
    report entries already in ``report`` (:func:`~agent_rl_plugin.data.build.build_tables` shares
    them between kinds); ``where``, ``sql``, ``weights`` and ``failed_rollouts`` are then unused."""
    if min_group_size < 1:
        raise DatasetError(f"min_group_size must be >= 1, got {min_group_size}")
    report = report if report is not None else BuildReport()
    report.kind = "grpo"
    if episodes is None:
        episodes = episode_rows(
            connection, where=where, sql=sql, weights=weights, report=report, failed_rollouts=failed_rollouts
        )
    index = episodes.index.append_column("ordinal", pa.array(np.arange(episodes.index.num_rows), pa.int64()))
    keys = index.column("group_key")
    counts = pc.value_counts(keys)
    small = counts.filter(pc.less(counts.field("counts"), min_group_size)).field("values")
    in_small = pc.is_in(keys, value_set=small).to_numpy(zero_copy_only=False)
    if in_small.any():
        report.leave_out(
            f"{SMALL_GROUP} ({min_group_size})",
            rollout_examples(index, in_small),
            count=int(in_small.sum()),
            fix=SMALL_GROUP_FIX.format(n=min_group_size),
        )
        report.extra["dropped_groups"] = len(small)
    kept = index.filter(pa.array(~in_small)) if in_small.any() else index
    advantages = _advantages(
        kept.column("reward").to_numpy().astype(float),
        kept.column("group_key"),
        kept.column("rollout_id"),
        scale,
    )
    kept = kept.append_column("advantage", pa.array(advantages, pa.float64()))
    table, mixed_groups, equal_groups = _group(connection, episodes, kept)
    n_groups = table.num_rows
    mixed = int(mixed_groups.sum())
    equal = int(equal_groups.sum())
    if mixed:
        report.note(f"{mixed} group(s) mix rollouts with different prompts: the first rollout's prompt is used")
    if equal:
        report.note(f"{equal} group(s) have all-equal rewards: their advantages are 0 (no learning signal)")
    report.extra["zero_advantage_groups"] = int(equal)
    report.groups = n_groups
    report.mean_group_size = round(kept.num_rows / n_groups, 3) if n_groups else 0.0
    report.rows = n_groups
    if n_groups == 0 and report.rollouts:
        raise DatasetError(
            f"none of the {report.rollouts} matching rollouts formed a GRPO group: {report.causes()}",
            report.fix_hint(SMALL_GROUP_FIX.format(n=min_group_size)),
        )
    columns = list(GRPO_COLUMNS) + (list(EXTRA_COLUMNS) if extra_columns else [])
    return table.select(columns)


def build_grpo_dataset(
    db_or_connection: Any,
    where: str | None = None,
    sql: str | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    *,
    min_group_size: int = 2,
    scale: str = "group",
    report: BuildReport | None = None,
    extra_columns: bool = True,
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
):
    """GRPO groups (``prompt``, ``completions``, ``rewards``, ``advantages``) as a
    ``datasets.Dataset``, one row per group (group_id, else task_id).

    ``scale`` is passed to :func:`agent_rl_plugin.rl.grpo_advantages` (``group``, ``batch`` or
    ``none``). ``extra_columns`` adds group_id, task_id and rollout_ids. For TRL's
    ``GRPOTrainer`` (which generates its own completions) take the prompts:
    ``ds.select_columns(["prompt"])``. Other arguments (``failed_rollouts`` among them) as
    :func:`build_kto_dataset`.
    """
    from agent_rl_plugin.data.output import as_dataset

    with open_store(db_or_connection) as connection:
        table = grpo_table(
            connection, where, sql, weights, report, min_group_size, scale, extra_columns, failed_rollouts
        )
    return as_dataset(table)


__all__ = ["build_grpo_dataset", "grpo_table"]
