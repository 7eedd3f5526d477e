"""``agent-rl query SQL``: run a read-only SQL query over the store.

Only reading statements run (SELECT, WITH ... SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN): any
other statement, a data-modifying CTE, or a table function that reads files or URLs is refused
before it reaches DuckDB (:func:`~agent_rl_plugin.store.user_sql.check_user_sql`). The query
then runs on its own locked, read-only DuckDB connection with no file or network access, a time
limit (``--timeout``), a row cap (``--max-rows``; a cut result says so on stderr) and a memory
limit (:func:`~agent_rl_plugin.store.user_sql.run_user_query`). While ``agent-rl serve`` holds
the file (DuckDB then lets no other process open it), the query runs through that receiver's
``POST /query`` (same checks and limits there), found through ``<db>.serve.json`` with its token.

The body is :func:`~agent_rl_plugin.cli.query_core.query_command` (typer-free, shared with the
fast path of :mod:`agent_rl_plugin.cli.fast_path`); this module adds the typer command.
"""

from __future__ import annotations

import typer

from agent_rl_plugin.cli.common import TABLE, DbOption, Output, OutputFormat, output_options
from agent_rl_plugin.cli.query_core import (
    QUERY_HINT,
    QUERY_MAX_ROWS,
    QUERY_MAX_ROWS_MIN,
    QUERY_TIMEOUT_MIN_S,
    QUERY_TIMEOUT_S,
    WRITE_HINT,
    _through_receiver,
    query_command,
    run_query,
    run_query_result,
)
from agent_rl_plugin.hookspecs import hookimpl


@output_options()
def query(
    sql: str = typer.Argument(..., help='The SQL to run, e.g. "select * from tool_calls".'),
    db: str = DbOption,
    timeout: float = typer.Option(
        QUERY_TIMEOUT_S, "--timeout", min=QUERY_TIMEOUT_MIN_S, help="Stop the query after this many seconds."
    ),
    max_rows: int = typer.Option(
        QUERY_MAX_ROWS, "--max-rows", min=QUERY_MAX_ROWS_MIN, help="Return at most this many rows."
    ),
    output: Output = TABLE,
) -> None:
    """Run a read-only SQL query over rollouts, steps, LLM calls, tool calls, events and rewards.

    The table fits the terminal: long values cut, short ids, rounded numbers, and columns that do not fit named below.
    --wide shows every column in full; --json and --csv carry every value in full."""
    query_command(sql, db, timeout, max_rows, output)


# OutputFormat now lives in common; the query helpers in query_core (importable from here as before).
__all__ = [
    "QUERY_HINT",
    "WRITE_HINT",
    "OutputFormat",
    "_through_receiver",
    "query",
    "query_command",
    "run_query",
    "run_query_result",
]


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("query")(query)
