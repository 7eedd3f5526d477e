"""The body of ``agent-rl query`` and the read-only query helper of the other commands, without
typer: the typer command (:mod:`agent_rl_plugin.cli.query`) and the fast path
(:mod:`agent_rl_plugin.cli.fast_path`) both run :func:`query_command`, so both print the same.

Security is in :func:`run_query_result`: every statement goes through
:func:`~agent_rl_plugin.store.user_sql.run_user_query_rows` (refusal of anything but reading,
time, row, byte and memory limits), or through the running receiver's ``POST /query`` (same
checks there) while ``agent-rl serve`` holds the file.
"""

from __future__ import annotations

from typing import Any, Callable

from agent_rl_plugin.cli.common import Output, UserError, db_path

#: ``--timeout``: default and lower bound (seconds); ``--max-rows``: default and lower bound.
QUERY_TIMEOUT_S = 60.0
QUERY_TIMEOUT_MIN_S = 0.1
QUERY_MAX_ROWS = 100_000
QUERY_MAX_ROWS_MIN = 1

QUERY_HINT = (
    "tables and views: spans, rewards, rollouts, steps, llm_calls, tool_calls, events "
    '(see docs/schema.md, or `agent-rl query "show tables"`)'
)
WRITE_HINT = (
    "use SELECT (or DESCRIBE/SHOW/SUMMARIZE); scores are written by `agent-rl score`, files loaded by `agent-rl ingest`"
)


def run_query(path: str, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` read-only against the database at ``path``; returns (columns, rows).

    The other commands' helper: no row cap (their own SQL), a 10-minute limit. Raises
    :class:`UserError` for a refused statement or an SQL error, with the fix.
    """
    columns, rows, _ = run_query_result(path, sql, timeout_s=600.0, max_rows=1 << 62, max_bytes=1 << 62)
    return columns, rows


def run_query_result(
    path: str,
    sql: str,
    *,
    timeout_s: float = QUERY_TIMEOUT_S,
    max_rows: int = QUERY_MAX_ROWS,
    max_bytes: int = 256 << 20,
) -> tuple[list[str], list[tuple], str | None]:
    """Run ``sql`` read-only against the database at ``path``; returns (columns, rows,
    truncated) where ``truncated`` is ``"rows"``/``"bytes"`` when a cap cut the result.

    Raises :class:`UserError` for a refused statement or an SQL error, with the fix.
    """
    from agent_rl_plugin.store.user_sql import run_user_query_rows

    if not sql.strip():
        raise UserError("the query is empty", 'pass a SELECT, e.g. agent-rl query "select * from rollouts"')
    return _run_read_only(
        path, sql, lambda: run_user_query_rows(path, sql, timeout_s=timeout_s, max_rows=max_rows, max_bytes=max_bytes)
    )


def run_own_query(
    path: str, sql: str, params: dict[str, Any], remote_sql: str, overlay_sql: str | None = None
) -> tuple[list[str], list[tuple]]:
    """(columns, rows) of a command's own SQL against the database at ``path``, as
    :func:`run_query` gives them, without the user-SQL check
    (:func:`~agent_rl_plugin.store.user_sql.run_own_query_rows`: the same locked read-only
    connection, limits and errors). ``sql`` holds no text from the user: the user's values are
    in ``params``, bound to its ``$name`` parameters by DuckDB. ``remote_sql`` is the same
    statement with those values written in as SQL literals: what a running ``agent-rl serve``
    gets (its ``/query`` takes SQL text only, and checks it as user SQL). ``overlay_sql`` runs
    instead where the connection shows unmerged spool segments (see ``run_own_query_rows``)."""
    from agent_rl_plugin.store.user_sql import run_own_query_rows

    def local() -> Any:
        return run_own_query_rows(
            path, sql, params, timeout_s=600.0, max_rows=1 << 62, max_bytes=1 << 62, overlay_sql=overlay_sql
        )

    columns, rows, _ = _run_read_only(path, remote_sql, local)
    return columns, rows


def _run_read_only(path: str, remote_sql: str, local: Callable[[], Any]) -> tuple[list[str], list[tuple], str | None]:
    """(columns, rows, truncated) from ``agent-rl serve`` when it holds ``path`` (``remote_sql``),
    else from ``local()`` (a :class:`~agent_rl_plugin.store.user_sql.QueryRows`), its errors as
    :class:`UserError` with the fix; a lock taken meanwhile by a receiver sends it there."""
    from agent_rl_plugin.store.errors import StoreLockedError
    from agent_rl_plugin.store.sql_errors import QueryTimeout, SqlRefused, SqlTooBig, UserSqlError

    remote = _through_receiver(path, remote_sql)  # a running receiver holds the file: ask it, don't wait for the lock
    if remote is not None:
        return remote
    try:
        result = local()
    except SqlTooBig as exc:
        raise UserError(str(exc), exc.hint) from None
    except SqlRefused as exc:
        raise UserError(f"agent-rl query only reads the database: {exc}", WRITE_HINT) from None
    except QueryTimeout as exc:
        raise UserError(str(exc), "narrow the query, or pass a larger --timeout") from None
    except UserSqlError as exc:
        raise UserError(str(exc), QUERY_HINT) from None
    except StoreLockedError:
        remote = _through_receiver(path, remote_sql)
        if remote is None:
            raise
        return remote
    return result.columns, result.rows, result.reason


def _through_receiver(path: str, sql: str) -> tuple[list[str], list[tuple], str | None] | None:
    """(columns, rows, truncated) from the running ``agent-rl serve`` of ``path``, or ``None``.
    The receiver's client (pyarrow, the receiver package) is imported only when one runs."""
    from agent_rl_plugin.store.announcements import find_receiver

    info = find_receiver(path)
    if info is None:
        return None
    from agent_rl_plugin.receiver.client import RemoteQueryError, remote_query_table

    try:
        table, truncated = remote_query_table(info, sql)
    except RemoteQueryError as exc:
        text = str(exc)
        raise UserError(text, WRITE_HINT if "only read" in text else QUERY_HINT) from None
    except OSError:
        return None
    rows = list(zip(*(column.to_pylist() for column in table.columns))) if table.num_columns else []
    return list(table.column_names), rows, truncated


def query_command(sql: str, db: str | None, timeout: float, max_rows: int, output: Output) -> None:
    """What ``agent-rl query SQL`` does once its options are parsed: run ``sql`` against the
    database of ``db`` (:func:`~agent_rl_plugin.cli.common.db_path`), print the rows in
    ``output``'s format and, when a cap cut the result, say so on stderr. Raises
    :class:`UserError` (refused SQL, SQL error, time limit)."""
    columns, rows, truncated = run_query_result(db_path(db), sql, timeout_s=timeout, max_rows=max_rows)
    output.rows(columns, rows)
    if truncated:
        from agent_rl_plugin.cli.common import err_console

        err_console.print(
            f"[yellow]truncated:[/] the result was cut at {len(rows)} rows (the {truncated} cap); "
            "add a LIMIT/WHERE or pass --max-rows",
            highlight=False,
        )
