"""``agent-rl tasks import FILE`` and ``agent-rl tasks list``: tasks with their ground truth.

A task file is JSONL (one object per line), JSON (a list of objects) or CSV (a header row).
Each task has ``task_id`` (required), ``prompt``, ``ground_truth`` (any JSON; ``answer`` is
accepted too) and ``metadata`` (an object); any other key goes into ``metadata``. In CSV,
``ground_truth`` and ``metadata`` cells holding JSON are parsed (``42`` is a number, ``Paris``
stays text). Rows replace the stored task with the same ``task_id``.

The file format and its parser live in :mod:`agent_rl_plugin.rollouts.task_io` (the rollout
runner reads the same files). Import is all or nothing: if any line is bad, the error names each bad line and nothing is
written, unless ``--skip-bad`` (then the good lines are imported and the bad ones reported).
Rewards read ground truth from the rollout's metadata first, then from this table.
"""

from __future__ import annotations

import typer

from agent_rl_plugin.cli.common import (
    TABLE,
    DbOption,
    JsonOption,
    Output,
    UserError,
    db_path,
    output_options,
    print_json,
)
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.cli.score import fail_plain, say
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.rollouts.task_io import (  # re-exported: the task-file logic lives in rollouts
    BadLine,
    TaskFileError,
    TaskRow,
    parse_tasks_file,
    task_from_object,
    write_tasks,
)
from agent_rl_plugin.rollouts.tasks import describe_bad

app = typer.Typer(help="Import tasks with ground truth, and list them.", no_args_is_help=True)


@app.command("import")
def import_tasks(
    file: str = typer.Argument(..., help="A .jsonl, .json or .csv file of tasks."),
    db: str = DbOption,
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Import the good lines and report the bad ones."),
    json_output: bool = JsonOption,
) -> None:
    """Import tasks (task_id, prompt, ground_truth, metadata), replacing those with the same id."""
    path = db_path(db)
    try:
        tasks, bad = parse_tasks_file(file)
        if bad and not skip_bad:
            raise UserError(
                describe_bad(file, bad) + "; nothing was imported",
                "fix those lines, or pass --skip-bad to import the others",
            )
        new, replaced = write_tasks(path, tasks)
    except (UserError, TaskFileError) as exc:
        fail_plain(str(exc), exc.hint)
    summary = {
        "imported": new + replaced,
        "new": new,
        "replaced": replaced,
        "database": path,
        "bad": [{"line": b.line, "error": b.error} for b in bad],
    }
    if json_output:
        print_json(summary)
        return
    say(f"Imported {new + replaced} tasks into {path} ({new} new, {replaced} replaced).")
    if bad:
        say(f"Skipped {describe_bad(file, bad)}")


@app.command("list")
@output_options()
def list_tasks(
    db: str = DbOption,
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="How many tasks."),
    output: Output = TABLE,
) -> None:
    """The imported tasks with their ground truth and how many rollouts each has."""
    sql = (
        "select t.task_id, t.prompt, t.ground_truth, t.metadata, "
        "(select count(*) from rollouts r where r.task_id = t.task_id) as rollouts, t.imported_at "
        f"from tasks t order by t.task_id limit {int(limit)}"
    )
    try:
        columns, rows = run_query(db_path(db), sql)
    except UserError as exc:
        fail_plain(str(exc), exc.hint)
    output.rows(columns, rows, title="tasks")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="tasks")


__all__ = [
    "BadLine",
    "TaskRow",
    "app",
    "import_tasks",
    "list_tasks",
    "parse_tasks_file",
    "task_from_object",
    "write_tasks",
]
