"""``agent-rl query SQL``: run a read-only SQL query over the store.

Only reading statements run (SELECT, WITH ... SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN); any
other statement is refused before it reaches DuckDB, and the connection itself is read-only.
While ``agent-rl serve`` holds the file (DuckDB then lets no other process open it), the query
runs through that receiver's read-only ``POST /query``, found through ``<db>.serve.json``.
"""

from __future__ import annotations

from enum import Enum

import duckdb
import typer

from agent_rl_plugin.cli.common import DbOption, UserError, db_path, print_rows
from agent_rl_plugin.hookspecs import hookimpl

QUERY_HINT = (
    "tables and views: spans, rewards, rollouts, steps, llm_calls, tool_calls, events "
    "(see docs/schema.md, or `agent-rl query \"show tables\"`)"
)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def run_query(path: str, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` read-only against the database at ``path``; returns (columns, rows).

    Raises :class:`UserError` for a writing statement or an SQL error, with the fix.
    """
    from agent_rl_plugin.store import StoreLockedError, is_read_only_sql, open_reader

    if not sql.strip():
        raise UserError("the query is empty", "pass a SELECT, e.g. agent-rl query \"select * from rollouts\"")
    try:
        read_only = is_read_only_sql(sql)
    except duckdb.Error as exc:
        raise UserError(f"SQL error: {_first_line(exc)}", QUERY_HINT) from None
    if not read_only:
        raise UserError(
            "agent-rl query only reads: this statement would change the database or files, so it was refused",
            "use SELECT (or DESCRIBE/SHOW/SUMMARIZE); scores are written by `agent-rl score`",
        )
    try:
        connection = open_reader(path, snapshot=False)  # a receiver answers /query without a copy
    except StoreLockedError:
        remote = _through_receiver(path, sql)
        if remote is None:
            raise
        return remote
    try:
        result = connection.execute(sql)
        columns = [d[0] for d in result.description] if result.description else []
        rows = result.fetchall() if columns else []
    except duckdb.Error as exc:
        raise UserError(f"SQL error: {_first_line(exc)}", QUERY_HINT) from None
    finally:
        connection.close()
    return columns, rows


def _through_receiver(path: str, sql: str) -> tuple[list[str], list[tuple]] | None:
    """(columns, rows) from the running ``agent-rl serve`` of ``path``, or ``None`` if there is none."""
    from agent_rl_plugin.receiver.client import RemoteQueryError, find_receiver, remote_query

    info = find_receiver(path)
    if info is None:
        return None
    try:
        return remote_query(info, sql)
    except RemoteQueryError as exc:
        raise UserError(str(exc), QUERY_HINT) from None
    except OSError:
        return None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def query(
    sql: str = typer.Argument(..., help="The SQL to run, e.g. \"select * from tool_calls\"."),
    db: str = DbOption,
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="Output format."),
    json_output: bool = typer.Option(False, "--json", help="Same as --format json."),
) -> None:
    """Run a read-only SQL query over rollouts, steps, LLM calls, tool calls, events and rewards."""
    columns, rows = run_query(db_path(db), sql)
    print_rows(columns, rows, "json" if json_output else fmt.value)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("query")(query)
