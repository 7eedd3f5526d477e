"""The fixes the advantage and dataset builders give when a selection yields nothing, one per
cause, and the check that tells an empty store from a filter that matched nothing.

Contract: a hint names the cause it fixes. An empty store is never blamed on the filter
(:func:`nothing_selected` counts the stored rollouts first); rollouts without rewards get
:data:`SCORE_HINT`, rollouts without LLM steps (GiGPO) :data:`LLM_STEPS_HINT`.
``tests/test_hints.py`` plants each cause and checks the hint.
"""

from __future__ import annotations

import duckdb

#: The fix when the store holds no rollout at all (nothing to filter).
RECORD_HINT = (
    "record rollouts first: run your agent inside `with arl.rollout(...)` after arl.configure(db=...), "
    "or `agent-rl rollouts run MODULE:FUNC --tasks FILE`, or try `agent-rl demo`"
)
#: The fix when a filter matched none of the stored rollouts.
FILTER_HINT = (
    'the filter matched nothing: compare it with what is stored, e.g. agent-rl query "select rollout_id, '
    'task_id, group_id, status from rollouts"'
)
#: The fix when selected rollouts have no usable reward.
SCORE_HINT = "score them first (agent-rl score), or emit rewards while recording (arl.emit_reward)"
#: The fix when selected rollouts have no LLM step (GiGPO's actions).
LLM_STEPS_HINT = (
    "GiGPO's actions are LLM calls: record them (an instrumented client, or arl.record_llm_call), "
    "or use an episode-level method (grpo, rloo, dr_grpo) for rollouts without LLM calls"
)


def stored_rollouts(connection: duckdb.DuckDBPyConnection) -> int:
    """How many rollouts the store holds, whatever the filters (the ``rollouts`` view's roots)."""
    sql = "SELECT count(DISTINCT rollout_id) AS n FROM spans WHERE is_rollout_root"
    return int(connection.sql(sql).fetchall()[0][0])  # fetchall: leaves no open result


def nothing_selected(
    connection: duckdb.DuckDBPyConnection, selection: str | None, lead: str = "no rollouts match"
) -> tuple[str, str]:
    """``(message, hint)`` for a selection that matched no rollout, naming the cause: the store
    holds no rollouts at all (``"the store holds no rollouts"``, :data:`RECORD_HINT`: how to
    record some; the filter is not the cause), or the filter (``selection``, in words) matched
    none of the stored ones (``"{lead} {selection} (the store holds N)"``, :data:`FILTER_HINT`)."""
    total = stored_rollouts(connection)
    if total == 0:
        return "the store holds no rollouts", RECORD_HINT
    return f"{lead} {selection or 'the selection'} (the store holds {total})", FILTER_HINT


__all__ = ["FILTER_HINT", "LLM_STEPS_HINT", "RECORD_HINT", "SCORE_HINT", "nothing_selected", "stored_rollouts"]
