"""``agent-rl db info`` and ``agent-rl db migrate``: what a database holds, and upgrading it."""

from __future__ import annotations

import os

import typer

from agent_rl_plugin.cli.common import (
    TABLE,
    DbOption,
    JsonOption,
    Output,
    console,
    db_path,
    output_options,
    print_json,
)
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Inspect or upgrade the DuckDB store.", no_args_is_help=True)

COUNTED = ("spans", "rewards", "rollouts", "steps", "llm_calls", "tool_calls", "events")


def database_info(path: str) -> dict:
    """Path, size, applied migrations and row counts of the tables and views."""
    from agent_rl_plugin.store import MIGRATIONS_TABLE

    _, migrations = run_query(path, f"select name, applied_at from {MIGRATIONS_TABLE} order by applied_at, name")
    counts_sql = " union all ".join(f"select '{name}' as name, count(*) as n from {name}" for name in COUNTED)
    _, counts = run_query(path, counts_sql)
    return {
        "path": os.path.abspath(path),
        "size_bytes": os.path.getsize(path),
        "migrations": [{"name": name, "applied_at": applied_at} for name, applied_at in migrations],
        "row_counts": {name: n for name, n in counts},
    }


@app.command("info")
@output_options("table", "json")
def info(db: str = DbOption, output: Output = TABLE) -> None:
    """The database's path, size, applied migrations and row counts."""
    data = database_info(db_path(db))
    if output.json:
        print_json(data)
        return
    console.print(f"[bold]database[/] {data['path']} ({data['size_bytes'] / 1024:.0f} KiB)")
    console.print(
        f"[bold]migrations[/] {len(data['migrations'])} applied, latest {data['migrations'][-1]['name'] if data['migrations'] else '-'}"
    )
    output.rows(["table or view", "rows"], list(data["row_counts"].items()))


@app.command("migrate")
def migrate(db: str = DbOption, json_output: bool = JsonOption) -> None:
    """Create the database if needed and apply any migrations it lacks."""
    from agent_rl_plugin.store import ensure_schema

    path = db_path(db)
    applied = ensure_schema(path)
    if json_output:
        print_json({"path": os.path.abspath(path), "applied": applied})
    else:
        console.print(
            f"{os.path.abspath(path)}: {len(applied)} migration(s) applied"
            + (f": {', '.join(applied)}" if applied else "")
        )


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="db")
