"""Prompts for online GRPO, mined from the store: :func:`build_prompt_dataset`.

Rows: ``prompt`` (chat messages ``{role, content}``), ``task_id`` (text or null) and
``ground_truth`` (JSON text or null: parse it with ``json.loads``; the reward functions of
:mod:`agent_rl_plugin.train.reward_funcs` do so).

``source="rollouts"`` (default): the prompt side of each selected rollout's conversation, as
the dataset builders split it (:mod:`agent_rl_plugin.data.conversations`: the last LLM call's
messages, repaired when the agent left its own turns out, else the agent's input): the messages
before the first assistant message. A rollout whose conversation has no assistant message (the
model call failed, or no output was recorded) gives its whole conversation (its input
messages); one that starts with an assistant message, or whose prompt has no text, is left out.
``ground_truth`` is the rollout metadata's ``ground_truth``, else the ``tasks`` table's (the rule
of :func:`agent_rl_plugin.rewards.load_rollouts`). Rows are **deduplicated**: one row per
distinct (prompt, ground truth), the oldest rollout's ``task_id`` kept; the others are counted in
the report as left out. ``where`` is SQL over the ``rollouts`` view, ``sql`` a read-only query
returning ``rollout_id``.

``source="tasks"``: one row per row of the ``tasks`` table (``agent-rl tasks import``), ordered by
``task_id``: its prompt as one user message (a prompt holding a JSON list of ``{role, content}``
messages is used as those messages), its ground truth. ``where`` is SQL over the ``tasks`` table
(``task_id, prompt, ground_truth, metadata, imported_at``), ``sql`` a read-only query returning
``task_id``. Tasks without a prompt are left out.

Errors are :class:`~agent_rl_plugin.data.DatasetError` (nothing matches, bad SQL, no usable
prompt); ``report`` (a :class:`~agent_rl_plugin.data.BuildReport`) gets the counts and what was
left out.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

import agent_rl_plugin.semconv as sc
from agent_rl_plugin.data.conversations import Conversations, conversations
from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.sql import arrow, attr, first_line, open_store, query_columns, registered, select_rollouts

SOURCES = ("rollouts", "tasks")
PROMPT_COLUMNS = ("prompt", "task_id", "ground_truth")
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
PROMPT_TYPE = pa.list_(MESSAGE)

STARTS_WITH_ASSISTANT = "the conversation starts with an assistant message (empty prompt)"
EMPTY_PROMPT = "the prompt has no text"
DUPLICATE = "same prompt and ground truth as an earlier row (deduplicated)"
NO_TASK_PROMPT = "task without a prompt"
TASK_COLUMNS_HINT = "columns of the tasks table: task_id, prompt, ground_truth, metadata, imported_at"


def _schema() -> pa.Schema:
    return pa.schema([("prompt", PROMPT_TYPE), ("task_id", pa.string()), ("ground_truth", pa.string())])


def _clean(messages: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    """Messages reduced to ``{role, content}`` (text contents)."""
    out = []
    for message in messages or []:
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        out.append({"role": str(message.get("role") or "user"), "content": content or ""})
    return out


def _has_text(messages: list[dict[str, str]]) -> bool:
    return any(m["content"].strip() for m in messages)


# ---------------------------------------------------------------------------------------------
# from rollouts


def _ground_truths(connection: duckdb.DuckDBPyConnection, selected: str) -> dict[str, str | None]:
    """``{rollout_id: ground truth JSON text}``: the root span's metadata, else the task's."""
    metadata = attr(sc.ROLLOUT_METADATA)
    rows = arrow(
        connection,
        f"""
        WITH roots AS (
            SELECT rollout_id, {metadata} AS metadata FROM spans
            WHERE is_rollout_root AND rollout_id IN (SELECT rollout_id FROM {selected})
            QUALIFY row_number() OVER (PARTITION BY rollout_id ORDER BY start_unix_nano, span_id) = 1
        )
        SELECT s.rollout_id,
               coalesce(nullif(CAST(try(CAST(r.metadata AS JSON))->'$.ground_truth' AS VARCHAR), 'null'),
                        t.ground_truth) AS ground_truth
        FROM {selected} s
        LEFT JOIN roots r ON r.rollout_id = s.rollout_id
        LEFT JOIN tasks t ON t.task_id = s.task_id
        """,
    )
    return dict(zip(rows.column("rollout_id").to_pylist(), rows.column("ground_truth").to_pylist()))


def _prompt_lengths(conv: Conversations) -> np.ndarray:
    """Messages of each conversation that make its prompt (0: none, see the module doc)."""
    base = conv.table.column("base").combine_chunks()
    out = conv.table.column("out").combine_chunks()
    total = np.diff(base.offsets.to_numpy()) + np.diff(out.offsets.to_numpy())
    return np.where(conv.k > 0, conv.k, np.where(conv.k < 0, total, 0)).astype(np.int64)


def rollout_prompts(
    connection: duckdb.DuckDBPyConnection, where: str | None, sql: str | None, report: BuildReport
) -> pa.Table:
    """The prompt rows of the selected rollouts (see the module doc), deduplicated."""
    selected = select_rollouts(connection, where=where, sql=sql)
    report.rollouts = selected.num_rows
    with registered(connection, selected, "prompts") as sel:
        conv = conversations(connection, sel, everything=not where and not sql)
        truths = _ground_truths(connection, sel)
    lengths = _prompt_lengths(conv)
    row_of = {rid: i for i, rid in enumerate(conv.rollout_ids.to_pylist())}
    usable = Conversations(conv.table, lengths, conv.source, conv.drop_reason)
    order = selected.column("rollout_id").to_pylist()
    task_ids = selected.column("task_id").to_pylist()
    rows = np.array([row_of.get(rid, -1) for rid in order], dtype=np.int64)
    starts = [rid for rid, r in zip(order, rows) if r >= 0 and lengths[r] == 0]
    report.leave_out(STARTS_WITH_ASSISTANT, starts[:3], count=len(starts))
    keep = np.flatnonzero((rows >= 0) & (lengths[np.maximum(rows, 0)] > 0))
    prompts = usable.messages(rows[keep])[0].to_pylist() if keep.size else []
    seen: set[str] = set()
    out: dict[str, list[Any]] = {name: [] for name in PROMPT_COLUMNS}
    empty: list[str] = []
    duplicates: list[str] = []
    for position, messages in zip(keep.tolist(), prompts):
        rollout_id = order[position]
        cleaned = _clean(messages)
        if not _has_text(cleaned):
            empty.append(rollout_id)
            continue
        truth = truths.get(rollout_id)
        key = json.dumps([cleaned, truth], ensure_ascii=False)
        if key in seen:
            duplicates.append(rollout_id)
            continue
        seen.add(key)
        out["prompt"].append(cleaned)
        out["task_id"].append(task_ids[position])
        out["ground_truth"].append(truth)
    report.leave_out(EMPTY_PROMPT, empty[:3], count=len(empty))
    report.leave_out(DUPLICATE, duplicates[:3], count=len(duplicates))
    n_io = int(np.count_nonzero(conv.source[rows[keep]] == "io")) if keep.size else 0
    if n_io:
        report.note(f"{n_io} rollout(s) had no LLM messages: prompt from the agent's input")
    return pa.table(out, schema=_schema())


# ---------------------------------------------------------------------------------------------
# from the tasks table


def _task_messages(prompt: str) -> list[dict[str, str]]:
    """A task prompt as messages: a JSON list of ``{role, content}`` as is, else one user turn."""
    try:
        parsed = json.loads(prompt)
    except ValueError:
        parsed = None
    if (
        isinstance(parsed, list)
        and parsed
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in parsed)
    ):
        return _clean(parsed)
    return [{"role": "user", "content": prompt}]


def _task_ids_query(connection: duckdb.DuckDBPyConnection, sql: str) -> str:
    inner, columns = query_columns(connection, sql)
    if "task_id" not in columns:
        raise DatasetError(
            f"with source='tasks' the query must return a task_id column (it returns {', '.join(columns) or 'nothing'})"
        )
    return f"task_id IN (SELECT CAST(_q.task_id AS VARCHAR) FROM ({inner}) AS _q)"


def task_prompts(
    connection: duckdb.DuckDBPyConnection, where: str | None, sql: str | None, report: BuildReport
) -> pa.Table:
    """The prompt rows of the selected tasks (see the module doc)."""
    condition = _task_ids_query(connection, sql) if sql else (f"({where})" if where else "true")
    try:
        tasks = arrow(connection, f"SELECT task_id, prompt, ground_truth FROM tasks WHERE {condition} ORDER BY task_id")
    except duckdb.Error as exc:
        raise DatasetError(
            f"SQL error in {'the query' if sql else 'where'}: {first_line(exc)}", TASK_COLUMNS_HINT
        ) from None
    if tasks.num_rows == 0:
        what = (
            f"the query {sql!r}" if sql else (f"where {where!r}" if where else "the store (its tasks table is empty)")
        )
        raise DatasetError(f"no tasks match {what}", "import tasks with: agent-rl tasks import FILE")
    report.extra["tasks"] = tasks.num_rows
    out: dict[str, list[Any]] = {name: [] for name in PROMPT_COLUMNS}
    missing: list[str] = []
    for task_id, prompt, truth in zip(*(tasks.column(c).to_pylist() for c in ("task_id", "prompt", "ground_truth"))):
        messages = _task_messages(prompt) if prompt is not None else []
        if not _has_text(messages):
            missing.append(task_id)
            continue
        out["prompt"].append(messages)
        out["task_id"].append(task_id)
        out["ground_truth"].append(truth)
    report.leave_out(NO_TASK_PROMPT, missing[:3], count=len(missing))
    return pa.table(out, schema=_schema())


# ---------------------------------------------------------------------------------------------


def prompt_table(
    connection: duckdb.DuckDBPyConnection,
    where: str | None = None,
    sql: str | None = None,
    *,
    source: str = "rollouts",
    report: BuildReport | None = None,
) -> pa.Table:
    """The prompt rows as an Arrow table (see :func:`build_prompt_dataset`)."""
    if source not in SOURCES:
        raise DatasetError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if where and sql:
        raise DatasetError("give either where or sql, not both")
    report = report if report is not None else BuildReport()
    report.kind = "prompts"
    report.extra["source"] = source
    table = (rollout_prompts if source == "rollouts" else task_prompts)(connection, where, sql, report)
    report.rows = table.num_rows
    report.extra["with_ground_truth"] = table.num_rows - table.column("ground_truth").null_count
    if table.num_rows == 0:
        counted = ", ".join(f"{n} {reason}" for reason, n in report.left_out.items())
        raise DatasetError(
            f"no usable prompt: {counted}" if counted else "no usable prompt",
            "record rollouts with LLM messages, or import tasks with prompts (source='tasks')",
        )
    return table


def build_prompt_dataset(
    db_or_connection: Any,
    where: str | None = None,
    sql: str | None = None,
    *,
    source: str = "rollouts",
    report: BuildReport | None = None,
):
    """Prompt rows (``prompt``, ``task_id``, ``ground_truth``) as a ``datasets.Dataset`` for
    :func:`~agent_rl_plugin.train.train_grpo` (see the module doc for the rules).

    ``db_or_connection``: a store path or an open DuckDB connection (left open). ``source``:
    ``"rollouts"`` (``where`` over the ``rollouts`` view, ``sql`` returning ``rollout_id``) or
    ``"tasks"`` (``where`` over the ``tasks`` table, ``sql`` returning ``task_id``). ``report``:
    a :class:`~agent_rl_plugin.data.BuildReport` filled with counts and what was left out.
    Raises :class:`~agent_rl_plugin.data.DatasetError` when nothing usable matches.
    """
    from agent_rl_plugin.data.output import as_dataset

    with open_store(db_or_connection) as connection:
        table = prompt_table(connection, where, sql, source=source, report=report)
    return as_dataset(table)


__all__ = ["PROMPT_COLUMNS", "SOURCES", "build_prompt_dataset", "prompt_table", "rollout_prompts", "task_prompts"]
