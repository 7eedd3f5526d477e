"""Helpers shared by the command modules: the ``--db`` option, output formats, errors."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import signal
import sys
import threading
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Iterable, Iterator, NoReturn, Sequence

import typer
from rich.console import Console
from rich.table import Table

from agent_rl_plugin.config import resolve_db_path
from agent_rl_plugin.errors import AgentRLError

console = Console()
err_console = Console(stderr=True)

DB_HELP = "DuckDB file to use (default: $AGENT_RL_DB, else ./agent_rl.duckdb)."
DbOption = typer.Option(None, "--db", help=DB_HELP, show_default=False)
JsonOption = typer.Option(False, "--json", help="Print JSON instead of a table.")


class UserError(AgentRLError):
    """An error the user can fix, raised by a command: printed as one line plus ``hint``; exit
    code 1. Errors from the layers below are :class:`AgentRLError` too and print the same way."""


@contextlib.contextmanager
def stop_on_signal() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (Ctrl-C) while the block runs; the previous handlers are
    put back when it ends. For long-running commands (``serve``, ``policy serve``) that must stop
    cleanly: wait on the event, then shut down."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def fail(message: str, hint: str | None = None, code: int = 1) -> NoReturn:
    """Print ``error: message`` (and the fix) on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    if hint:
        err_console.print(f"[yellow]fix:[/] {hint}", highlight=False, soft_wrap=True)
    raise SystemExit(code)


def make_private(path: str) -> None:
    """Make what a command wrote at ``path`` readable by this user only: a file 0600, a folder
    0700 with every file under it 0600 (exports can hold prompts, outputs and rewards).
    ``$AGENT_RL_FILE_MODE`` (octal, e.g. ``644``) sets another file mode (folders get the
    matching search bits)."""
    import os

    try:
        mode = int(os.environ.get("AGENT_RL_FILE_MODE", "600"), 8) & 0o666
    except ValueError:
        mode = 0o600
    folder_mode = mode | (mode & 0o444) >> 2 | 0o700
    if os.path.isdir(path):
        for folder, _, files in os.walk(path):
            os.chmod(folder, folder_mode)
            for name in files:
                os.chmod(os.path.join(folder, name), mode)
    elif os.path.exists(path):
        os.chmod(path, mode)


def db_path(explicit: str | None) -> str:
    """The database for a command: ``--db``, else ``AGENT_RL_DB``, else ``./agent_rl.duckdb``."""
    return resolve_db_path(explicit)


def jsonable(value: Any) -> Any:
    """A value ready for ``json.dumps`` (timestamps as ISO text, decimals as floats)."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON to stdout (no colour, so it pipes cleanly)."""
    sys.stdout.write(json.dumps(jsonable(data), indent=2, ensure_ascii=False) + "\n")


def rows_as_dicts(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(columns, row)) for row in rows]


def cell(value: Any, width: int = 80) -> str:
    """A table cell: ``None`` shown as empty, long text cut with an ellipsis."""
    if value is None:
        return ""
    text = value.isoformat(sep=" ", timespec="milliseconds") if isinstance(value, datetime) else str(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def print_rows(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table", title: str | None = None
) -> None:
    """Print a result set as a rich table, JSON (list of objects) or CSV."""
    if fmt == "json":
        print_json(rows_as_dicts(columns, rows))
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else jsonable(v) for v in row])
        sys.stdout.write(buffer.getvalue())
    else:
        table = Table(title=title, show_lines=False, header_style="bold")
        for name in columns:
            table.add_column(name, overflow="fold")
        for row in rows:
            table.add_row(*(cell(v) for v in row))
        console.print(table)
        console.print(f"[dim]{len(rows)} row{'s' if len(rows) != 1 else ''}[/]")
