"""Helpers shared by the command modules: the ``--db`` option, output formats, errors.

Listing commands print through :func:`print_rows` and take their output options from
:func:`output_options` (``-f/--format table|json|csv``, ``--json``, ``--csv``, ``--wide``),
so every listing reads the same way: a table that fits the terminal by default
(:mod:`agent_rl_plugin.cli.table_layout`), full values with ``--wide``, and JSON or CSV with
every value in full for scripts.

This module imports no typer (nor click, pydantic or rich) at import: the fast path of
``agent-rl query`` / ``traces list`` (:mod:`agent_rl_plugin.cli.fast_path`) prints through it.
The typer parts import typer when used: :data:`DbOption` and :data:`JsonOption` are made on
first use (the module ``__getattr__``), :func:`output_options` imports it when it decorates.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import inspect
import io
import json
import os
import sys
import threading
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, NoReturn, Sequence, TypeVar

from agent_rl_plugin.errors import AgentRLError

if TYPE_CHECKING:
    from rich.console import Console

    console: Console  # rich's console on stdout, made on first use (see __getattr__)
    DbOption: Any  # typer's ``--db`` option, made on first use (see __getattr__)
    JsonOption: Any  # and ``--json``
    err_console: Console  # and on stderr


def __getattr__(name: str) -> Any:
    """``console`` and ``err_console`` (rich consoles on stdout and stderr), made on first use so
    that a command printing JSON, CSV or a plain table never imports rich's console."""
    if name in ("console", "err_console"):
        return _rich_console(name)
    if name in ("DbOption", "JsonOption"):
        return _typer_option(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _typer_option(name: str) -> Any:
    """``DbOption`` (``--db``) or ``JsonOption`` (``--json``), typer options made once, on first
    use (typer is imported then, by the command modules that declare them)."""
    made = globals().get(name)
    if made is None:
        import typer

        if name == "DbOption":
            made = typer.Option(None, "--db", help=DB_HELP, show_default=False)
        else:
            made = typer.Option(False, "--json", help="Print JSON instead of a table.")
        globals()[name] = made
    return made


def _rich_console(name: str) -> Console:
    made = globals().get(name)
    if made is None:
        from rich.console import Console

        made = globals()[name] = Console(stderr=name == "err_console")
    return made


DB_HELP = "DuckDB file to use (default: $AGENT_RL_DB, else ./agent_rl.duckdb)."


class UserError(AgentRLError):
    """An error the user can fix, raised by a command: printed as one line plus ``hint``; exit
    code 1. Errors from the layers below are :class:`AgentRLError` too and print the same way."""


@contextlib.contextmanager
def stop_on_signal() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (Ctrl-C) while the block runs; the previous handlers are
    put back when it ends. For long-running commands (``serve``, ``policy serve``) that must stop
    cleanly: wait on the event, then shut down."""
    import signal  # only long-running commands use it: not imported by a short command's start-up

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
    err = _rich_console("err_console")
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    if hint:
        err.print(f"[yellow]fix:[/] {hint}", highlight=False, soft_wrap=True)
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
    """The database for a command: ``--db``, else ``AGENT_RL_DB`` (or ``AGENT_RL_DB_PATH``), else
    ``./agent_rl.duckdb``: the answer of :func:`agent_rl_plugin.config.resolve_db_path`, without
    importing the settings model (pydantic) on every command's path; ``tests/test_cli_startup.py``
    checks that both agree."""
    if explicit:
        return explicit
    return os.environ.get("AGENT_RL_DB") or os.environ.get("AGENT_RL_DB_PATH") or "agent_rl.duckdb"


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


def terminal_width() -> int:
    """The width tables fit into: ``$COLUMNS`` when set to a positive number (read at each call,
    so a test or a wrapper can set it), else the terminal's width, else 80 (output not a
    terminal, or a width of 0 such as rich reads from ``COLUMNS=0``)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    from agent_rl_plugin.cli.table_layout import plain_stdout

    width = _plain_console_width() if plain_stdout() else _rich_console("console").size.width
    return width if width > 0 else 80


