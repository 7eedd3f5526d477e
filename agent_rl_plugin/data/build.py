"""One entry point for the three kinds of dataset, with the text form and the size summary
(what ``agent-rl dataset build`` runs)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pyarrow as pa

from agent_rl_plugin.data.grpo import grpo_table
from agent_rl_plugin.data.kto import LabelRule, kto_table
from agent_rl_plugin.data.output import count_tokens, to_text
from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.sql import open_store
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
) -> pa.Table:
    """Build a ``kind`` (kto, grpo, steps) dataset as an Arrow table, in ``fmt``
    (``conversational`` message lists, or ``text``), filling ``report`` including the token
    count (the tokenizer's when given, else characters / 4)."""
    if kind not in KINDS:
        raise DatasetError(f"dataset kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if fmt not in FORMATS:
        raise DatasetError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    report = report if report is not None else BuildReport()
    with open_store(db_or_connection) as connection:
        if kind == "kto":
            table = kto_table(connection, where, sql, label_rule, weights, report, extra_columns)
        elif kind == "grpo":
            table = grpo_table(connection, where, sql, weights, report, min_group_size, scale, extra_columns)
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
    if fmt == "text":
        table = to_text(table, tokenizer)
    report.tokens, report.tokens_method = count_tokens(table, tokenizer)
    report.extra["format"] = fmt
    return table


def build_dataset(kind: str, db_or_connection: Any, **options: Any):
    """:func:`build_table` wrapped in a ``datasets.Dataset``."""
    from agent_rl_plugin.data.output import as_dataset

    return as_dataset(build_table(kind, db_or_connection, **options))


__all__ = ["FORMATS", "KINDS", "build_dataset", "build_table"]
