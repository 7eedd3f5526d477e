"""``agent-rl export parquet``: the spans table as Parquet, partitioned by date and service.

This module holds the command function only; ``agent_rl_plugin/cli/export.py`` mounts
:func:`parquet_command` as the ``parquet`` subcommand of ``agent-rl export``. The work is
:func:`agent_rl_plugin.store.parquet.export_parquet` (layout
``OUT/date=YYYY-MM-DD/service=NAME/part-<uuid>.parquet``; read it back with
``read_parquet('OUT/**/*.parquet', hive_partitioning=true)`` or ``agent-rl ingest OUT``).

Its filter is ``--spans-where``, a condition over the spans columns: ``--where`` means a
condition over the rollouts view in every other command (docs/cli.md), so here it is only the
hidden old spelling, still accepted.
"""

from __future__ import annotations

from typing import Optional

import typer

from agent_rl_plugin.cli.common import DbOption, UserError, console, db_path, print_json


def parquet_command(
    out: str = typer.Option(..., "--out", "-o", help="Folder to write the partitions into."),
    db: str = DbOption,
    spans_where: Optional[str] = typer.Option(
        None,
        "--spans-where",
        metavar="SQL",
        help="Only the spans matching this SQL condition over the spans columns (not the rollouts view), "
        "e.g. \"start_time >= '2026-01-01'\".",
        show_default=False,
    ),
    old_where: Optional[str] = typer.Option(
        None, "--where", hidden=True, help="The old spelling of --spans-where (a condition over spans)."
    ),
    append: bool = typer.Option(False, "--append", help="Add files to a folder that already holds an export."),
    json_output: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Write the spans table as Parquet partitioned by date and service (Hive layout)."""
    from agent_rl_plugin.store.parquet import ParquetExportError, export_parquet

    if spans_where and old_where:
        raise UserError("give --spans-where once (--where is its old spelling)")
    try:
        summary = export_parquet(db_path(db), out, spans_where or old_where, append=append)
    except ParquetExportError as exc:
        raise UserError(str(exc), "see `agent-rl export parquet --help`") from None
    if json_output:
        print_json(summary)
    else:
        console.print(
            f"{summary['rows']} spans written to {summary['out']} in {summary['files']} files "
            f"({len(summary['partitions'])} partitions)",
            highlight=False,
        )