def _plain_console_width() -> int:
    """The width rich's console on stdout has when stdout is no terminal (``plain_stdout()``),
    without importing rich: the size of the first of stdin, stdout and stderr (the
    interpreter's own streams, in that order) that is a terminal, overridden by ``COLUMNS`` when
    it is digits (``0`` too: the caller then falls back to 80, as rich does), else 0.
    ``tests/test_terminal_width.py`` checks it against rich's answer."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    for stream, default in ((sys.__stdin__, 0), (sys.__stdout__, 1), (sys.__stderr__, 2)):
        try:
            descriptor = stream.fileno() if stream is not None else default
        except Exception:  # noqa: BLE001 - rich falls back to the standard number alike
            descriptor = default
        try:
            return os.get_terminal_size(descriptor).columns
        except (AttributeError, ValueError, OSError):
            continue
    return 0


def _sized_console(width: int) -> Console:
    """A console like :data:`console` (same colours, same stdout) that is ``width`` cells wide."""
    from rich.console import Console

    console = _rich_console("console")
    return Console(
        width=width,
        force_terminal=console.is_terminal,
        color_system=console.color_system,  # type: ignore[arg-type]  # the detected name, or None
        no_color=console.no_color,
        highlight=False,
    )


def print_rows(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: str = "table",
    title: str | None = None,
    *,
    wide: bool = False,
    formats: Sequence[str] | None = None,
) -> None:
    """Print a result set as a table, JSON (a list of objects) or CSV.

    ``table`` fits :func:`terminal_width`: one line per row, long values cut with an ellipsis,
    ids shortened to a unique prefix, floats to 4 significant digits, timestamps to the second;
    trailing columns that do not fit are left out and named in a dim note after the row count
    (:func:`~agent_rl_plugin.cli.table_layout.layout_table`). ``wide=True`` prints every column
    with full values and does not fit the terminal. JSON and CSV always carry every value in
    full (ids, digits, timestamps). ``formats``: the formats the command offers; the note then
    says how to see the hidden columns (``--wide`` and ``--json``/``--csv`` as offered), and only
    names them when ``None`` (a command without the shared output options)."""
    if fmt == "json":
        print_json(rows_as_dicts(columns, rows))
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")  # "\n" so `$(... | tail -n 1)` gives a clean value
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else jsonable(v) for v in row])
        sys.stdout.write(buffer.getvalue())
    else:
        _print_table(columns, rows, title, wide, formats)


def _print_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None, wide: bool, formats: Sequence[str] | None
) -> None:
    from agent_rl_plugin.cli.table_layout import layout_table, plain_stdout, render_plain

    width = terminal_width()
    layout = layout_table(columns, rows, None if wide else width, wide=wide)
    notes = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
    if layout.hidden:
        count = len(layout.hidden)
        notes += f"; {count} more column{'s' if count != 1 else ''}: {', '.join(layout.hidden)}"
        if formats is not None:
            ways = ["--wide"] + [f"--{f}" for f in formats if f != "table"]
            notes += " (use " + (", ".join(ways[:-1]) + " or " + ways[-1] if len(ways) > 1 else ways[0]) + ")"
    text = render_plain(layout, title, notes, width) if plain_stdout() else None
    if text is not None:  # what rich would print, without importing its console
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=box.MINIMAL_HEAVY_HEAD, show_edge=False, header_style="bold", title_style="bold")
    for name, column_width, numeric in zip(layout.columns, layout.widths, layout.numeric):
        table.add_column(
            Text(name),
            width=column_width,
            min_width=column_width,
            max_width=column_width,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if numeric else "left",
        )
    for texts in layout.cells:
        table.add_row(*(Text(t) for t in texts))
    out = _sized_console(max(layout.total_width, width if not wide else 1))
    if layout.columns:
        out.print(table)
    _sized_console(width).print(Text(notes, style="dim"))


class OutputFormat(str, Enum):
    """The ``-f/--format`` choices of a listing command."""

    table = "table"
    json = "json"
    csv = "csv"


ALL_FORMATS: tuple[str, ...] = ("table", "json", "csv")


class Output(NamedTuple):  # a named tuple, not a frozen dataclass: cheaper to make at import
    """How a listing command prints, as chosen by :func:`output_options`: ``format`` is
    ``"table"``, ``"json"`` or ``"csv"``; ``wide`` asks tables for every column in full;
    ``formats`` are those the command offers (the table's "more columns" note names them)."""

    format: str = "table"
    wide: bool = False
    formats: tuple[str, ...] = ("table", "json", "csv")

    @property
    def json(self) -> bool:
        """Whether the command should print JSON."""
        return self.format == "json"

    def rows(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
        """:func:`print_rows` in this format."""
        print_rows(columns, rows, self.format, title=title, wide=self.wide, formats=self.formats)


#: The default of a command's ``output`` parameter (the decorator replaces it).
TABLE = Output()


def resolve_output(
    fmt: str | Enum = "table",
    json_output: bool = False,
    csv_output: bool = False,
    wide: bool = False,
    formats: Sequence[str] = ALL_FORMATS,
) -> Output:
    """The :class:`Output` that ``-f/--format``, ``--json``, ``--csv`` and ``--wide`` ask for.

    ``--json``/``--csv`` win over the ``table`` default; asking for two different formats, or
    for one the command does not print (not in ``formats``), raises :class:`UserError`."""
    named = fmt.value if isinstance(fmt, Enum) else str(fmt)
    shortcuts = [name for flag, name in ((json_output, "json"), (csv_output, "csv")) if flag]
    asked = set(shortcuts) | ({named} if named != "table" else set())
    if len(asked) > 1:
        flags = " and ".join(sorted(f"--{a}" if a in shortcuts else f"--format {a}" for a in asked))
        raise UserError(f"{flags} ask for different outputs", "pass one of --format table|json|csv, --json, --csv")
    chosen = asked.pop() if asked else "table"
    if chosen not in formats:
        raise UserError(
            f"this command prints {' or '.join(formats)}, not {chosen}",
            f"pass --format {formats[0]}" + (f" or --{formats[1]}" if len(formats) > 1 else ""),
        )
    return Output(chosen, wide, tuple(formats))


_OUTPUT_PARAMS = ("output_format", "output_json", "output_csv", "output_wide")
F = TypeVar("F", bound=Callable[..., Any])


def output_options(*formats: str) -> Callable[[F], F]:
    """Give a typer command the shared output options and hand it the choice as ``output``.

    The decorated function declares ``output: Output = TABLE``; the decorator replaces that
    parameter with ``-f/--format`` (the ``formats``, default table, json and csv), ``--json``,
    ``--csv`` (when csv is among them) and ``--wide`` (help panel "Output"), and calls the
    function with the resolved :class:`Output` (:func:`resolve_output`). Put it under
    ``@app.command(...)``::

        @app.command("list")
        @output_options()
        def list_things(db: str = DbOption, output: Output = TABLE) -> None:
            output.rows(columns, rows, title="things")

    Called from Python, the function takes ``output=Output(...)`` (or the option names above,
    or the old ``json_output=True``); with none of them it prints a table."""
    allowed = tuple(formats) or ALL_FORMATS
    if not set(allowed) <= set(ALL_FORMATS) or "table" not in allowed:
        raise ValueError(f"output formats must include table and come from {ALL_FORMATS}, got {allowed}")

    def decorate(func: F) -> F:
        import typer

        signature = inspect.signature(func)
        if "output" not in signature.parameters:
            raise TypeError(f"{func.__name__} needs an `output: Output = TABLE` parameter for @output_options")
        panel = "Output"
        choices = OutputFormat if allowed == ALL_FORMATS else Enum("OutputFormat", {f: f for f in allowed}, type=str)
        added = [
            inspect.Parameter(
                "output_format",
                inspect.Parameter.KEYWORD_ONLY,
                annotation=choices,
                default=typer.Option(
                    "table",
                    "--format",
                    "-f",
                    help="table (fits the terminal), " + " or ".join(f for f in allowed if f != "table") + ".",
                    rich_help_panel=panel,
                ),
            ),
            inspect.Parameter(
                "output_json",
                inspect.Parameter.KEYWORD_ONLY,
                annotation=bool,
                default=typer.Option(False, "--json", help="Same as --format json.", rich_help_panel=panel),
            ),
        ]
        if "csv" in allowed:
            added.append(
                inspect.Parameter(
                    "output_csv",
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=bool,
                    default=typer.Option(False, "--csv", help="Same as --format csv.", rich_help_panel=panel),
                )
            )
        added.append(
            inspect.Parameter(
                "output_wide",
                inspect.Parameter.KEYWORD_ONLY,
                annotation=bool,
                default=typer.Option(
                    False,
                    "--wide",
                    help="Tables: every column and full values (ids, digits), not fitted to the terminal.",
                    rich_help_panel=panel,
                ),
            )
        )

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            chosen = {name: kwargs.pop(name) for name in _OUTPUT_PARAMS if name in kwargs}
            if "json_output" in kwargs and "json_output" not in signature.parameters:  # the old keyword
                chosen["output_json"] = kwargs.pop("json_output") is True
            if "output" not in kwargs:
                kwargs["output"] = resolve_output(
                    chosen.get("output_format", "table"),
                    bool(chosen.get("output_json")),
                    bool(chosen.get("output_csv")),
                    bool(chosen.get("output_wide")),
                    allowed,
                )
            return func(*args, **kwargs)

        kept = [p for p in signature.parameters.values() if p.name != "output"]
        wrapper.__signature__ = signature.replace(parameters=kept + added)  # type: ignore[attr-defined]
        annotations = {k: v for k, v in getattr(func, "__annotations__", {}).items() if k != "output"}
        annotations.update({p.name: p.annotation for p in added})
        wrapper.__annotations__ = annotations
        return wrapper  # type: ignore[return-value]

    return decorate


def parse_reward_items(items: list[str] | None) -> tuple[list[str], dict[str, float]]:
    """``-r/--reward NAME[=W]`` items as ``(names, weights)``: every name once, in order, and the
    weights given explicitly (``NAME=W``). The one parser of the option, for every command that
    takes it; :class:`UserError` names a malformed item."""
    names: list[str] = []
    weights: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not name:
            raise UserError(
                f"bad --reward {item!r}", "use --reward NAME or --reward NAME=WEIGHT, e.g. task_completion=2"
            )
        if sep:
            try:
                weights[name] = float(text)
            except ValueError:
                raise UserError(
                    f"bad weight in --reward {item!r}", "use --reward NAME=WEIGHT, e.g. task_completion=2"
                ) from None
        names.append(name)
    return list(dict.fromkeys(names)), weights
