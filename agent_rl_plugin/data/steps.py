"""Step rows for GiGPO: one row per agent action (LLM call) with its advantage.

* ``prompt``: the messages the LLM saw (its ``input_messages``, normalised);
* ``completion``: its output message(s);
* ``advantage``: from :func:`agent_rl_plugin.rl.gigpo_advantages` over
  :func:`agent_rl_plugin.rl.steps_for_gigpo` of the same rollouts (default), or read from the
  ``advantages`` table (``from_table=True`` or a ``run_id``: that run's rows; without a run id,
  the latest run that covers the selected rollouts). A row of the table with a NULL
  ``step_index`` (an episode advantage) applies to every step of its rollout;
* ``old_logprobs``: the behaviour policy's token log-probs when the LLM span carries them in
  ``agent_rl.logprobs`` (a JSON list of numbers), else null;
* ``completion_token_ids``: the sampled completion's token ids when the span carries them in
  ``agent_rl.token_ids`` (a JSON list of ints; recorded only with content capture), else null.
  ``old_logprobs`` recorded with them hold one value per id;
* ``prompt_token_ids``: the prompt's token ids as the server saw them (after its chat template)
  when the span carries them in ``agent_rl.prompt_token_ids``, else null. The offline trainer
  trains on ``prompt_token_ids + completion_token_ids`` when present instead of re-tokenising
  the text (:mod:`agent_rl_plugin.train.stored_tokens`);
* ``rollout_id``, ``group_id``, ``task_id``, ``step_index`` (of the ``steps`` view),
  ``state_key``.

Steps that get no advantage are left out and reported. So are LLM calls recorded with
``agent_rl.llm.incomplete = true`` (a streamed answer the agent stopped reading before its end:
the stored text is cut, and training on it would teach the cut as a complete answer, end-of-turn
token included): counted in ``report.extra["steps_incomplete_left_out"]`` and under
:data:`INCOMPLETE` in ``report.left_out``. Their advantages are computed with them present (the
steps keep their indices); only their rows are dropped.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.sql import (
    arrow,
    attr,
    messages_sql,
    normalize_weights,
    open_store,
    registered,
    select_rollouts,
    system_text_sql,
    with_system_sql,
)
from agent_rl_plugin.semconv import GEN_AI_SYSTEM_INSTRUCTIONS, LLM_INCOMPLETE, LOGPROBS, PROMPT_TOKEN_IDS, TOKEN_IDS

#: Span attribute holding the behaviour log-probs of an LLM call (JSON list of floats).
LOGPROBS_ATTRIBUTE = LOGPROBS
NO_ADVANTAGE = "no advantage for this step"
#: How to get stored advantages for a selection.
COMPUTE_HINT = "compute them first: agent-rl advantages compute --method gigpo (with the same --where)"
#: Why a step whose streamed answer was not read to its end is left out (``agent_rl.llm.incomplete``).
INCOMPLETE = "incomplete LLM answer (stream not read to its end)"
#: Span attributes holding the sampled completion's / the prompt's token ids (JSON lists of ints).
TOKEN_IDS_ATTRIBUTE = TOKEN_IDS
PROMPT_TOKEN_IDS_ATTRIBUTE = PROMPT_TOKEN_IDS
STEP_COLUMNS = ("prompt", "completion", "advantage", "old_logprobs", "completion_token_ids", "prompt_token_ids")
EXTRA_COLUMNS = ("rollout_id", "group_id", "task_id", "step_index", "state_key")


def _llm_steps(connection: Any, sel: str) -> pa.Table:
    """One row per LLM step; the prompt gets a ``system`` message from the call's
    ``gen_ai.system_instructions`` when its input messages have none (as the KTO/GRPO
    conversations do, see :func:`~agent_rl_plugin.data.sql.with_system_sql`)."""
    logprobs = attr(LOGPROBS_ATTRIBUTE, "sp.attributes")
    token_ids = attr(TOKEN_IDS_ATTRIBUTE, "sp.attributes")
    prompt_token_ids = attr(PROMPT_TOKEN_IDS_ATTRIBUTE, "sp.attributes")
    instructions = attr(GEN_AI_SYSTEM_INSTRUCTIONS, "sp.attributes")
    return arrow(
        connection,
        f"""
        SELECT rollout_id, group_id, task_id, step_index, state_key,
               {with_system_sql("raw_prompt", system_text_sql("instructions"))} AS prompt,
               completion, old_logprobs, completion_token_ids, prompt_token_ids, incomplete
        FROM (
            SELECT s.rollout_id, s.group_id, s.task_id, s.step_index, s.state_key, r.start_time AS rollout_start,
                   {messages_sql("s.input")} AS raw_prompt,
                   {messages_sql("s.output")} AS completion,
                   {instructions} AS instructions,
                   try(from_json({logprobs}, '["DOUBLE"]')) AS old_logprobs,
                   try(from_json({token_ids}, '["BIGINT"]')) AS completion_token_ids,
                   try(from_json({prompt_token_ids}, '["BIGINT"]')) AS prompt_token_ids,
                   coalesce(lower({attr(LLM_INCOMPLETE, "sp.attributes")}) = 'true', false) AS incomplete
            FROM steps s
            JOIN {sel} r ON r.rollout_id = s.rollout_id
            LEFT JOIN spans sp ON sp.span_id = s.span_id AND sp.trace_id = s.trace_id
            WHERE s.kind = 'llm'
        )
        ORDER BY rollout_start, rollout_id, step_index
        """,
    )


def _computed_advantages(
    connection: Any, sel: str, reward_names: list[str] | None, params: Mapping[str, Any]
) -> pa.Table:
    """(rollout_id, step_index, advantage, state_key) from gigpo_advantages over
    steps_for_gigpo (whose ``view_step_index`` is the steps view's step_index)."""
    from agent_rl_plugin.rl import gigpo_advantages, steps_for_gigpo

    where = f"rollout_id IN (SELECT rollout_id FROM {sel})"
    try:
        gigpo_steps = steps_for_gigpo(connection, where=where, reward_names=reward_names)
        values = np.asarray(gigpo_advantages(gigpo_steps, **dict(params)), dtype=float)
    except ValueError as exc:  # AdvantageInputError is a ValueError
        raise DatasetError(f"GiGPO advantages: {exc}", getattr(exc, "hint", None)) from None
    return pa.table(
        {
            "rollout_id": gigpo_steps.column("trajectory_id").cast(pa.string()),
            "step_index": gigpo_steps.column("view_step_index").cast(pa.int64()),
            "advantage": pa.array(values, pa.float64()),
            "state_key": gigpo_steps.column("state_key").cast(pa.string()),
        }
    )


def _table_advantages(connection: Any, sel: str, run_id: str | None, report: BuildReport) -> pa.Table:
    """(rollout_id, step_index, advantage) from the ``advantages`` table."""
    try:
        if run_id is None:
            found = arrow(
                connection,
                f"SELECT run_id FROM advantages WHERE rollout_id IN (SELECT rollout_id FROM {sel}) "
                "ORDER BY created_at DESC LIMIT 1",
            )
            if found.num_rows == 0:
                raise DatasetError(
                    "no stored advantage run covers these rollouts",
                    COMPUTE_HINT + ", or build without from_table (advantages computed on the fly)",
                )
            run_id = found.column("run_id")[0].as_py()
        else:
            known = arrow(connection, "SELECT count(*) AS n FROM advantages WHERE run_id = ?", [str(run_id)])
            if not known.column("n")[0].as_py():
                raise DatasetError(
                    f"no advantage run {run_id!r} in the store",
                    "list the stored runs with: agent-rl advantages runs; or " + COMPUTE_HINT,
                )
        report.extra["advantages_run_id"] = run_id
        return arrow(
            connection,
            f"""
            SELECT rollout_id, CAST(step_index AS BIGINT) AS step_index, arg_max(value, created_at) AS advantage,
                   arg_max(state_key, created_at) AS state_key
            FROM advantages
            WHERE run_id = ? AND rollout_id IN (SELECT rollout_id FROM {sel})
            GROUP BY rollout_id, step_index
            """,
            [str(run_id)],
        )
    except DatasetError:
        raise
    except Exception as exc:  # duckdb.CatalogException when the table does not exist yet
        raise DatasetError(f"cannot read the advantages table: {str(exc).splitlines()[0]}") from None


def step_table(
    connection: Any,
    where: str | None = None,
    sql: str | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    report: BuildReport | None = None,
    *,
    from_table: bool = False,
    run_id: str | None = None,
    gigpo: Mapping[str, Any] | None = None,
    extra_columns: bool = True,
    rollout_ids: Sequence[str] | None = None,
    rollout_run_id: str | None = None,
) -> pa.Table:
    """The step rows as an Arrow table (see :func:`build_step_dataset`)."""
    report = report if report is not None else BuildReport()
    report.kind = "steps"
    selected = select_rollouts(connection, where=where, sql=sql, rollout_ids=rollout_ids, rollout_run_id=rollout_run_id)
    report.rollouts = selected.num_rows
    weight_map = normalize_weights(weights)
    with registered(connection, selected, "selected") as sel:
        steps = _llm_steps(connection, sel)
        if steps.num_rows == 0:
            raise DatasetError(
                f"the {selected.num_rows} matching rollouts have no LLM calls: there are no steps",
                "record LLM calls (record_llm_call, or an instrumented client)",
            )
        if from_table or run_id is not None:
            advantages = _table_advantages(connection, sel, run_id, report)
        else:
            advantages = _computed_advantages(connection, sel, list(weight_map) if weight_map else None, gigpo or {})
        keys = steps.select(["rollout_id", "step_index"]).append_column(
            "row", pa.array(np.arange(steps.num_rows), pa.int64())
        )
        with registered(connection, keys, "steps") as s, registered(connection, advantages, "adv") as a:
            joined = arrow(
                connection,
                f"""
                SELECT s.row, coalesce(exact.advantage, episode.advantage) AS advantage,
                       coalesce(exact.state_key, episode.state_key) AS computed_key
                FROM {s} s
                LEFT JOIN {a} exact ON exact.rollout_id = s.rollout_id AND exact.step_index = s.step_index
                LEFT JOIN {a} episode ON episode.rollout_id = s.rollout_id AND episode.step_index IS NULL
                ORDER BY s.row
                """,
            )
    state_key = pc.coalesce(steps.column("state_key"), joined.column("computed_key"))
    steps = steps.set_column(steps.column_names.index("state_key"), "state_key", state_key)
    joined = steps.append_column("advantage", joined.column("advantage"))
    incomplete = joined.column("incomplete")
    n_incomplete = pc.sum(incomplete).as_py() or 0
    report.extra["steps_incomplete_left_out"] = int(n_incomplete)
    if n_incomplete:
        report.leave_out(
            INCOMPLETE, joined.filter(incomplete).column("rollout_id").slice(0, 3).to_pylist(), count=n_incomplete
        )
        joined = joined.filter(pc.invert(incomplete))
        if joined.num_rows == 0:
            raise DatasetError(
                f"every one of the {n_incomplete} LLM steps is an incomplete streamed answer: there are no steps",
                "read each stream to its end so the full answer is recorded (agent-rl doctor: llm_incomplete)",
            )
    missing = pc.is_null(joined.column("advantage"))
    n_missing = pc.sum(missing).as_py() or 0
    if n_missing:
        report.leave_out(
            NO_ADVANTAGE, joined.filter(missing).column("rollout_id").slice(0, 3).to_pylist(), count=n_missing
        )
    table = joined.filter(pc.invert(missing)) if n_missing else joined
    bad = pc.invert(pc.is_finite(table.column("advantage")))
    if table.num_rows and pc.any(bad).as_py():
        row = table.filter(bad).slice(0, 1).to_pylist()[0]
        raise DatasetError(f"advantage of rollout {row['rollout_id']} step {row['step_index']} is {row['advantage']}")
    report.rows = table.num_rows
    for key, column in (
        ("steps_with_logprobs", "old_logprobs"),
        ("steps_with_token_ids", "completion_token_ids"),
        ("steps_with_prompt_token_ids", "prompt_token_ids"),
    ):
        report.extra[key] = int(pc.sum(pc.is_valid(table.column(column))).as_py() or 0)
    if table.num_rows == 0:
        run = report.extra.get("advantages_run_id")
        if run is not None:
            raise DatasetError(
                f"advantage run {run!r} has no row for any of the {n_missing} LLM steps of the selected rollouts",
                "pick the run that covers them (agent-rl advantages runs), or " + COMPUTE_HINT,
            )
        raise DatasetError(
            f"no step got an advantage ({n_missing} LLM steps): their rollouts have no usable reward",
            "score the rollouts first (agent-rl score), or emit rewards while recording (arl.emit_reward)",
        )
    columns = list(STEP_COLUMNS) + (list(EXTRA_COLUMNS) if extra_columns else [])
    return table.select(columns)


def build_step_dataset(
    db_or_connection: Any,
    where: str | None = None,
    sql: str | None = None,
    weights: Mapping[str, float] | Sequence[str] | None = None,
    *,
    from_table: bool = False,
    run_id: str | None = None,
    gigpo: Mapping[str, Any] | None = None,
    report: BuildReport | None = None,
    extra_columns: bool = True,
    rollout_ids: Sequence[str] | None = None,
    rollout_run_id: str | None = None,
):
    """Step rows (``prompt``, ``completion``, ``advantage``, ``old_logprobs``,
    ``completion_token_ids``, ``prompt_token_ids``; see the module doc) as a
    ``datasets.Dataset``, one row per LLM call of the selected rollouts (but incomplete streamed
    answers, see the module doc). ``report.extra`` counts ``steps_with_logprobs``,
    ``steps_with_token_ids``, ``steps_with_prompt_token_ids`` and ``steps_incomplete_left_out``.

    The selection: ``where`` (an SQL condition over the ``rollouts`` view) or ``sql`` (a query
    returning ``rollout_id``), AND ``rollout_ids`` (exactly these rollouts; an empty list
    selects none) AND ``rollout_run_id`` (the rollouts of one
    :func:`~agent_rl_plugin.rollouts.run_rollouts` call, by the ``run_id`` it records in their
    metadata; not the advantages ``run_id``), each only when given. Ids are SQL parameters,
    never SQL text. Computed GiGPO advantages are relative to the selected rollouts only.

    ``gigpo``: keyword arguments of :func:`agent_rl_plugin.rl.gigpo_advantages` (omega, gamma,
    mode, epsilon, baseline). ``weights``: the reward names passed to ``steps_for_gigpo``.
    ``from_table`` / ``run_id``: read the advantages from the ``advantages`` table instead.
    """
    from agent_rl_plugin.data.output import as_dataset

    with open_store(db_or_connection) as connection:
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
            rollout_ids=rollout_ids,
            rollout_run_id=rollout_run_id,
        )
    return as_dataset(table)


__all__ = [
    "INCOMPLETE",
    "LOGPROBS_ATTRIBUTE",
    "PROMPT_TOKEN_IDS_ATTRIBUTE",
    "STEP_COLUMNS",
    "TOKEN_IDS_ATTRIBUTE",
    "build_step_dataset",
    "step_table",
]
