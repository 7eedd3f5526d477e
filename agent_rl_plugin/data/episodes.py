"""One row per rollout: its prompt, completion and combined episode reward (what KTO rows and
GRPO groups are made of). The selection, rewards and joins run in DuckDB on ids and numbers;
the messages stay in Arrow and are copied once, when a builder asks for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from agent_rl_plugin.data.conversations import Conversations, conversations
from agent_rl_plugin.data.report import BuildReport
from agent_rl_plugin.data.sql import arrow, combined_rewards, normalize_weights, registered, select_rollouts

NO_REWARD = "no usable episode reward (none recorded, only error rows, or weights summing to 0)"
IO_NOTE = "{n} rollout(s) had no LLM messages: prompt from the agent's input, completion from its output"
REPAIR_NOTE = (
    "{n} rollout(s) did not send their own earlier turns back to the model: those assistant "
    "messages were restored from the earlier LLM calls' outputs"
)


@dataclass
class Episodes:
    """``index``: one row per usable rollout, oldest first, with rollout_id, task_id, group_id,
    group_key (group_id, else task_id, else rollout_id), reward, source and ``conv_row`` (its
    row in ``conversations``). :meth:`messages` gives the prompt and completion columns."""

    index: pa.Table
    conversations: Conversations

    def messages(self, rows: np.ndarray | None = None) -> tuple[pa.Array, pa.Array]:
        """(prompt, completion) for the ``index`` rows ``rows`` (default: all), in that order."""
        conv_rows = self.index.column("conv_row").to_numpy()
        return self.conversations.messages(conv_rows if rows is None else conv_rows[np.asarray(rows, dtype=np.int64)])


def _report_conversations(conv: Conversations, report: BuildReport) -> np.ndarray:
    """Count the dropped conversations by reason; return the mask of the kept ones."""
    kept = conv.k > 0
    if not kept.all():
        ids = conv.rollout_ids.to_numpy(zero_copy_only=False)
        for reason in sorted({r for r in conv.drop_reason[~kept] if r is not None}):
            these = np.flatnonzero(conv.drop_reason == reason)
            report.leave_out(reason, ids[these[:3]].tolist(), count=len(these))
    for source, note in (("io", IO_NOTE), ("repaired", REPAIR_NOTE)):
        n = int(np.count_nonzero(conv.source[kept] == source))
        if n:
            report.note(note.format(n=n))
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
    ``report``.
    """
    report = report if report is not None else BuildReport()
    selected = select_rollouts(connection, where=where, sql=sql)
    report.rollouts = selected.num_rows
    weight_map = normalize_weights(weights)
    with registered(connection, selected, "selected") as sel:
        conv = conversations(connection, sel, everything=not where and not sql)
        kept = _report_conversations(conv, report)
        rewards = combined_rewards(connection, sel, weight_map, report)
        ids = pa.table(
            {
                "rollout_id": conv.rollout_ids,
                "conv_row": pa.array(np.arange(len(kept)), pa.int64()),
                "source": pa.array(conv.source.tolist(), pa.string()),
            }
        ).filter(pa.array(kept))
        with registered(connection, ids, "conv") as c, registered(connection, rewards, "rewards") as r:
            missing = arrow(
                connection, f"SELECT c.rollout_id FROM {c} c ANTI JOIN {r} r ON r.rollout_id = c.rollout_id"
            )
            report.leave_out(NO_REWARD, missing.column("rollout_id").slice(0, 3).to_pylist(), count=missing.num_rows)
            index = arrow(
                connection,
                f"""
                SELECT s.rollout_id, s.task_id, s.group_id,
                       coalesce(s.group_id, s.task_id, s.rollout_id) AS group_key,
                       r.reward, c.source, c.conv_row
                FROM {sel} s
                JOIN {c} c ON c.rollout_id = s.rollout_id
                JOIN {r} r ON r.rollout_id = s.rollout_id
                ORDER BY s.start_time, s.rollout_id
                """,
            )
    return Episodes(index, conv)


def rollout_examples(index: pa.Table, mask: np.ndarray, n: int = 3) -> list[str]:
    """Up to ``n`` rollout ids of the rows of ``index`` selected by ``mask``."""
    rows = np.flatnonzero(mask)[:n]
    return index.column("rollout_id").take(pa.array(rows, pa.int64())).to_pylist() if rows.size else []


__all__ = ["Episodes", "episode_rows", "rollout_examples", "NO_REWARD"]
