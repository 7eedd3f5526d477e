"""The rollouts list and its filters (``GET api/rollouts``, ``GET api/facets``).

Contract: :func:`list_rollouts` takes the page's query parameters (:class:`ListFilter`, built
and validated by :meth:`ListFilter.from_params`, which raises :class:`BadParameter` naming the
parameter) and answers ``{"rows", "total", "limit", "offset"}``. Exact filters and ranges are
bound parameters of fixed SQL. The two filters that are SQL themselves (``where``, and ``run``
whose rollouts are the run's recorded ``dataset_sql``) run first through the backend's locked
user-SQL path; only the rollout ids they select reach the fixed query. ``label*`` columns are
the current label (:data:`~agent_rl_plugin.rewards.labels.CURRENT_LABEL_ROWS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.rewards.labels import CURRENT_LABEL_ROWS
from agent_rl_plugin.store.sql_errors import check_sql_size
from agent_rl_plugin.store.user_sql import check_condition
from agent_rl_plugin.ui.backend import Backend
from agent_rl_plugin.ui.rows import fetch_dicts, json_value, preview

SORTS = ("start_time", "total_reward", "duration_ms", "n_spans", "n_llm_calls", "n_tool_calls", "task_id", "status")
QUEUES = ("unlabelled", "disagreeing")
MAX_LIMIT = 500
#: Most rollout ids a ``where`` or ``run`` filter may select.
MAX_SELECTED = 100_000
#: How far apart two labels, or a label and total_reward, must be to disagree.
DISAGREEMENT = 0.5

CURRENT_LABELS_SQL = f"""SELECT rollout_id, arg_max(label, created_at) AS label,
    arg_max(value, created_at) AS label_value, arg_max(score, created_at) AS label_score,
    arg_max(labeller, created_at) AS labeller
FROM labels WHERE {CURRENT_LABEL_ROWS} GROUP BY rollout_id"""

DISAGREEING_SQL = f"""SELECT rollout_id FROM (
    SELECT rollout_id, labeller, arg_max(value, created_at) AS v FROM labels
    WHERE {CURRENT_LABEL_ROWS} AND value IS NOT NULL GROUP BY rollout_id, labeller
) GROUP BY rollout_id HAVING max(v) - min(v) >= {DISAGREEMENT}
UNION
SELECT c.rollout_id FROM ({CURRENT_LABELS_SQL}) c JOIN rollouts r USING (rollout_id)
WHERE c.label_value IS NOT NULL AND r.total_reward IS NOT NULL
  AND abs(c.label_value - r.total_reward) >= {DISAGREEMENT}"""

_TEXT_COLUMNS = ("rollout_id", "task_id", "group_id", "name", "agent_name", "input", "output", "error")


class BadParameter(AgentRLError, ValueError):
    """A query parameter of the UI's API is not valid; ``str(error)`` names it and why."""


