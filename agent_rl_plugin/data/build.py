"""One entry point for the three kinds of dataset, with the text form and the size summary
(what ``agent-rl dataset build`` runs).

``failed_rollouts`` (:data:`~agent_rl_plugin.advantages.failed.FailedRollouts`) applies to kto
and grpo. The steps dataset takes its advantages from GiGPO, which excludes failed rollouts
(the default); for another policy compute the advantages with it (``agent-rl advantages
compute --method gigpo --failed-rollouts ...``) and build with ``from_table``."""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import pyarrow as pa

from agent_rl_plugin.advantages.failed import DEFAULT_FAILED_ROLLOUTS, FailedRollouts, check_failed_rollouts
from agent_rl_plugin.data.episodes import episode_rows
from agent_rl_plugin.data.grpo import grpo_table
from agent_rl_plugin.data.kto import LabelRule, kto_table
from agent_rl_plugin.data.output import count_tokens, to_text
from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.sql import open_store, select_rollouts
from agent_rl_plugin.data.steps import step_table

KINDS = ("kto", "grpo", "steps")
FORMATS = ("conversational", "text")


def build_table(
    kind: str,
    db_or_connection: Any,
    *,
    where: str | None = None,
    sql: str | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    label_rule: LabelRule | str | Mapping[str, Any] | None = None,
    min_group_size: int = 2,
    scale: str = "group",
    from_table: bool = False,
    run_id: str | None = None,
    gigpo: Mapping[str, Any] | None = None,
    fmt: str = "conversational",
    tokenizer: Any = None,
    extra_columns: bool = True,
    report: BuildReport | None = None,
    failed_rollouts: FailedRollouts | None = None,
) -> pa.Table:
    """Build a ``kind`` (kto, grpo, steps) dataset as an Arrow table, in ``fmt``
    (``conversational`` message lists, or ``text``), filling ``report`` including the token
    count (the tokenizer's when given, else characters / 4). ``failed_rollouts``: see the
    module docstring (``None``: the default, ``exclude``)."""
    if kind not in KINDS:
        raise DatasetError(f"dataset kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if fmt not in FORMATS:
        raise DatasetError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    report = report if report is not None else BuildReport()
    policy = _policy(kind, failed_rollouts, from_table or run_id is not None)
    with open_store(db_or_connection) as connection:
        if kind == "kto":
            table = kto_table(connection, where, sql, label_rule, weights, report, extra_columns, policy)
        elif kind == "grpo":
            table = grpo_table(connection, where, sql, weights, report, min_group_size, scale, extra_columns, policy)
        else:
            table = step_table(
                connection,
                where,
                sql,
                weights,
                report,
                from_table=from_table,
                run_id=run_id,
                gigpo=gigpo,
                extra_columns=extra_columns,
            )
            if not (from_table or run_id is not None):  # GiGPO excluded the failed rollouts: say how many
                report.extra["failed_rollouts"] = _steps_failed(connection, where, sql, policy)
    if fmt == "text":
        table = to_text(table, tokenizer)
    report.tokens, report.tokens_method = count_tokens(table, tokenizer)
    report.extra["format"] = fmt
    return table


def _policy(kind: str, failed_rollouts: FailedRollouts | None, from_table: bool) -> FailedRollouts:
    """The checked policy; for steps only the default (the advantages decide, see above)."""
    try:
        policy = check_failed_rollouts(failed_rollouts)
    except ValueError as exc:
        raise DatasetError(str(exc), getattr(exc, "hint", None)) from None
    if kind == "steps" and failed_rollouts is not None and policy != DEFAULT_FAILED_ROLLOUTS:
        hint = (
            "the advantages run you read decides (compute it with that policy)"
            if from_table
            else f"agent-rl advantages compute --method gigpo --failed-rollouts {policy}, then build with --from-table"
        )
        raise DatasetError(f"failed_rollouts={policy!r} is not applied by the steps dataset itself", hint)
    return policy


def _steps_failed(connection: Any, where: str | None, sql: str | None, policy: FailedRollouts) -> dict[str, Any]:
    """The failed-rollout report of the steps dataset's selection (its advantages left them out)."""
    from agent_rl_plugin.rl.failed import split_failed

    return split_failed(connection, select_rollouts(connection, where=where, sql=sql), policy)[2]


SHARED_KINDS = ("kto", "grpo")


def build_tables(
    db_or_connection: Any,
    kinds: Sequence[str] = SHARED_KINDS,
    *,
    where: str | None = None,
    sql: str | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    label_rule: LabelRule | str | Mapping[str, Any] | None = None,
    min_group_size: int = 2,
    scale: str = "group",
    extra_columns: bool = True,
    failed_rollouts: FailedRollouts | None = None,
    reports: Mapping[str, BuildReport] | None = None,
) -> dict[str, pa.Table]:
    """Several conversational datasets of the same selection from one pass over the store:
    ``{kind: table}`` for ``kinds`` (``kto`` and/or ``grpo``), equal to what
    :func:`build_table` gives for each kind with the same options, but the episode rows
    (selection, conversations, combined rewards: most of the work) are built once and shared.
    ``reports``: ``{kind: BuildReport}`` to fill (each gets the episode-level entries and its
    own). Raises :class:`DatasetError` for an unknown or repeated kind (``steps`` has its own
    pipeline: use :func:`build_table`)."""
    wanted = list(kinds)
    unknown = [k for k in wanted if k not in SHARED_KINDS]
    if unknown or not wanted or len(set(wanted)) != len(wanted):
        raise DatasetError(
            f"kinds must be distinct names among {', '.join(SHARED_KINDS)}, got {wanted!r}",
            "build steps datasets with build_table('steps', ...)" if "steps" in unknown else None,
        )
    policy = _policy(wanted[0], failed_rollouts, False)
    shared = BuildReport()
    out: dict[str, pa.Table] = {}
    with open_store(db_or_connection) as connection:
        episodes = episode_rows(
            connection, where=where, sql=sql, weights=weights, report=shared, failed_rollouts=policy
        )
        for kind in wanted:
            report = reports[kind] if reports is not None and kind in reports else BuildReport()
            for name, value in vars(copy.deepcopy(shared)).items():
                setattr(report, name, value)
            if kind == "kto":
                out[kind] = kto_table(
                    connection, label_rule=label_rule, report=report, extra_columns=extra_columns, episodes=episodes
                )
            else:
                out[kind] = grpo_table(
                    connection,
                    report=report,
                    min_group_size=min_group_size,
                    scale=scale,
                    extra_columns=extra_columns,
                    episodes=episodes,
                )
    return out


def build_datasets(db_or_connection: Any, kinds: Sequence[str] = SHARED_KINDS, **options: Any) -> dict[str, Any]:
    """:func:`build_tables` with each table wrapped in a ``datasets.Dataset``."""
    from agent_rl_plugin.data.output import as_dataset

    return {kind: as_dataset(table) for kind, table in build_tables(db_or_connection, kinds, **options).items()}


def build_dataset(kind: str, db_or_connection: Any, **options: Any):
    """:func:`build_table` wrapped in a ``datasets.Dataset``."""
    from agent_rl_plugin.data.output import as_dataset

    return as_dataset(build_table(kind, db_or_connection, **options))


__all__ = ["FORMATS", "KINDS", "SHARED_KINDS", "build_dataset", "build_datasets", "build_table", "build_tables"]
