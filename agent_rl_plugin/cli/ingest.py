"""``agent-rl ingest PATH...``: load OTLP/JSON lines and Parquet exports into the database.

Accepts files and folders: OTLP/JSON lines as the OpenTelemetry Collector's ``file`` exporter
writes them (one ``ExportTraceServiceRequest`` per line, ``.gz`` too) and the Parquet written by
``agent-rl export parquet`` (``date=.../service=.../part-*.parquet``). Idempotent by
(trace_id, span_id): ingesting the same files twice adds nothing. A malformed line is reported
with its line number and skipped; the rest lands. ``--json`` prints the summary as JSON; the
exit code is 1 when any error was reported. See :mod:`agent_rl_plugin.receiver.ingest`.
"""

from __future__ import annotations

import os

import typer

from agent_rl_plugin.cli.common import DbOption, UserError, console, db_path, err_console, print_json
from agent_rl_plugin.hookspecs import hookimpl


def ingest(
    paths: list[str] = typer.Argument(..., help="OTLP/JSON lines files, Parquet files, or folders of them."),
    db: str = DbOption,
    json_output: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Load spans from OTLP/JSON lines files and Parquet exports (duplicates are skipped)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from agent_rl_plugin.receiver.ingest import find_files, ingest_paths

    files = find_files(paths)
    if not files:
        raise UserError(
            "nothing to ingest: no matching files under " + ", ".join(paths),
            "pass OTLP/JSON lines (*.json, *.jsonl) or Parquet (*.parquet) files or folders",
        )
    total = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    with Progress(
        TextColumn("ingest"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=json_output,
        transient=True,
    ) as bar:
        task = bar.add_task("ingest", total=total or None)
        report = ingest_paths(db_path(db), files, progress=lambda n: bar.advance(task, n))
    summary = report.as_dict()
    if json_output:
        print_json(summary)
    else:
        console.print(
            f"{summary['files']} files, {summary['spans_read']} spans read, [bold]{summary['inserted']}[/] "
            f"inserted, {summary['skipped_duplicates']} duplicates skipped, "
            f"{summary['rewards_inserted']} rewards, {len(summary['errors'])} errors",
            highlight=False,
        )
        for error in summary["errors"][:20]:
            where = error["file"] + (f":{error['line']}" if error["line"] is not None else "")
            err_console.print(f"[red]error:[/] {where}: {error['error']}", highlight=False, soft_wrap=True)
        if len(summary["errors"]) > 20:
            err_console.print(f"... and {len(summary['errors']) - 20} more (see --json)", highlight=False)
    if summary["errors"]:
        raise typer.Exit(1)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("ingest")(ingest)
