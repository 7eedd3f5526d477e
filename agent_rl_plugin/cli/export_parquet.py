"""``agent-rl export parquet``: the spans table as Parquet, partitioned by date and service.

This module holds the command function only; ``agent_rl_plugin/cli/export.py`` mounts
:func:`parquet_command` as the ``parquet`` subcommand of ``agent-rl export``. The work is
:func:`agent_rl_plugin.store.parquet.export_parquet` (layout
``OUT/date=YYYY-MM-DD/service=NAME/part-<uuid>.parquet``; read it back with
``read_parquet('OUT/**/*.parquet', hive_partitioning=true)`` or ``agent-rl ingest OUT``).
"""

from __future__ import annotations

import typer

from agent_rl_plugin.cli.common import DbOption, UserError, console, db_path, print_json


def parquet_command(
    out: str = typer.Option(..., "--out", help="Folder to write the partitions into."),
    db: str = DbOption,
    where: str = typer.Option(
        None,
        "--where",
        help="SQL condition over the spans columns, e.g. \"start_time >= '2026-01-01'\".",
        show_default=False,
    ),
    append: bool = typer.Option(False, "--append", help="Add files to a folder that already holds an export."),
    json_output: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Write the spans table as Parquet partitioned by date and service (Hive layout)."""
    from agent_rl_plugin.store.parquet import ParquetExportError, export_parquet

    try:
        summary = export_parquet(db_path(db), out, where, append=append)
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
