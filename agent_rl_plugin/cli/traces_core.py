"""The body of ``agent-rl traces list``, without typer: the typer command
(:mod:`agent_rl_plugin.cli.traces`) and the fast path (:mod:`agent_rl_plugin.cli.fast_path`)
both run :func:`list_traces_command`, so both print the same.

``list`` reads the ``rollouts`` view's rows for the newest rollouts only
(:func:`newest_rollouts_source`): the view aggregates every span and scores every rollout's
rewards, which costs most of the command on a large store, while ``list`` shows ``--limit`` of
them. The rows are the view's own, so the output is the same.
"""

from __future__ import annotations

from typing import Callable

from agent_rl_plugin.cli.common import Output, UserError, db_path
from agent_rl_plugin.cli.query_core import run_own_query

#: ``--limit``: default and lower bound.
LIST_LIMIT = 20
LIST_LIMIT_MIN = 1

#: ``traces list`` as a table: (column, header), most telling first, so a narrow terminal
#: leaves out the start time and not the reward (JSON and CSV keep the query's names and order).
LIST_TABLE_COLUMNS = (
    ("rollout_id", "rollout"),
    ("task_id", "task"),
    ("group_id", "group"),
    ("status", "status"),
    ("total_reward", "reward"),
    ("n_llm_calls", "llm"),
    ("n_tool_calls", "tools"),
    ("n_tool_errors", "errors"),
    ("duration_ms", "ms"),
    ("start_time", "started"),
)


