"""``agent-rl report``: one self-contained HTML report on the store (see docs/report.md).

Rollouts over time and by status, reward distributions (per reward name and combined), reward
by task and spread within GRPO groups, tool calls (errors, latency), token usage, coordination
(when recorded), training curves, and the worst rollouts with a step-by-step trace viewer.
"""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent_rl_plugin.cli.common import DbOption, console, db_path, err_console, fail, make_private, print_json
from agent_rl_plugin.hookspecs import hookimpl


def _fail(message: str, hint: str | None = None) -> None:
    fail(escape(message), escape(hint) if hint else None)


def report(
    db: str = DbOption,
    out: str = typer.Option("report.html", "--out", "-o", help="The HTML file to write (its folder is created)."),
    where: Optional[str] = typer.Option(
        None,
        "--where",
        "-w",
        metavar="SQL",
        help="Only rollouts matching this SQL condition over the rollouts view, e.g. \"task_id like 'shop-%'\".",
    ),
    worst: int = typer.Option(20, "--worst", min=0, help="How many lowest-reward rollouts get a step-by-step trace."),
    json_output: bool = typer.Option(
        False, "--json", help="Print a JSON summary (sections, counts, path) instead of text."
    ),
) -> None:
    """Write one self-contained HTML report: plots, tables, and the worst rollouts step by step."""
    from agent_rl_plugin.report import ReportError, build_report
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    try:
        with Progress(
            TextColumn("[bold]report[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=json_output or not err_console.is_terminal,
        ) as progress:
            bar = progress.add_task("", total=None)

            def on_step(step: str, done: int, total: int) -> None:
                progress.update(bar, description=step, completed=done, total=total)

            summary = build_report(path, out, where=where, worst=worst, progress=on_step)
        make_private(out)
    except ReportError as exc:
        _fail(str(exc), exc.hint)
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        _fail(message, hint or None)
    except OSError as exc:
        _fail(f"cannot write {out}: {exc.strerror or exc}", "choose another --out")
    if json_output:
        print_json(summary.to_dict())
        return
    counts = summary.counts
    if summary.empty:
        what = "no rollouts match --where" if where else "the database holds no rollouts yet"
        console.print(f"[yellow]{what}[/]: the report says so.", highlight=False)
    console.print(
        f"[bold green]Wrote[/] {summary.path} ({summary.bytes / 1024:,.0f} KiB, {summary.seconds:.1f} s): "
        f"{counts.get('rollouts', 0):,} rollouts, {len(summary.plots)} plots, {summary.traces} traces, "
        f"{counts.get('training_runs', 0)} training runs; sections: {', '.join(summary.sections)}.",
        highlight=False,
        soft_wrap=True,
    )


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("report")(report)
