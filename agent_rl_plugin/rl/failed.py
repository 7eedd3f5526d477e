"""How each selected rollout ended, read from its root span (for the failed-rollout policy).

:func:`rollout_outcomes` gives one ``outcome`` per rollout: ``ok``, ``error``, ``timeout`` or
``cancelled`` (:data:`agent_rl_plugin.advantages.failed.OUTCOMES`). The rule extends the
``rollouts`` view's ``status`` (same root span: the first root span of each rollout id):

* ``ok``: the view's status is ``ok`` (the root span is not ERROR and not cancelled);
* ``cancelled``: the view's status is ``cancelled`` (``agent_rl.cancelled``), or the error type
  is ``KeyboardInterrupt`` (the view shows that as ``error``);
* ``timeout``: the error type is ``TimeoutError`` (any module's, e.g. the ``TimeoutError: rollout
  timed out after S s`` of :func:`~agent_rl_plugin.rollouts.run_rollouts`; the view shows it
  as ``error``);
* ``error``: any other failure.

The error type is the span's ``error.type``, else the status message up to its first ``:``.
:func:`split_failed` applies the policy of :mod:`agent_rl_plugin.advantages.failed` to a
selection; both the advantage readers (:mod:`agent_rl_plugin.rl.store`) and the dataset
builders (:mod:`agent_rl_plugin.data.episodes`) go through it.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.advantages.failed import FailedRollouts, failed_report
from agent_rl_plugin.semconv import CANCELLED, ERROR_TYPE

_CANCELLED = f"coalesce(attributes->>'$.\"{CANCELLED}\"' = 'true', false)"
_ERROR_TYPE = f"coalesce(nullif(attributes->>'$.\"{ERROR_TYPE}\"', ''), nullif(split_part(coalesce(status_message, ''), ':', 1), ''), '')"

#: SQL over ``spans`` columns: the outcome of a root span (see the module docstring).
OUTCOME_SQL = (
    f"CASE WHEN status_code IS DISTINCT FROM 'ERROR' AND NOT {_CANCELLED} THEN 'ok' "
    f"WHEN {_CANCELLED} OR regexp_matches({_ERROR_TYPE}, '(^|\\.)KeyboardInterrupt$') THEN 'cancelled' "
    f"WHEN regexp_matches({_ERROR_TYPE}, '(^|\\.)TimeoutError$') THEN 'timeout' "
    "ELSE 'error' END"
)

_OUTCOMES_QUERY = f"""
SELECT rollout_id, {OUTCOME_SQL} AS outcome
FROM spans
WHERE is_rollout_root AND rollout_id IN (SELECT rollout_id FROM {{relation}})
QUALIFY row_number() OVER (PARTITION BY rollout_id ORDER BY start_unix_nano, span_id) = 1
"""


def rollout_outcomes(connection: duckdb.DuckDBPyConnection, relation: str) -> pa.Table:
    """``(rollout_id, outcome)`` for the rollouts whose ids the table or view ``relation``
    (a registered name) holds in its ``rollout_id`` column."""
    sql = _OUTCOMES_QUERY.format(relation=relation)
    result = connection.sql(sql)
    return (getattr(result, "to_arrow_table", None) or result.arrow)()  # duckdb 2 / 1.x


def split_failed(
    connection: duckdb.DuckDBPyConnection, selected: pa.Table, policy: FailedRollouts
) -> tuple[pa.Table, list[str], dict[str, Any]]:
    """Apply ``policy`` to the rollouts of ``selected`` (a table with a ``rollout_id`` column):
    ``(kept, failed_ids, report)`` where ``kept`` is ``selected`` without the failed rollouts
    when ``policy`` is ``exclude`` (else all of it, same order), ``failed_ids`` the failed
    rollouts (in ``selected``'s order) and ``report`` :func:`~agent_rl_plugin.advantages.failed.failed_report`."""
    name = f"_arl_failed_sel_{id(selected)}"
    connection.register(name, selected.select(["rollout_id"]))
    try:
        outcomes = rollout_outcomes(connection, name)
    finally:
        connection.unregister(name)
    failed = outcomes.filter(pc.not_equal(outcomes.column("outcome"), "ok"))
    by_id = dict(zip(failed.column("rollout_id").to_pylist(), failed.column("outcome").to_pylist()))
    ids = [i for i in selected.column("rollout_id").to_pylist() if i in by_id]
    report = failed_report(policy, ids, [by_id[i] for i in ids])
    if policy == "exclude" and ids:
        mask = pc.invert(
            pc.is_in(selected.column("rollout_id"), value_set=pa.array(ids, selected.column("rollout_id").type))
        )
        selected = selected.filter(mask)
    return selected, ids, report


__all__ = ["OUTCOME_SQL", "rollout_outcomes", "split_failed"]