def _is_text(value: str) -> bool:
    """False for a value holding lone surrogates (undecodable bytes of a command line)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# The newest rollouts, from the view's own SQL (``store.views.CURRENT_VIEWS``), cut down: the
# span aggregate (``members``) and the rewards (``latest`` of ``episode_rewards``, read through
# ``emitted``) keep only the rollouts of ``_newest``. Both filters are on the column the
# aggregate groups by and the reward windows partition by, so every kept rollout gets the rows
# the whole view gives it. Each anchor must occur exactly once, else the plain view is read.
_VIEW_HEAD = "CREATE OR REPLACE VIEW rollouts AS\nWITH members AS ("
_REWARDS_HEAD = "CREATE OR REPLACE VIEW episode_rewards AS\n"
_MEMBERS_SCAN = "    FROM spans\n    GROUP BY rollout_id\n"
_EMITTED_SCAN = "    FROM episode_rewards e\n"
_REWARDS_SCAN = "    FROM rewards\n"
_KEPT = "(SELECT rollout_id FROM _newest)"

#: Above this ``--limit`` the whole view is read: cutting it down then costs more than it saves.
NEWEST_MAX = 5000


def _rollouts_view_parts() -> tuple[str, str] | None:
    """(rollouts, episode_rewards) view bodies when their SQL has every anchor, else ``None``."""
    from agent_rl_plugin.store.views import CURRENT_VIEWS

    rollouts, rewards = CURRENT_VIEWS["rollouts"], CURRENT_VIEWS["episode_rewards"]
    if not (rollouts.startswith(_VIEW_HEAD) and rewards.startswith(_REWARDS_HEAD)):
        return None
    if (rollouts.count(_MEMBERS_SCAN), rollouts.count(_EMITTED_SCAN), rewards.count(_REWARDS_SCAN)) != (1, 1, 1):
        return None
    return rollouts[len(_VIEW_HEAD) :], rewards[len(_REWARDS_HEAD) :]


def newest_rollouts_source(limit: int, root_filters: list[str] | None = None) -> str:
    """A relation for ``FROM`` that holds the ``rollouts`` view's rows of (at least) the newest
    ``limit`` rollouts by ``start_time`` that pass ``root_filters`` (SQL conditions on the root
    span's ``task_id`` / ``group_id``), aliased ``rollouts``; ``"rollouts"`` (the view itself)
    when ``limit`` is below 1 or above :data:`NEWEST_MAX`, or the view's SQL no longer has the
    expected shape.

    ``ORDER BY start_time DESC LIMIT limit`` (with the same filters) over it gives what it gives
    over the view. A rollout's ``start_time`` and ids are its root span's (the earliest
    ``is_rollout_root`` span by start and span id, as in the view); every rollout whose start is
    at least the ``limit``-th newest is kept (ties included; every one when fewer rollouts pass,
    or when the cut is a NULL start), and only these rollouts' spans and rewards are read, through
    the indexes on ``rollout_id``. The root's values are taken NULLs included (``arg_min_null``),
    as the view takes the root's row: a root without a task neither matches a filter nor holds a
    place in the cut for another root of its rollout."""
    parts = _rollouts_view_parts() if 1 <= limit <= NEWEST_MAX else None
    if parts is None:
        return "rollouts"
    rollouts, rewards = parts
    key = "(start_unix_nano, span_id)"
    where = f"WHERE {' AND '.join(root_filters)}" if root_filters else ""
    newest = f"""WITH _newest_roots AS (
    SELECT rollout_id, arg_min_null(start_time, {key}) AS start_time, arg_min_null(task_id, {key}) AS task_id,
        arg_min_null(group_id, {key}) AS group_id
    FROM spans
    WHERE is_rollout_root
    GROUP BY rollout_id
),
_newest_kept AS (SELECT rollout_id, start_time FROM _newest_roots {where}),
_newest_cut AS (SELECT start_time FROM _newest_kept ORDER BY start_time DESC LIMIT 1 OFFSET {int(limit) - 1}),
_newest AS (
    SELECT rollout_id FROM _newest_kept
    WHERE (SELECT start_time FROM _newest_cut) IS NULL OR start_time >= (SELECT start_time FROM _newest_cut)
),
members AS ("""
    kept_rewards = rewards.replace(
        _REWARDS_SCAN, f"    FROM (SELECT * FROM rewards WHERE rollout_id IN {_KEPT}) AS rewards\n"
    )
    # The anchors are replaced in the view's SQL only: ``newest`` holds the caller's filters,
    # whose literals may hold an anchor's text (a ``--task`` value with newlines).
    body = rollouts.replace(
        _MEMBERS_SCAN, f"    FROM spans\n    WHERE rollout_id IN {_KEPT}\n    GROUP BY rollout_id\n"
    )
    body = body.replace(_EMITTED_SCAN, f"    FROM ({kept_rewards}) e\n")
    return f"({newest}{body}) AS rollouts"


#: The ``traces list`` filters: (option, column, parameter name).
_FILTERS = (("--task", "task_id", "task"), ("--group", "group_id", "group"), ("--status", "status", "status"))


def list_sql(limit: int, values: dict[str, str], value_sql: Callable[[str], str], newest: bool = True) -> str:
    """The ``traces list`` statement for the ``limit`` newest rollouts passing the filters in
    ``values`` (parameter name of :data:`_FILTERS` to value; only those given). ``value_sql(name)``
    is what stands for a value in the SQL: a ``$name`` parameter (the local query, which binds
    the values) or the value as an SQL literal (the SQL a running receiver gets). ``newest``
    false: read the ``rollouts`` view whole (:func:`newest_rollouts_source` finds roots by
    ``rowid``, which a connection showing unmerged spool segments has not: its ``spans`` is a view)."""
    limit = int(limit)
    conditions = {name: f"{column} = {value_sql(name)}" for _, column, name in _FILTERS if name in values}
    filters = list(conditions.values())
    roots = [conditions[name] for name in ("task", "group") if name in conditions]
    where = f"where {' and '.join(filters)}" if filters else ""
    source = "rollouts" if "status" in values or not newest else newest_rollouts_source(limit, roots)
    return (
        "select rollout_id, task_id, group_id, status, start_time, round(duration_ms, 1) as duration_ms, "
        "n_llm_calls, n_tool_calls, n_tool_errors, total_reward "
        f"from {source} {where} order by start_time desc limit {limit}"
    )


def list_traces_command(
    db: str | None, limit: int, task: str | None, group: str | None, status: str | None, output: Output
) -> None:
    """What ``agent-rl traces list`` does once its options are parsed: the ``limit`` newest
    rollouts (only those of ``task``, ``group``, ``status`` when given) of the database of
    ``db``, printed in ``output``'s format (a table with :data:`LIST_TABLE_COLUMNS`, JSON or
    CSV with the query's columns). Raises :class:`~agent_rl_plugin.cli.common.UserError` (an
    SQL error, a value that is not UTF-8 text) and the store's errors (no database file).

    The statement is the package's own: the filter values are bound as parameters, never
    written into it, so it runs without the user-SQL check
    (:func:`~agent_rl_plugin.cli.query_core.run_own_query`) on the same locked read-only
    connection; a running receiver gets it with the values as SQL literals, and checks it."""
    given = {"task": task, "group": group, "status": status}
    for flag, _, name in _FILTERS:
        value = given[name]
        if value and not _is_text(value):
            raise UserError(f"{flag} is not UTF-8 text", f"pass {flag} as UTF-8 text")
    values = {name: value for name, value in given.items() if value}
    sql = list_sql(limit, values, lambda name: f"${name}")
    remote_sql = list_sql(limit, values, lambda name: _sql_literal(values[name]))
    overlay_sql = list_sql(limit, values, lambda name: f"${name}", newest=False)
    columns, rows = run_own_query(db_path(db), sql, values, remote_sql, overlay_sql)
    if output.format != "table":
        output.rows(columns, rows, title="rollouts")
        return
    order = [columns.index(name) for name, _ in LIST_TABLE_COLUMNS]
    output.rows([header for _, header in LIST_TABLE_COLUMNS], [[row[i] for i in order] for row in rows], "rollouts")