def _number(params: Mapping[str, str], name: str) -> float | None:
    text = (params.get(name) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise BadParameter(f"{name} must be a number, not {text[:40]!r}") from None


def _integer(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = (params.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadParameter(f"{name} must be a whole number, not {text[:40]!r}") from None
    if not low <= value <= high:
        raise BadParameter(f"{name} must be between {low} and {high}, not {value}")
    return value


@dataclass(frozen=True)
class ListFilter:
    """The rollouts list's parameters (``docs/ui.md``)."""

    task: str | None = None
    group: str | None = None
    agent: str | None = None
    status: str | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    run: str | None = None
    q: str | None = None
    where: str | None = None
    queue: str | None = None
    sort: str = "start_time"
    order: str = "desc"
    limit: int = 100
    offset: int = 0

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> ListFilter:
        """Validated parameters; raises :class:`BadParameter`."""

        def text(name: str) -> str | None:
            value = (params.get(name) or "").strip()
            if len(value) > 10_000:
                raise BadParameter(f"{name} is too long")
            return value or None

        sort = text("sort") or "start_time"
        if sort not in SORTS:
            raise BadParameter(f"sort must be one of {', '.join(SORTS)}, not {sort[:40]!r}")
        order = (text("order") or "desc").lower()
        if order not in ("asc", "desc"):
            raise BadParameter(f"order must be asc or desc, not {order[:40]!r}")
        queue = text("queue")
        if queue not in (None, "all", *QUEUES):
            raise BadParameter(f"queue must be one of all, {', '.join(QUEUES)}, not {queue[:40]!r}")
        return cls(
            task=text("task"),
            group=text("group"),
            agent=text("agent"),
            status=text("status"),
            min_reward=_number(params, "min_reward"),
            max_reward=_number(params, "max_reward"),
            run=text("run"),
            q=text("q"),
            where=text("where"),
            queue=None if queue == "all" else queue,
            sort=sort,
            order=order,
            limit=_integer(params, "limit", 100, 1, MAX_LIMIT),
            offset=_integer(params, "offset", 0, 0, 1 << 40),
        )


def run_rollout_ids(backend: Backend, run_id: str, *, timeout_s: float | None = None) -> list[str]:
    """The rollout ids a training run's recorded ``dataset_sql`` selects now (user-SQL path,
    within ``timeout_s``). Raises :class:`BadParameter` for an unknown run, a run without a
    query, or :class:`~agent_rl_plugin.store.user_sql.UserSqlError` for a query that fails."""
    with backend.reader() as connection:
        found = connection.execute("SELECT dataset_sql FROM training_runs WHERE run_id = ?", [run_id]).fetchall()
    if not found:
        raise BadParameter(f"no training run {run_id[:80]!r}", "pick one from the training runs list")
    sql = (found[0][0] or "").strip().rstrip(";")
    if not sql.lower().startswith(("select", "with", "from")):
        raise BadParameter(f"training run {run_id[:80]} has no recorded dataset query to select its rollouts")
    check_sql_size(sql)
    result = backend.user_query(
        f"SELECT DISTINCT rollout_id FROM ({sql}) AS run_rows", max_rows=MAX_SELECTED, timeout_s=timeout_s
    )
    return [str(row[0]) for row in result.rows if row[0] is not None]


def where_rollout_ids(backend: Backend, where: str) -> list[str]:
    """The ids of the rollouts matching the user's ``where`` condition (user-SQL path)."""
    check_sql_size(where)
    sql = check_condition(where, "SELECT rollout_id FROM rollouts WHERE ({where})")
    return [str(row[0]) for row in backend.user_query(sql, max_rows=MAX_SELECTED).rows]


def list_rollouts(backend: Backend, spec: ListFilter) -> dict[str, Any]:
    """One page of the rollouts list (see the module contract)."""
    conditions: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("task_id", spec.task),
        ("group_id", spec.group),
        ("agent_name", spec.agent),
        ("status", spec.status),
    ):
        if value is not None:
            conditions.append(f"r.{column} = ?")
            params.append(value)
    if spec.min_reward is not None:
        conditions.append("r.total_reward >= ?")
        params.append(spec.min_reward)
    if spec.max_reward is not None:
        conditions.append("r.total_reward <= ?")
        params.append(spec.max_reward)
    if spec.q:
        needle = "%" + spec.q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        conditions.append(
            "(" + " OR ".join(f"lower(CAST(r.{c} AS VARCHAR)) LIKE ? ESCAPE '\\'" for c in _TEXT_COLUMNS) + ")"
        )
        params.extend([needle] * len(_TEXT_COLUMNS))
    if spec.run:  # a run trained on rollouts recorded before it started
        conditions.append("r.start_time <= (SELECT started_at FROM training_runs WHERE run_id = ?)")
        params.append(spec.run)
    for ids in (
        run_rollout_ids(backend, spec.run) if spec.run else None,
        where_rollout_ids(backend, spec.where) if spec.where else None,
    ):
        if ids is not None:
            conditions.append("list_contains(?, r.rollout_id)")
            params.append(ids)
    if spec.queue == "unlabelled":
        conditions.append("c.rollout_id IS NULL")
    elif spec.queue == "disagreeing":
        conditions.append(f"r.rollout_id IN ({DISAGREEING_SQL})")
    where = " WHERE " + " AND ".join(conditions) if conditions else ""
    source = (
        f"FROM rollouts r LEFT JOIN ({CURRENT_LABELS_SQL}) c USING (rollout_id) "
        "LEFT JOIN (SELECT rollout_id, count(*) AS n_labels FROM labels GROUP BY rollout_id) n USING (rollout_id)"
    )
    order = f"r.{spec.sort} {spec.order.upper()} NULLS LAST, r.rollout_id"
    with backend.reader() as connection:
        total = connection.execute(f"SELECT count(*) {source}{where}", params).fetchall()[0][0]
        rows = fetch_dicts(
            connection,
            "SELECT r.rollout_id, r.task_id, r.group_id, r.name, r.agent_name, r.status, r.error, r.start_time, "
            "r.duration_ms, r.total_reward, r.n_spans, r.n_llm_calls, r.n_tool_calls, r.n_tool_errors, "
            "r.input_tokens, r.output_tokens, r.input, r.output, c.label, c.label_value, c.label_score, c.labeller, "
            f"coalesce(n.n_labels, 0) AS n_labels {source}{where} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, spec.limit, spec.offset],
        )
    for row in rows:
        row["input_preview"] = preview(row.pop("input"))
        row["output_preview"] = preview(row.pop("output"))
    return {"rows": rows, "total": int(total), "limit": spec.limit, "offset": spec.offset}


def facets(backend: Backend) -> dict[str, Any]:
    """The choices of the list's filters (``GET api/facets``)."""
    with backend.reader() as connection:

        def distinct(column: str, limit: int = 1000) -> list[str]:
            rows = connection.execute(
                f"SELECT {column} FROM rollouts WHERE {column} IS NOT NULL GROUP BY {column} "
                f"ORDER BY max(start_time) DESC NULLS LAST, {column} LIMIT {limit}"
            ).fetchall()
            return [str(row[0]) for row in rows]

        answer: dict[str, Any] = {
            "tasks": sorted(distinct("task_id")),
            "groups": distinct("group_id"),
            "agents": sorted(distinct("agent_name")),
            "statuses": sorted(distinct("status")),
        }
        low, high, n = connection.execute(
            "SELECT min(total_reward), max(total_reward), count(*) FROM rollouts"
        ).fetchall()[0]
        answer["reward_range"] = [json_value(low), json_value(high)]
        answer["n_rollouts"] = int(n)
        answer["training_runs"] = fetch_dicts(
            connection,
            "SELECT run_id, method, model, status, started_at FROM training_runs ORDER BY started_at DESC LIMIT 200",
        )
    return answer
