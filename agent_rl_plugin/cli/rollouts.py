"""``agent-rl rollouts run MODULE:FUNC --tasks FILE``: run an agent over tasks in groups.

The agent is any callable taking the task dict (sync, async or streaming; see
``docs/rollouts.md``); ``MODULE`` is imported with the current directory on ``sys.path``, or is
a ``.py`` file. Every rollout is recorded into the database with its task and group ids, the
tasks go into the ``tasks`` table, and a summary per task is printed. The exit code is 0 when
the batch ran and at least one rollout succeeded (failed rollouts are data to learn from), 1
when every rollout failed or the command could not start.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent_rl_plugin.cli.common import DbOption, JsonOption, console, db_path, print_json, print_rows
from agent_rl_plugin.cli.score import fail_plain, say
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Run an agent over tasks in groups of rollouts, recorded into DuckDB.", no_args_is_help=True)

TASKS_HINT = 'one JSON object per line, e.g. {"task_id": "t1", "prompt": "2+2?", "ground_truth": 4}'


def summarize(outcomes: list[Any]) -> list[dict[str, Any]]:
    """One row per task (in the order of the tasks): its group and counts by status."""
    rows: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        row = rows.setdefault(
            outcome.task_id,
            {
                "task_id": outcome.task_id,
                "group_id": outcome.group_id,
                "ok": 0,
                "error": 0,
                "timeout": 0,
                "cancelled": 0,
                "seconds": 0.0,
            },
        )
        row[outcome.status] += 1
        row["seconds"] += outcome.duration_s
    for row in rows.values():
        total = row["ok"] + row["error"] + row["timeout"] + row["cancelled"]
        row["mean_s"] = round(row.pop("seconds") / total, 3) if total else 0.0
    return list(rows.values())


@app.command("run")
def run(
    target: str = typer.Argument(
        ..., help="The agent: MODULE:FUNC (MODULE importable from here) or path/to/file.py:FUNC."
    ),
    tasks: str = typer.Option(
        ..., "--tasks", "-t", help="Task file: .jsonl, .json or .csv (as for `agent-rl tasks import`)."
    ),
    group_size: int = typer.Option(8, "--group-size", "-g", min=1, help="Rollouts per task (one group)."),
    concurrency: int = typer.Option(16, "--concurrency", "-j", min=1, help="Rollouts running at once."),
    db: str = DbOption,
    timeout: Optional[float] = typer.Option(
        None, "--timeout", min=0.001, help="Seconds per rollout; a slower one is recorded as timed out."
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="Derive a stable seed per rollout (task['seed'])."),
    input_key: Optional[str] = typer.Option(
        None, "--input-key", help="Call the agent with task[KEY] (e.g. prompt) instead of the task dict."
    ),
    json_output: bool = JsonOption,
) -> None:
    """Run MODULE:FUNC GROUP_SIZE times on every task, concurrently, recording each rollout."""
    from agent_rl_plugin import tracing
    from agent_rl_plugin.ids import new_id
    from agent_rl_plugin.rollouts import AgentLoadError, TaskFileError, load_agent, load_tasks, run_rollouts
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    try:
        rows = load_tasks(tasks)
        if not rows:
            raise TaskFileError(f"no tasks in {tasks}", TASKS_HINT)
        agent = load_agent(target)
    except (TaskFileError, AgentLoadError) as exc:
        fail_plain(str(exc), exc.hint)
    started = time.perf_counter()
    run_id = new_id()[:8]
    tracing.configure(db_path=path)
    total = len(rows) * group_size
    try:
        with Progress(
            TextColumn("[bold]rollouts[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[failed]} failed"),
            console=console,
            transient=True,
            disable=json_output,
        ) as progress:
            bar = progress.add_task("rollouts", total=total, failed=0)
            failed: Counter[str] = Counter()

            def advance(done: int, total: int, outcome: Any) -> None:
                failed["n"] += not outcome.ok
                progress.update(bar, completed=done, failed=failed["n"])

            outcomes = run_rollouts(
                agent,
                rows,
                group_size,
                concurrency,
                progress=advance,
                seed=seed,
                timeout_s=timeout,
                input_key=input_key,
                run_id=run_id,
            )
    except (ValueError, TypeError, StoreError) as exc:
        tracing.shutdown()
        message, _, hint = str(exc).partition(" Fix: ")
        fail_plain(message, hint or getattr(exc, "hint", None))
    tracing.shutdown()  # flushes and releases the database file
    elapsed = time.perf_counter() - started
    counts = Counter(o.status for o in outcomes)
    per_task = summarize(outcomes)
    errors = list(dict.fromkeys(o.error for o in outcomes if o.error))[:3]
    summary = {
        "database": path,
        "agent": target,
        "run_id": run_id,
        "tasks": len(rows),
        "group_size": group_size,
        "rollouts": len(outcomes),
        "ok": counts["ok"],
        "error": counts["error"],
        "timeout": counts["timeout"],
        "cancelled": counts["cancelled"],
        "seconds": round(elapsed, 3),
        "per_task": per_task,
        "error_examples": errors,
        "outcomes": [o.to_dict() for o in outcomes],
    }
    all_failed = counts["ok"] == 0
    if json_output:
        print_json(summary)
    else:
        _print_summary(summary)
    if all_failed:
        raise typer.Exit(1)


def _print_summary(summary: dict[str, Any]) -> None:
    columns = ["task_id", "group_id", "ok", "error", "timeout", "mean_s"]
    print_rows(columns, [[row[c] for c in columns] for row in summary["per_task"]], title="rollouts per task")
    failed = summary["error"] + summary["timeout"] + summary["cancelled"]
    say(
        f"Ran {summary['rollouts']} rollouts ({summary['tasks']} tasks x {summary['group_size']}) of {summary['agent']} "
        f"in {summary['seconds']:.1f} s: {summary['ok']} ok, {failed} failed ({summary['timeout']} timed out). "
        f"Recorded into {summary['database']}."
    )
    for example in summary["error_examples"]:
        say(f"  error: {example}")
    if summary["ok"] == 0:
        say("Every rollout failed: check the errors above (the agent is called with the task dict; see --input-key).")
    else:
        say(f"Next: agent-rl score --db {summary['database']}")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="rollouts")
