"""``agent-rl query SQL``: run a read-only SQL query over the store.

Only reading statements run (SELECT, WITH ... SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN): any
other statement, a data-modifying CTE, or a table function that reads files or URLs is refused
before it reaches DuckDB (:func:`~agent_rl_plugin.store.user_sql.check_user_sql`). The query
then runs on its own locked, read-only DuckDB connection with no file or network access, a time
limit (``--timeout``), a row cap (``--max-rows``; a cut result says so on stderr) and a memory
limit (:func:`~agent_rl_plugin.store.user_sql.run_user_query`). While ``agent-rl serve`` holds
the file (DuckDB then lets no other process open it), the query runs through that receiver's
``POST /query`` (same checks and limits there), found through ``<db>.serve.json`` with its token.
"""

from __future__ import annotations

import typer

from agent_rl_plugin.cli.common import (
    TABLE,
    DbOption,
    Output,
    OutputFormat,
    UserError,
    db_path,
    output_options,
)
from agent_rl_plugin.hookspecs import hookimpl

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
    path: str, sql: str, *, timeout_s: float = 60.0, max_rows: int = 100_000, max_bytes: int = 256 << 20
) -> tuple[list[str], list[tuple], str | None]:
    """Run ``sql`` read-only against the database at ``path``; returns (columns, rows,
    truncated) where ``truncated`` is ``"rows"``/``"bytes"`` when a cap cut the result.

    Raises :class:`UserError` for a refused statement or an SQL error, with the fix.
    """
    from agent_rl_plugin.store.errors import StoreLockedError
    from agent_rl_plugin.store.sql_errors import SqlTooBig
    from agent_rl_plugin.store.user_sql import QueryTimeout, SqlRefused, UserSqlError, run_user_query_rows

    if not sql.strip():
        raise UserError("the query is empty", 'pass a SELECT, e.g. agent-rl query "select * from rollouts"')
    remote = _through_receiver(path, sql)  # a running receiver holds the file: ask it, don't wait for the lock
    if remote is not None:
        return remote
    try:
        result = run_user_query_rows(path, sql, timeout_s=timeout_s, max_rows=max_rows, max_bytes=max_bytes)
    except SqlTooBig as exc:
        raise UserError(str(exc), exc.hint) from None
    except SqlRefused as exc:
        raise UserError(f"agent-rl query only reads the database: {exc}", WRITE_HINT) from None
    except QueryTimeout as exc:
        raise UserError(str(exc), "narrow the query, or pass a larger --timeout") from None
    except UserSqlError as exc:
        raise UserError(str(exc), QUERY_HINT) from None
    except StoreLockedError:
        remote = _through_receiver(path, sql)
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


@output_options()
def query(
    sql: str = typer.Argument(..., help='The SQL to run, e.g. "select * from tool_calls".'),
    db: str = DbOption,
    timeout: float = typer.Option(60.0, "--timeout", min=0.1, help="Stop the query after this many seconds."),
    max_rows: int = typer.Option(100_000, "--max-rows", min=1, help="Return at most this many rows."),
    output: Output = TABLE,
) -> None:
    """Run a read-only SQL query over rollouts, steps, LLM calls, tool calls, events and rewards.

    The table fits the terminal: long values cut, short ids, rounded numbers, and columns that do not fit named below.
    --wide shows every column in full; --json and --csv carry every value in full."""
    columns, rows, truncated = run_query_result(db_path(db), sql, timeout_s=timeout, max_rows=max_rows)
    output.rows(columns, rows)
    if truncated:
        from agent_rl_plugin.cli.common import err_console

        err_console.print(
            f"[yellow]truncated:[/] the result was cut at {len(rows)} rows (the {truncated} cap); "
            "add a LIMIT/WHERE or pass --max-rows",
            highlight=False,
        )


__all__ = ["OutputFormat", "query", "run_query", "run_query_result"]  # OutputFormat now lives in common


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("query")(query)
