"""One row per rollout: its prompt, completion and combined episode reward (what KTO rows and
GRPO groups are made of), built in DuckDB and returned as Arrow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.data.conversations import conversations
from agent_rl_plugin.data.report import BuildReport
from agent_rl_plugin.data.sql import arrow, combined_rewards, normalize_weights, registered, select_rollouts

NO_REWARD = "no usable episode reward (none recorded, only error rows, or weights summing to 0)"
IO_NOTE = (
    "{n} rollout(s) had no LLM messages: prompt from the agent's input, completion from its output"
)
REPAIR_NOTE = (
    "{n} rollout(s) did not send their own earlier turns back to the model: those assistant "
    "messages were restored from the earlier LLM calls' outputs"
)


@dataclass
class Episodes:
    """The result of :func:`episode_rows`: ``table`` has columns rollout_id, task_id, group_id,
    group_key (group_id, else task_id, else rollout_id), prompt, completion, source and reward."""

    table: pa.Table


def _report_conversations(conv: pa.Table, report: BuildReport) -> pa.Table:
    """Count the dropped conversations by reason; return the kept ones."""
    reasons = conv.column("drop_reason")
    dropped = conv.filter(pc.is_valid(reasons))
    for reason in pc.unique(dropped.column("drop_reason")).to_pylist():
        these = dropped.filter(pc.equal(dropped.column("drop_reason"), reason))
        report.leave_out(reason, these.column("rollout_id").slice(0, 3).to_pylist(), count=these.num_rows)
    kept = conv.filter(pc.is_null(reasons))
    sources = kept.column("source")
    n_io = pc.sum(pc.equal(sources, "io")).as_py() or 0
    n_repaired = pc.sum(pc.equal(sources, "repaired")).as_py() or 0
    if n_io:
        report.note(IO_NOTE.format(n=n_io))
    if n_repaired:
        report.note(REPAIR_NOTE.format(n=n_repaired))
    return kept


def episode_rows(
    connection: duckdb.DuckDBPyConnection,
    where: str | None = None,
    sql: str | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    report: BuildReport | None = None,
) -> Episodes:
    """Select the rollouts, build their conversations and combined rewards, and join them.

    Rollouts without a conversation or without a usable reward are left out and counted in
    ``report``. Rows come oldest first.
    """
    report = report if report is not None else BuildReport()
    selected = select_rollouts(connection, where=where, sql=sql)
    report.rollouts = selected.num_rows
    weight_map = normalize_weights(weights)
    with registered(connection, selected, "selected") as sel:
        conv = _report_conversations(conversations(connection, sel), report)
        rewards = combined_rewards(connection, sel, weight_map, report)
        with registered(connection, conv, "conv") as c, registered(connection, rewards, "rewards") as r:
            missing = arrow(
                connection,
                f"SELECT c.rollout_id FROM {c} c ANTI JOIN {r} r ON r.rollout_id = c.rollout_id",
            )
            report.leave_out(NO_REWARD, missing.column("rollout_id").slice(0, 3).to_pylist(), count=missing.num_rows)
            table = arrow(
                connection,
                f"""
                SELECT s.rollout_id, s.task_id, s.group_id,
                       coalesce(s.group_id, s.task_id, s.rollout_id) AS group_key,
                       c.prompt, c.completion, c.source, r.reward
                FROM {sel} s
                JOIN {c} c ON c.rollout_id = s.rollout_id
                JOIN {r} r ON r.rollout_id = s.rollout_id
                ORDER BY s.start_time, s.rollout_id
                """,
            )
    return Episodes(table)


def messages_type(table: pa.Table, column: str = "prompt") -> pa.DataType:
    """The Arrow type of one message list column (for building empty or derived columns)."""
    return table.schema.field(column).type


def drop_columns(table: pa.Table, names: Sequence[str]) -> pa.Table:
    return table.drop_columns([n for n in names if n in table.column_names])


__all__ = ["Episodes", "episode_rows", "NO_REWARD"]
