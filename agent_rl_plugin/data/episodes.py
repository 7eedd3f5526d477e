"""One row per rollout: its prompt, completion and combined episode reward (what KTO rows and
GRPO groups are made of). The selection, rewards and joins run in DuckDB on ids and numbers;
the messages stay in Arrow and are copied once, when a builder asks for them.

Rollouts that did not end ``ok`` (error, timeout, cancelled) follow ``failed_rollouts``
(:mod:`agent_rl_plugin.advantages.failed`): ``exclude`` (default) leaves them out (counted under
:data:`FAILED`), ``zero_reward`` gives them the combined reward 0, ``keep`` their own. The
report's ``failed_rollouts`` entry says how many rollouts the policy touched."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.advantages.failed import DEFAULT_FAILED_ROLLOUTS, FailedRollouts, check_failed_rollouts
from agent_rl_plugin.data.conversations import (
    NO_ASSISTANT,
    NO_CONTENT,
    STARTS_WITH_ASSISTANT,
    Conversations,
    conversations,
)
from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.sql import (
    ROOTS_SQL,
    arrow,
    combined_rewards,
    normalize_weights,
    registered,
    select_rollouts,
)

NO_REWARD = "no usable episode reward (none recorded, only error rows, or weights summing to 0)"
FAILED = "failed rollout (error, timeout or cancelled; failed_rollouts=exclude)"
#: The fix of each reason a rollout is left out (see :meth:`BuildReport.fix_hint`).
NO_REWARD_FIX = "score the rollouts first (agent-rl score), or emit rewards while recording (arl.emit_reward)"
FAILED_FIX = "keep failed rollouts with failed_rollouts='zero_reward' or 'keep' (--failed-rollouts)"
CONVERSATION_FIXES = {
    NO_ASSISTANT: "record each LLM call's answer (output= of arl.record_llm_call, with content capture on)",
    STARTS_WITH_ASSISTANT: "record the messages each LLM call was sent (input_messages= of arl.record_llm_call)",
    NO_CONTENT: "record the agent's LLM calls (an instrumented client, or arl.record_llm_call) with content capture on",
}
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
    _last: tuple[np.ndarray, tuple[pa.Array, pa.Array]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def messages(self, rows: np.ndarray | None = None) -> tuple[pa.Array, pa.Array]:
        """(prompt, completion) for the ``index`` rows ``rows`` (default: all), in that order.
        The last answer is kept: asked again for the same rows (KTO and GRPO built together
        when every group is kept and groups are contiguous), it is returned without a copy
        (Arrow arrays are immutable)."""
        conv_rows = self.index.column("conv_row").to_numpy()
        wanted = conv_rows if rows is None else conv_rows[np.asarray(rows, dtype=np.int64)]
        if self._last is not None and np.array_equal(self._last[0], wanted):
            return self._last[1]
        result = self.conversations.messages(wanted)
        self._last = (wanted, result)
        return result


def _report_conversations(conv: Conversations, report: BuildReport) -> np.ndarray:
    """Count the dropped conversations by reason; return the mask of the kept ones."""
    kept = conv.k > 0
    if not kept.all():
        ids = conv.rollout_ids.to_numpy(zero_copy_only=False)
        for reason in sorted({r for r in conv.drop_reason[~kept] if r is not None}):
            these = np.flatnonzero(conv.drop_reason == reason)
            report.leave_out(reason, ids[these[:3]].tolist(), count=len(these), fix=CONVERSATION_FIXES.get(reason))
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
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
) -> Episodes:
    """Select the rollouts, build their conversations and combined rewards, and join them.

    Failed rollouts follow ``failed_rollouts`` (see the module docstring); rollouts without a
    conversation or without a usable reward are left out and counted in ``report``
    (``report.rollouts`` counts every matching rollout, failed ones included).
    """
    from agent_rl_plugin.rl.failed import split_failed

    try:
        policy = check_failed_rollouts(failed_rollouts)
    except ValueError as exc:
        raise DatasetError(str(exc), getattr(exc, "hint", None)) from None
    report = report if report is not None else BuildReport()
    weight_map = normalize_weights(weights)
    if where or sql:
        selected = select_rollouts(connection, where=where, sql=sql)
        report.rollouts = selected.num_rows
        selected, failed_ids, failed = split_failed(connection, selected, policy)
    else:  # every rollout: the outcomes come with the roots (one query)
        selected, failed_ids, failed = _every_rollout(connection, policy)
        report.rollouts = selected.num_rows + (len(failed_ids) if policy == "exclude" else 0)
    report.extra["failed_rollouts"] = failed
    if policy == "exclude":
        report.leave_out(FAILED, failed_ids, count=len(failed_ids), fix=FAILED_FIX)
    everything = not where and not sql and not (policy == "exclude" and failed_ids)
    with registered(connection, selected, "selected") as sel:
        conv = conversations(connection, sel, everything=everything)
        kept = _report_conversations(conv, report)
        rewards = combined_rewards(connection, sel, weight_map, report)
        if policy == "zero_reward" and failed_ids:
            rewards = _zero_rewards(rewards, failed_ids)
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
            report.leave_out(
                NO_REWARD,
                missing.column("rollout_id").slice(0, 3).to_pylist(),
                count=missing.num_rows,
                fix=NO_REWARD_FIX,
            )
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


def _every_rollout(
    connection: duckdb.DuckDBPyConnection, policy: FailedRollouts
) -> tuple[pa.Table, list[str], dict[str, object]]:
    """``select_rollouts(connection)`` followed by ``split_failed(connection, selected,
    policy)`` in one query: each root's outcome (:data:`~agent_rl_plugin.rl.failed.OUTCOME_SQL`)
    is read with the root itself. Same ``(kept, failed_ids, report)``."""
    from agent_rl_plugin.advantages.failed import failed_report
    from agent_rl_plugin.rl.failed import OUTCOME_SQL, split_failed

    # split_failed matches rollouts by id: a root without one is never failed there
    outcome = f"CASE WHEN rollout_id IS NULL THEN 'ok' ELSE {OUTCOME_SQL} END"
    query = ROOTS_SQL.replace(" FROM spans", f", {outcome} AS outcome FROM spans", 1)  # the roots, as select_rollouts
    try:
        table = arrow(connection, f"{query} ORDER BY start_time, rollout_id")
    except duckdb.Error:
        table = None
    if table is None or table.num_rows == 0:  # the two steps, which say what is wrong (e.g. an empty store)
        return split_failed(connection, select_rollouts(connection), policy)
    bad = pc.not_equal(table.column("outcome"), "ok")
    failed_rows = table.filter(bad)
    ids = failed_rows.column("rollout_id").to_pylist()
    report = failed_report(policy, ids, failed_rows.column("outcome").to_pylist())
    selected = table.drop_columns(["outcome"])
    if policy == "exclude" and ids:
        selected = selected.filter(pc.invert(bad))
    return selected, ids, report


def _zero_rewards(rewards: pa.Table, failed_ids: list[str]) -> pa.Table:
    """``rewards`` with the reward of every rollout in ``failed_ids`` set to 0 (added when absent)."""
    ids = rewards.column("rollout_id")
    failed = pa.array(failed_ids, ids.type)
    others = rewards.filter(pc.invert(pc.is_in(ids, value_set=failed)))
    zeros = pa.table(
        {
            "rollout_id": failed,
            "reward": pa.array(np.zeros(len(failed_ids)), rewards.schema.field("reward").type),
            "n_rewards": pa.array(np.zeros(len(failed_ids), dtype=np.int64), rewards.schema.field("n_rewards").type),
        }
    )
    return pa.concat_tables([others, zeros.cast(rewards.schema)])


def rollout_examples(index: pa.Table, mask: np.ndarray, n: int = 3) -> list[str]:
    """Up to ``n`` rollout ids of the rows of ``index`` selected by ``mask``."""
    rows = np.flatnonzero(mask)[:n]
    return index.column("rollout_id").take(pa.array(rows, pa.int64())).to_pylist() if rows.size else []


__all__ = ["Episodes", "episode_rows", "rollout_examples", "FAILED", "NO_REWARD"]
