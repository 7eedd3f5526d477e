"""The SQL behind each section of the report, run on one read-only connection.

Every function takes the connection and ``sel``: the name of a registered table holding the
``rollout_id`` of the selected rollouts (:func:`select`), and returns plain Python values (lists
of dicts, or dicts) for :mod:`~agent_rl_plugin.report.plots` and
:mod:`~agent_rl_plugin.report.html`. Nothing here writes.

The combined reward of a rollout is ``rollouts.total_reward``: the rows of the
``episode_rewards`` view (per reward name the value that counts: the latest usable episode-level
row) combined by :func:`~agent_rl_plugin.store.views.combined_reward_sql` with the view's
``weight`` of each name (recorded by scoring, else 1). Non-finite values are left out.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any, Iterable, Mapping, Sequence

import duckdb
import pyarrow as pa

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.rewards.coordination_metrics import coordination_summary
from agent_rl_plugin.store.views import combined_reward_sql

#: Coordination event types: a section on coordination appears when one of these was recorded.
COORDINATION_TYPES = (sc.EVENT_TYPE_NEW_ANSWER, sc.EVENT_TYPE_VOTE, sc.EVENT_TYPE_RESTART)


class ReportError(AgentRLError, ValueError):
    """The report cannot be built as asked (a bad ``where``, a statement that writes...)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def fetch(connection: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Rows of ``sql`` as dicts."""
    result = connection.execute(sql, list(params))
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, row)) for row in result.fetchall()]


def has_table(connection: duckdb.DuckDBPyConnection, name: str) -> bool:
    rows = connection.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]).fetchall()
    return bool(rows and rows[0][0])


# -- selection --------------------------------------------------------------------------------


def select(connection: duckdb.DuckDBPyConnection, where: str | None) -> pa.Table:
    """The selected rollouts (``rollout_id``, ``task_id``, ``group_id``, ``start_time``), oldest
    first: every rollout, or those of the ``rollouts`` view matching ``where``. No match is an
    empty table, not an error; a bad or writing ``where`` raises :class:`ReportError`."""
    from agent_rl_plugin.data.report import DatasetError
    from agent_rl_plugin.data.sql import select_rollouts
    from agent_rl_plugin.store.user_sql import SqlRefused, UserSqlError, check_condition

    if not has_table(connection, "spans"):
        return _empty_selection()
    if where is not None:
        if not where.strip():
            raise ReportError(
                "the where condition is empty", "give an SQL condition over the rollouts view, e.g. status = 'error'"
            )
        try:
            check_condition(where, "SELECT rollout_id FROM rollouts WHERE ({where})")
        except SqlRefused as exc:
            raise ReportError(f"the where condition must be one condition that only reads: {exc}", WHERE_HINT) from None
        except UserSqlError as exc:
            raise ReportError(f"SQL error in where: {exc}", WHERE_HINT) from None
    try:
        return select_rollouts(connection, where=where)
    except DatasetError as exc:
        if _matches_none(connection, where):  # an empty store, or nothing matches: an empty page
            return _empty_selection()
        raise ReportError(str(exc), exc.hint or WHERE_HINT) from None


def _matches_none(connection: duckdb.DuckDBPyConnection, where: str | None) -> bool:
    """Whether no rollout matches ``where`` (already checked to be one condition that reads)."""
    condition = f" WHERE ({where})" if where is not None else ""
    try:
        rows = connection.execute(f"SELECT count(*) FROM rollouts{condition}").fetchall()
    except duckdb.Error:
        return False
    return bool(rows) and rows[0][0] == 0


WHERE_HINT = (
    "the where condition is SQL over the rollouts view, e.g. \"task_id like 'shop-%' and status = 'ok'\" "
    "(columns: rollout_id, task_id, group_id, status, start_time, total_reward, n_tool_errors, ...; see docs/schema.md)"
)


def _empty_selection() -> pa.Table:
    return pa.table(
        {
            "rollout_id": pa.array([], pa.string()),
            "task_id": pa.array([], pa.string()),
            "group_id": pa.array([], pa.string()),
            "start_time": pa.array([], pa.timestamp("us")),
        }
    )


# -- overview and rollouts --------------------------------------------------------------------


def overview(connection: duckdb.DuckDBPyConnection, sel: str) -> dict[str, Any]:
    """Counts over the selected rollouts."""
    row = fetch(
        connection,
        f"""
        SELECT count(*) AS rollouts,
               count(DISTINCT task_id) AS tasks,
               count(DISTINCT group_id) AS groups,
               count(*) FILTER (WHERE status = 'ok') AS ok,
               count(*) FILTER (WHERE status = 'error') AS error,
               count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
               coalesce(sum(n_llm_calls), 0) AS llm_calls,
               coalesce(sum(n_tool_calls), 0) AS tool_calls,
               coalesce(sum(n_tool_errors), 0) AS tool_errors,
               coalesce(sum(input_tokens), 0) AS input_tokens,
               coalesce(sum(output_tokens), 0) AS output_tokens,
               min(start_time) AS first_start,
               max(start_time) AS last_start,
               median(duration_ms) AS median_duration_ms
        FROM rollouts WHERE rollout_id IN (SELECT rollout_id FROM {sel})
        """,
    )[0]
    return row


def rollout_times(connection: duckdb.DuckDBPyConnection, sel: str) -> list[dict[str, Any]]:
    """start_time, status, duration_ms of each selected rollout, oldest first."""
    return fetch(
        connection,
        f"SELECT r.rollout_id, r.start_time, r.status, r.duration_ms FROM rollouts r "
        f"WHERE r.rollout_id IN (SELECT rollout_id FROM {sel}) ORDER BY r.start_time, r.rollout_id",
    )


# -- rewards ----------------------------------------------------------------------------------


def _per_name_cte(sel: str) -> str:
    """``per_name``: the finite rows of the ``episode_rewards`` view (the one definition of the
    episode reward) for the selected rollouts."""
    return f"""
        per_name AS (
            SELECT rollout_id, name, value, weight
            FROM episode_rewards
            WHERE isfinite(value) AND rollout_id IN (SELECT rollout_id FROM {sel})
        )"""


def reward_values(connection: duckdb.DuckDBPyConnection, sel: str) -> dict[str, list[float]]:
    """{reward name: the episode value of each selected rollout that has it}."""
    rows = fetch(connection, f"WITH {_per_name_cte(sel)} SELECT name, value FROM per_name ORDER BY name, rollout_id")
    out: dict[str, list[float]] = {}
    for row in rows:
        out.setdefault(row["name"], []).append(float(row["value"]))
    return out


def reward_table(connection: duckdb.DuckDBPyConnection, sel: str) -> list[dict[str, Any]]:
    """Per reward name: source(s), plugin, rollouts scored, mean/std/min/max of the episode
    values, step rows and error rows."""
    return fetch(
        connection,
        f"""
        WITH {_per_name_cte(sel)},
        stats AS (
            SELECT name, count(*) AS rollouts, avg(value) AS mean, stddev_pop(value) AS std,
                   min(value) AS min, max(value) AS max
            FROM per_name GROUP BY name
        ),
        meta AS (
            SELECT name, string_agg(DISTINCT source, ', ' ORDER BY source) AS source,
                   string_agg(DISTINCT plugin, ', ' ORDER BY plugin) AS plugin,
                   count(*) FILTER (WHERE step_index IS NOT NULL AND error IS NULL) AS step_rows,
                   count(*) FILTER (WHERE error IS NOT NULL) AS errors
            FROM rewards WHERE rollout_id IN (SELECT rollout_id FROM {sel})
            GROUP BY name
        )
        SELECT m.name, m.source, m.plugin, coalesce(s.rollouts, 0) AS rollouts, s.mean, s.std, s.min, s.max,
               m.step_rows, m.errors
        FROM meta m LEFT JOIN stats s USING (name)
        ORDER BY m.name
        """,
    )


def reward_errors(connection: duckdb.DuckDBPyConnection, sel: str, limit: int = 10) -> list[dict[str, Any]]:
    """The most frequent reward plugin errors."""
    return fetch(
        connection,
        f"SELECT name, error, count(*) AS rows FROM rewards "
        f"WHERE error IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM {sel}) "
        f"GROUP BY name, error ORDER BY rows DESC, name LIMIT {int(limit)}",
    )


def combined(connection: duckdb.DuckDBPyConnection, sel: str) -> list[dict[str, Any]]:
    """Every selected rollout with its combined reward (``None`` when it has no reward), its
    task, group, status, start time, duration, tool errors and per-name values."""
    rows = fetch(
        connection,
        f"""
        WITH {_per_name_cte(sel)},
        comb AS (
            SELECT rollout_id, {combined_reward_sql("per_name.weight", "per_name")} AS reward, count(*) AS n_rewards,
                   map_from_entries(list(struct_pack(k := name, v := value) ORDER BY name)) AS per_name
            FROM per_name GROUP BY rollout_id
        )
        SELECT r.rollout_id, r.task_id, r.group_id, r.status, r.error, r.start_time, r.duration_ms,
               r.n_llm_calls, r.n_tool_calls, r.n_tool_errors, r.input_tokens, r.output_tokens,
               c.reward, coalesce(c.n_rewards, 0) AS n_rewards, c.per_name
        FROM rollouts r LEFT JOIN comb c USING (rollout_id)
        WHERE r.rollout_id IN (SELECT rollout_id FROM {sel})
        ORDER BY r.start_time, r.rollout_id
        """,
    )
    for row in rows:
        per_name = row.get("per_name")
        row["per_name"] = dict(per_name) if per_name else {}
    return rows


def task_stats(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per task: rollouts, rewarded rollouts, mean/std/min/max combined reward, error rollouts."""
    return _grouped(rows, "task_id")


def group_stats(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per GRPO group: task, rollouts, combined reward mean/std/min/max and spread (max - min)."""
    stats = _grouped([r for r in rows if r.get("group_id") is not None], "group_id")
    tasks: dict[str, set] = {}
    for row in rows:
        if row.get("group_id") is not None:
            tasks.setdefault(row["group_id"], set()).add(row.get("task_id"))
    for stat in stats:
        names = sorted(str(t) for t in tasks.get(stat["group_id"], ()) if t is not None)
        stat["task_id"] = ", ".join(names) if names else None
    return stats


def _grouped(rows: Iterable[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get(key), []).append(row)
    out = []
    for value, members in groups.items():
        rewards = [float(m["reward"]) for m in members if m.get("reward") is not None]
        mean = sum(rewards) / len(rewards) if rewards else None
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards)) if mean is not None else None
        out.append(
            {
                key: value,
                "rollouts": len(members),
                "rewarded": len(rewards),
                "mean": mean,
                "std": std,
                "min": min(rewards) if rewards else None,
                "max": max(rewards) if rewards else None,
                "spread": (max(rewards) - min(rewards)) if rewards else None,
                "errors": sum(1 for m in members if m.get("status") != "ok"),
                "rewards": rewards,
            }
        )
    out.sort(key=lambda s: "" if s[key] is None else str(s[key]))
    return out


# -- tools and tokens -------------------------------------------------------------------------


def tool_table(connection: duckdb.DuckDBPyConnection, sel: str) -> list[dict[str, Any]]:
    """Per tool: calls, errors, error rate and latency (mean, median, p95, max) in ms."""
    return fetch(
        connection,
        f"""
        SELECT tool_name, count(*) AS calls,
               count(*) FILTER (WHERE status = 'error') AS errors,
               count(*) FILTER (WHERE status = 'error') / count(*) AS error_rate,
               avg(duration_ms) AS mean_ms,
               quantile_cont(duration_ms, 0.5) AS p50_ms,
               quantile_cont(duration_ms, 0.95) AS p95_ms,
               max(duration_ms) AS max_ms
        FROM tool_calls WHERE rollout_id IN (SELECT rollout_id FROM {sel})
        GROUP BY tool_name ORDER BY calls DESC, tool_name
        """,
    )


def tool_latencies(connection: duckdb.DuckDBPyConnection, sel: str) -> dict[str, list[float]]:
    """{tool name: the duration in ms of each call}."""
    rows = fetch(
        connection,
        f"SELECT tool_name, duration_ms FROM tool_calls "
        f"WHERE rollout_id IN (SELECT rollout_id FROM {sel}) AND duration_ms IS NOT NULL",
    )
    out: dict[str, list[float]] = {}
    for row in rows:
        out.setdefault(str(row["tool_name"]), []).append(float(row["duration_ms"]))
    return out


def tool_errors(connection: duckdb.DuckDBPyConnection, sel: str, limit: int = 10) -> list[dict[str, Any]]:
    """The most frequent tool errors (tool, error message, count)."""
    return fetch(
        connection,
        f"SELECT tool_name, coalesce(error, error_type, 'error') AS error, count(*) AS calls FROM tool_calls "
        f"WHERE status = 'error' AND rollout_id IN (SELECT rollout_id FROM {sel}) "
        f"GROUP BY ALL ORDER BY calls DESC, tool_name LIMIT {int(limit)}",
    )


def token_models(connection: duckdb.DuckDBPyConnection, sel: str) -> list[dict[str, Any]]:
    """Per model: LLM calls, input/output tokens (total and mean per call), latency."""
    return fetch(
        connection,
        f"""
        SELECT coalesce(response_model, request_model, name) AS model, count(*) AS calls,
               coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens,
               avg(input_tokens) AS mean_input, avg(output_tokens) AS mean_output,
               count(*) FILTER (WHERE status = 'error') AS errors,
               avg(duration_ms) AS mean_ms
        FROM llm_calls WHERE rollout_id IN (SELECT rollout_id FROM {sel})
        GROUP BY ALL ORDER BY calls DESC, model
        """,
    )


def token_rollouts(connection: duckdb.DuckDBPyConnection, sel: str) -> list[dict[str, Any]]:
    """Input and output tokens of each selected rollout that made LLM calls."""
    return fetch(
        connection,
        f"SELECT rollout_id, input_tokens, output_tokens FROM rollouts "
        f"WHERE rollout_id IN (SELECT rollout_id FROM {sel}) AND n_llm_calls > 0",
    )


# -- coordination -----------------------------------------------------------------------------


def coordination(connection: duckdb.DuckDBPyConnection, sel: str) -> dict[str, Any] | None:
    """Event counts by type and, per rollout with coordination events, rounds, votes, restarts,
    agents and consensus (the ``coordination`` reward's definitions); ``None`` when no
    new_answer, vote or restart event was recorded in the selection."""
    types = ", ".join(f"'{t}'" for t in COORDINATION_TYPES)
    present = connection.execute(
        f"SELECT count(*) FROM events WHERE event_type IN ({types}) AND rollout_id IN (SELECT rollout_id FROM {sel})"
    ).fetchall()[0][0]
    if not present:
        return None
    counts = fetch(
        connection,
        f"SELECT event_type, count(*) AS events, count(DISTINCT rollout_id) AS rollouts FROM events "
        f"WHERE rollout_id IN (SELECT rollout_id FROM {sel}) GROUP BY event_type ORDER BY events DESC, event_type",
    )
    rows = fetch(
        connection,
        f"""
        SELECT e.rollout_id, e.event_type, e.round, e.agent_id, e.target, s.step_index
        FROM events e LEFT JOIN steps s
          ON s.rollout_id = e.rollout_id AND s.span_id = e.span_id AND s.event_index = e.event_index AND s.kind = 'event'
        WHERE e.rollout_id IN (SELECT rollout_id FROM {sel})
          AND e.rollout_id IN (SELECT rollout_id FROM events WHERE event_type IN ({types}))
        ORDER BY e.rollout_id, e.time, e.event_index
        """,
    )
    per_rollout: dict[str, list[SimpleNamespace]] = {}
    for position, row in enumerate(rows):
        index = row["step_index"] if row["step_index"] is not None else position
        per_rollout.setdefault(row["rollout_id"], []).append(
            SimpleNamespace(
                event_type=row["event_type"],
                round=row["round"],
                agent_id=row["agent_id"],
                target=row["target"],
                index=index,
            )
        )
    rollouts = [
        {"rollout_id": rollout_id, **coordination_summary(events)} for rollout_id, events in per_rollout.items()
    ]
    rollouts.sort(key=lambda r: r["rollout_id"])
    return {"counts": counts, "rollouts": rollouts}


# -- training ---------------------------------------------------------------------------------


def training_run_count(connection: duckdb.DuckDBPyConnection) -> int:
    """How many training runs the store holds."""
    if not has_table(connection, "training_runs"):
        return 0
    return int(connection.execute("SELECT count(*) FROM training_runs").fetchall()[0][0])


def training_runs(connection: duckdb.DuckDBPyConnection, limit: int = 20) -> list[dict[str, Any]]:
    """The latest ``limit`` training runs, oldest first (runs are not filtered by ``--where``)."""
    if not has_table(connection, "training_runs"):
        return []
    rows = fetch(
        connection,
        f"""
        SELECT run_id, method, model, status, error, n_rows, started_at, finished_at, dataset_sql,
               adapter_path, CAST(final_metrics AS VARCHAR) AS final_metrics,
               epoch_ms(finished_at) - epoch_ms(started_at) AS duration_ms
        FROM training_runs ORDER BY started_at DESC NULLS LAST, run_id LIMIT {int(limit)}
        """,
    )
    for row in rows:
        try:
            row["final_metrics"] = json.loads(row["final_metrics"]) if row["final_metrics"] else {}
        except ValueError:
            row["final_metrics"] = {}
    rows.reverse()  # oldest first, as they were trained
    return rows


def training_metrics(
    connection: duckdb.DuckDBPyConnection, run_ids: Sequence[str]
) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{run_id: {metric name: [(step, value), ...]}} for the given runs, by step."""
    if not run_ids or not has_table(connection, "training_metrics"):
        return {}
    table = pa.table({"run_id": pa.array(list(run_ids), pa.string())})
    connection.register("_arl_report_runs", table)
    try:
        rows = fetch(
            connection,
            "SELECT run_id, name, step, epoch, value FROM training_metrics "
            "WHERE run_id IN (SELECT run_id FROM _arl_report_runs) AND value IS NOT NULL AND isfinite(value) "
            "ORDER BY run_id, name, step NULLS LAST, logged_at",
        )
    finally:
        connection.unregister("_arl_report_runs")
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for row in rows:
        x = row["step"] if row["step"] is not None else row["epoch"]
        if x is None:
            continue
        out.setdefault(row["run_id"], {}).setdefault(row["name"], []).append((float(x), float(row["value"])))
    return out


# -- traces -----------------------------------------------------------------------------------


def trace_data(connection: duckdb.DuckDBPyConnection, rollout_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """For each rollout id: its spans (attributes and events parsed, oldest first), its steps
    ((span_id, event_index or -1) -> step_index) and its reward rows."""
    if not rollout_ids:
        return {}
    table = pa.table({"rollout_id": pa.array(list(rollout_ids), pa.string())})
    connection.register("_arl_report_ids", table)
    try:
        spans = fetch(
            connection,
            "SELECT rollout_id, span_id, parent_span_id, name, start_unix_nano AS start_ns, duration_ms, "
            "status_code, status_message, span_kind, operation, CAST(attributes AS VARCHAR) AS attributes, "
            "CAST(events AS VARCHAR) AS events "
            "FROM spans WHERE rollout_id IN (SELECT rollout_id FROM _arl_report_ids) "
            "ORDER BY rollout_id, start_unix_nano, span_id",
        )
        steps = fetch(
            connection,
            "SELECT rollout_id, step_index, kind, span_id, event_index FROM steps "
            "WHERE rollout_id IN (SELECT rollout_id FROM _arl_report_ids)",
        )
        rewards = fetch(
            connection,
            "SELECT rollout_id, name, step_index, value, source, plugin, label, reason, error, created_at FROM rewards "
            "WHERE rollout_id IN (SELECT rollout_id FROM _arl_report_ids) "
            "ORDER BY rollout_id, step_index NULLS FIRST, name, created_at",
        )
    finally:
        connection.unregister("_arl_report_ids")
    out: dict[str, dict[str, Any]] = {rid: {"spans": [], "steps": {}, "rewards": []} for rid in rollout_ids}
    for span in spans:
        span["attributes"] = _loads(span["attributes"], {})
        span["events"] = _loads(span["events"], [])
        out[span["rollout_id"]]["spans"].append(span)
    for step in steps:
        key = (step["span_id"], step["event_index"] if step["kind"] == "event" else -1)
        out[step["rollout_id"]]["steps"][key] = step["step_index"]
    for reward in rewards:
        out[reward["rollout_id"]]["rewards"].append(reward)
    return out


def _loads(value: Any, default: Any) -> Any:
    if value is None:
        return default
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        return default
    return parsed if isinstance(parsed, type(default)) else default
