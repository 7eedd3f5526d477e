"""KTO rows: ``prompt``, ``completion``, ``label`` (TRL's unpaired-preference format).

One row per rollout: the prompt and completion of :mod:`agent_rl_plugin.data.conversations`,
and a label from :meth:`~agent_rl_plugin.rewards.RewardEngine.binary_labels` over the
combined episode reward. Rows whose label is ``None`` (the ``group`` rule leaves the middle of
each group unlabelled) and rollouts without a reward are left out and reported. Failed
rollouts (error, timeout, cancelled) follow ``failed_rollouts`` (see
:mod:`agent_rl_plugin.data.episodes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.advantages.failed import DEFAULT_FAILED_ROLLOUTS, FailedRollouts
from agent_rl_plugin.data.episodes import Episodes, episode_rows, rollout_examples
from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.sql import open_store

LABEL_METHODS = ("threshold", "quantile", "group")
UNLABELLED = "label None (between the top and bottom of its group, or a group of equal rewards)"
UNLABELLED_FIX = (
    "the group label rule labels only each group's best top_k and worst bottom_k, and no rollout of a group "
    "whose rewards are all equal: record groups with varied rewards, or label by threshold or quantile (--label)"
)
KTO_COLUMNS = ("prompt", "completion", "label")
EXTRA_COLUMNS = ("rollout_id", "group_id", "task_id", "reward")


@dataclass(frozen=True)
class LabelRule:
    """How a combined reward becomes a KTO label.

    * ``threshold``: reward >= ``threshold`` is desirable (True), else undesirable.
    * ``quantile``: reward >= the ``quantile`` of all rewards (of its group when ``per_group``)
      is desirable, else undesirable.
    * ``group``: in each group (group_id, else task_id) the ``top_k`` best are desirable and the
      ``bottom_k`` worst undesirable (at most half the group each); the others, groups of one
      and groups of equal rewards get no label and are left out.
    """

    method: str = "threshold"
    threshold: float = 0.5
    quantile: float = 0.5
    top_k: int = 1
    bottom_k: int = 1
    per_group: bool = False

    def __post_init__(self) -> None:
        method = "group" if self.method == "group_top_bottom" else self.method
        if method not in LABEL_METHODS:
            raise DatasetError(f"label rule must be one of {', '.join(LABEL_METHODS)}, got {self.method!r}")
        object.__setattr__(self, "method", method)

    @classmethod
    def parse(cls, rule: LabelRule | str | Mapping[str, Any] | None) -> LabelRule:
        if rule is None:
            return cls()
        if isinstance(rule, LabelRule):
            return rule
        if isinstance(rule, str):
            return cls(method=rule)
        if isinstance(rule, Mapping):
            return cls(**dict(rule))
        raise DatasetError(f"label_rule must be a LabelRule, a method name or a dict, got {type(rule).__name__}")

    def labels(self, rewards: np.ndarray, group_keys: Sequence[Any] | None) -> list[bool | None]:
        """One label per reward (``None``: unlabelled); ``group_keys`` are needed by ``group``
        and by ``quantile`` with ``per_group``."""
        from agent_rl_plugin.rewards.engine import RewardEngine

        engine = RewardEngine()
        try:
            if self.method == "threshold":
                return engine.binary_labels(rewards, "threshold", threshold=self.threshold)
            if self.method == "quantile":
                groups = group_keys if self.per_group else None
                return engine.binary_labels(rewards, "quantile", quantile=self.quantile, group_ids=groups)
            return engine.binary_labels(
                rewards, "group_top_bottom", top_k=self.top_k, bottom_k=self.bottom_k, group_ids=group_keys
            )
        except ValueError as exc:
            raise DatasetError(f"label rule {self.method}: {exc}") from None

    def describe(self) -> str:
        if self.method == "threshold":
            return f"threshold >= {self.threshold:g}"
        if self.method == "quantile":
            return f"quantile {self.quantile:g}" + (" per group" if self.per_group else "")
        return f"group top {self.top_k} / bottom {self.bottom_k}"


def kto_table(
    connection: Any,
    where: str | None = None,
    sql: str | None = None,
    label_rule: LabelRule | str | Mapping[str, Any] | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    report: BuildReport | None = None,
    extra_columns: bool = True,
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
    *,
    episodes: Episodes | None = None,
) -> pa.Table:
    """The KTO rows as an Arrow table (see :func:`build_kto_dataset`). ``episodes``: rows already
    built by :func:`~agent_rl_plugin.data.episodes.episode_rows` for the same selection, their
    report entries already in ``report`` (:func:`~agent_rl_plugin.data.build.build_tables` shares
    them between kinds); ``where``, ``sql``, ``weights`` and ``failed_rollouts`` are then unused."""
    rule = LabelRule.parse(label_rule)
    report = report if report is not None else BuildReport()
    report.kind = "kto"
    if episodes is None:
        episodes = episode_rows(
            connection, where=where, sql=sql, weights=weights, report=report, failed_rollouts=failed_rollouts
        )
    index = episodes.index
    rewards = index.column("reward").to_numpy().astype(float)
    keys = index.column("group_key").to_pylist() if rule.method == "group" or rule.per_group else None
    labels = pa.array(rule.labels(rewards, keys), pa.bool_())
    labelled = pc.is_valid(labels).to_numpy(zero_copy_only=False)
    if not labelled.all():
        report.leave_out(
            UNLABELLED, rollout_examples(index, ~labelled), count=int((~labelled).sum()), fix=UNLABELLED_FIX
        )
    rows = np.flatnonzero(labelled)
    prompt, completion = episodes.messages(rows)
    picked = index.take(pa.array(rows, pa.int64())) if not labelled.all() else index
    columns = {"prompt": prompt, "completion": completion, "label": labels.take(pa.array(rows, pa.int64()))}
    if extra_columns:
        columns.update({name: picked.column(name) for name in EXTRA_COLUMNS})
    table = pa.table(columns)
    report.rows = table.num_rows
    desirable = pc.sum(table.column("label")).as_py() or 0
    report.labels = {"desirable": int(desirable), "undesirable": int(table.num_rows - desirable)}
    report.extra["label_rule"] = rule.describe()
    if table.num_rows and (desirable == 0 or desirable == table.num_rows):
        which = "desirable" if desirable else "undesirable"
        report.note(
            f"one-class labels: all {table.num_rows} rows are {which} ({rule.describe()}); KTO learns "
            "best from both classes (try --label quantile or another --threshold)"
        )
    if table.num_rows == 0 and report.rollouts:
        raise DatasetError(
            f"none of the {report.rollouts} matching rollouts gave a KTO row: {report.causes()}",
            report.fix_hint("change the label rule or the reward names"),
        )
    return table


def build_kto_dataset(
    db_or_connection: Any,
    where: str | None = None,
    sql: str | None = None,
    label_rule: LabelRule | str | Mapping[str, Any] | None = "threshold",
    weights: Mapping[str, float] | Sequence[str] | None = None,
    *,
    report: BuildReport | None = None,
    extra_columns: bool = True,
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
):
    """KTO rows (``prompt``, ``completion``, ``label``; conversational) as a ``datasets.Dataset``.

    ``db_or_connection``: a store path or an open DuckDB connection. ``where``: SQL over the
    ``rollouts`` view; ``sql``: a query returning ``rollout_id`` (give one or neither).
    ``label_rule``: a :class:`LabelRule`, or ``"threshold"`` / ``"quantile"`` / ``"group"``.
    ``weights``: ``{reward name: weight}`` or a list of names (weight 1); default every episode
    reward with weight 1. ``extra_columns`` adds rollout_id, group_id, task_id and reward.
    ``report`` (a :class:`BuildReport`) is filled with counts and what was left out.
    ``failed_rollouts``: ``exclude`` (default), ``zero_reward`` or ``keep`` rollouts that ended
    in error, timeout or cancellation (:mod:`agent_rl_plugin.advantages.failed`).
    """
    from agent_rl_plugin.data.output import as_dataset

    with open_store(db_or_connection) as connection:
        table = kto_table(connection, where, sql, label_rule, weights, report, extra_columns, failed_rollouts)
    return as_dataset(table)


__all__ = ["LabelRule", "build_kto_dataset", "kto_table", "LABEL_METHODS"]
