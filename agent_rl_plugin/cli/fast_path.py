"""The fast path of ``agent-rl``: ``query``, ``traces list`` and the root ``--help`` without typer.

Building the typer app costs more than a short command itself (typer imports pydantic and
builds a validator for every parameter it converts, click, rich and pluggy come with it), so
:func:`agent_rl_plugin.cli.main.main` first offers the arguments to :func:`run`.

Contract:

* :func:`run` returns an exit code when it ran the command, ``None`` when it did not (the typer
  app then runs as always). What it runs prints exactly what the typer app prints for the same
  arguments, environment and terminal: stdout, stderr and exit code, errors included (it runs
  the same bodies, :func:`~agent_rl_plugin.cli.query_core.query_command` and
  :func:`~agent_rl_plugin.cli.traces_core.list_traces_command`, through the same
  :func:`~agent_rl_plugin.cli.common.resolve_output`; an :class:`~agent_rl_plugin.errors.AgentRLError`
  they raise goes to the caller, which prints it as the app does).
* It takes only arguments it understands completely: ``--help`` alone; ``query SQL`` and
  ``traces list`` with their own options (:data:`GRAMMAR`: ``--opt value``, ``--opt=value``,
  ``-n value``, ``-f value``, flags, options before or after the SQL). Anything else (an
  unknown option, a value that does not convert or is below its bound, an option value that
  starts with ``-``, a missing or extra argument, ``--``, ``--help`` of a command) is left to
  typer, which prints its own usage error.
* It steps aside (``None``) when a plugin may add or replace commands: a plugin manager is set
  already, or an installed distribution declares an ``agent_rl_plugin`` entry point
  (:func:`~agent_rl_plugin.cli.command_table.entry_point_plugins_installed`); when shell completion is
  asked for (``_AGENT_RL_COMPLETE``); when ``AGENT_RL_CLI_FAST=0``; and when
  ``TYPER_USE_RICH`` is off (typer's plain help and errors).
* At import it loads only the standard library; DuckDB, the store and rich come with the
  command that needs them (a piped ``query`` or ``traces list`` never imports rich's console).

:data:`GRAMMAR` repeats the typer commands' options (names, flags, defaults, bounds, types);
``tests/test_cli_fast_path.py`` checks it against the real click parameters, and compares this
path's output with the typer app's over widths, terminals, formats and errors.
"""

from __future__ import annotations

import errno
import inspect
import os
import re
import sys
from typing import Any, NamedTuple, Sequence, TextIO

from agent_rl_plugin.cli.command_table import VERSION_HELP  # standard library only

#: ``AGENT_RL_CLI_FAST=0`` (or ``false``/``no``/``off``) turns the fast path off.
DISABLE_ENV = "AGENT_RL_CLI_FAST"
#: The variable typer's shell completion reads for ``agent-rl``: set, the app answers.
COMPLETE_ENV = "_AGENT_RL_COMPLETE"
#: typer's switch for rich help and errors: off, the fast path steps aside.
TYPER_RICH_ENV = "TYPER_USE_RICH"
FORMATS = ("table", "json", "csv")


class Opt(NamedTuple):  # a named tuple, not a dataclass: made at import, ~4x faster
    """One option of a command: ``dest`` is the typer parameter's name, ``flags`` its option
    strings, ``kind`` ``str``/``int``/``float``/``bool`` (a flag) or ``choice`` (of
    ``choices``), ``default`` what the command gets without it, ``minimum`` its lower bound."""

    dest: str
    flags: tuple[str, ...]
    kind: str
    default: Any = None
    minimum: float | None = None
    choices: tuple[str, ...] = ()


class Command(NamedTuple):
    """A command the fast path runs: its words (``("traces", "list")``), the name of its one
    positional argument (``None``: it takes none), its options."""

    words: tuple[str, ...]
    argument: str | None
    options: tuple[Opt, ...]


_OUTPUT = (
    Opt("output_format", ("--format", "-f"), "choice", "table", choices=FORMATS),
    Opt("output_json", ("--json",), "bool", False),
    Opt("output_csv", ("--csv",), "bool", False),
    Opt("output_wide", ("--wide",), "bool", False),
)
_DB = Opt("db", ("--db",), "str", None)

#: The commands of the fast path, as the typer commands define them (checked by the tests).
GRAMMAR: dict[str, Command] = {
    "query": Command(
        ("query",),
        "sql",
        (
            _DB,
            Opt("timeout", ("--timeout",), "float", 60.0, minimum=0.1),
            Opt("max_rows", ("--max-rows",), "int", 100_000, minimum=1),
            *_OUTPUT,
        ),
    ),
    "traces list": Command(
        ("traces", "list"),
        None,
        (
            _DB,
            Opt("limit", ("--limit", "-n"), "int", 20, minimum=1),
            Opt("task", ("--task",), "str", None),
            Opt("group", ("--group",), "str", None),
            Opt("status", ("--status",), "str", None),
            *_OUTPUT,
        ),
    ),
}

_INT = re.compile(r"0|[1-9][0-9]{0,17}")
_FLOAT = re.compile(r"(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?")


def _convert(opt: Opt, text: str) -> Any:
    """``text`` as ``opt``'s value, or ``None`` when the fast path does not take it (typer then
    says what is wrong, or converts what it accepts and this does not)."""
    value: Any
    if opt.kind == "str":
        return text
    if opt.kind == "choice":
        return text if text in opt.choices else None
    if opt.kind == "int" and _INT.fullmatch(text):
        value = int(text)
    elif opt.kind == "float" and _FLOAT.fullmatch(text):
        value = float(text)
    else:
        return None
    if opt.minimum is not None and value < opt.minimum:
        return None
    return value


def parse(command: Command, args: Sequence[str]) -> dict[str, Any] | None:
    """The values of ``command``'s parameters in ``args`` (what follows the command's words),
    defaults filled in, or ``None`` when ``args`` hold anything outside the contract above."""
    values: dict[str, Any] = {opt.dest: opt.default for opt in command.options}
    by_flag = {flag: opt for opt in command.options for flag in opt.flags}
    positional: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith("-"):
            positional.append(token)
            continue
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        opt = by_flag.get(name)
        if opt is None:
            return None
        if opt.kind == "bool":
            if eq:
                return None
            values[opt.dest] = True
            continue
        if eq:
            text = attached
        else:
            if i >= len(args) or args[i].startswith("-"):
                return None
            text = args[i]
            i += 1
        value = _convert(opt, text)
        if value is None:
            return None
        values[opt.dest] = value
    if len(positional) != (1 if command.argument else 0):
        return None
    if command.argument:
        values[command.argument] = positional[0]
    return values


def _disabled() -> bool:
    """``AGENT_RL_CLI_FAST`` off, or ``TYPER_USE_RICH`` off (typer then prints click's plain help
    and errors, which this path does not draw; read as typer's ``parse_boolean_env_var`` does)."""
    if os.environ.get(TYPER_RICH_ENV, "").lower() in ("n", "no", "f", "false", "off", "0"):
        return True
    return os.environ.get(DISABLE_ENV, "").strip().lower() in ("0", "false", "no", "off")


def plugins_may_add_commands() -> bool:
    """Whether the app may hold commands other than the built-ins: a plugin manager is set in
    this process, or entry-point plugins are installed (the lazy app then builds a manager)."""
    plugins = sys.modules.get("agent_rl_plugin.plugins")
    if plugins is not None and plugins.current_plugin_manager() is not None:
        return True
    from agent_rl_plugin.cli.command_table import entry_point_plugins_installed

    return entry_point_plugins_installed()


def match(argv: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """(``"--help"``, ``{}``) or (command name in :data:`GRAMMAR`, parsed values) for ``argv``,
    or ``None`` when the fast path does not take it. Reads no environment."""
    if list(argv) == ["--help"]:
        return "--help", {}
    for name, command in GRAMMAR.items():
        size = len(command.words)
        if tuple(argv[:size]) == command.words:
            values = parse(command, argv[size:])
            return None if values is None else (name, values)
    return None


def run(argv: Sequence[str]) -> int | None:
    """Run ``argv`` (the arguments after ``agent-rl``) when the fast path takes it and return
    the exit code; ``None`` when it does not (nothing printed, nothing imported beyond the
    standard library and :mod:`agent_rl_plugin.cli.command_table`)."""
    if _disabled() or COMPLETE_ENV in os.environ:
        return None
    matched = match(argv)
    if matched is None or plugins_may_add_commands():
        return None
    name, values = matched
    if name == "--help":
        return print_root_help()
    try:
        _run_command(name, values)
    except KeyboardInterrupt:  # what typer's main does: exit 130, nothing printed
        return 130
    except EOFError:  # a new line, then "Aborted." in red
        sys.stderr.write("\n")
        _help_console(stderr=True).print("Aborted.", style="red")
        return 1
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = _Pacified(sys.stdout)  # a closed pipe (`| head`): exit 1 quietly, as click does
        sys.stderr = _Pacified(sys.stderr)
        return 1
    return 0


def _run_command(name: str, values: dict[str, Any]) -> None:
    from agent_rl_plugin.cli.common import resolve_output

    output = resolve_output(
        values["output_format"], values["output_json"], values["output_csv"], values["output_wide"], FORMATS
    )
    if name == "query":
        from agent_rl_plugin.cli.query_core import query_command

        query_command(values["sql"], values["db"], values["timeout"], values["max_rows"], output)
    else:
        from agent_rl_plugin.cli.traces_core import list_traces_command

        list_traces_command(values["db"], values["limit"], values["task"], values["group"], values["status"], output)


class _Pacified:
    """A stream whose ``flush`` ignores a closed pipe (click's ``PacifyFlushWrapper``)."""

    def __init__(self, wrapped: TextIO) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.wrapped, attr)


# --- the root --help, drawn as typer 0.29's rich_utils draws it --------------------------------

#: typer's styles (``typer.rich_utils``) for what the root help shows.
THEME = {
    "option": "bold cyan",
    "switch": "bold green",
    "negative_option": "bold magenta",
    "negative_switch": "bold red",
    "types": "bold yellow",
    "types_sep": "dim",
    "usage": "yellow",
}
HIGHLIGHTS = (
    r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
    r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
    r"(?P<types>\<[^\>]+\>)",
    r"(?P<usage>Usage: )",
)
NEGATIVE_HIGHLIGHTS = (
    r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
    r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
)
TYPES_HIGHLIGHTS = (
    r"^(?P<types_sep>(\[|<))",
    r"(?P<types_sep>\|)",
    r"(?P<types_sep>(\]|>))(\.\.\.)?$",
)
USAGE = "Usage: agent-rl [OPTIONS] COMMAND [ARGS]..."
#: The root's options as ``--help`` lists them: (long, short, help).
ROOT_OPTIONS = (
    ("--version", "-V", VERSION_HELP),
    ("--help", "", "Show this message and exit."),
)


def _highlighter(patterns: Sequence[str]) -> Any:
    from rich.highlighter import RegexHighlighter

    return type("Highlighter", (RegexHighlighter,), {"highlights": list(patterns)})()


def _help_console(stderr: bool = False) -> Any:
    """The console typer draws help and errors on: its theme and highlighter, colours ``auto``,
    a terminal forced by ``GITHUB_ACTIONS``/``FORCE_COLOR``/``PY_COLORS`` (unless
    ``_TYPER_FORCE_DISABLE_TERMINAL``), the width of ``TERMINAL_WIDTH`` when set."""
    from rich.console import Console
    from rich.theme import Theme

    environ = os.environ
    force: bool | None = True if environ.get("GITHUB_ACTIONS") or environ.get("FORCE_COLOR") else None
    if environ.get("PY_COLORS"):
        force = True
    if environ.get("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    width = environ.get("TERMINAL_WIDTH")
    return Console(
        theme=Theme(THEME),
        highlighter=_highlighter(HIGHLIGHTS),
        color_system="auto",
        force_terminal=force,
        width=int(width) if width else None,
        stderr=stderr,
    )


def print_root_help() -> int | None:
    """Print ``agent-rl --help`` as typer does (usage, description, Options and Commands panels,
    the commands from :data:`~agent_rl_plugin.cli.command_table.COMMAND_SUMMARIES`); 0, or ``None`` when
    ``TERMINAL_WIDTH`` is not a number (typer then fails as it does)."""
    try:
        int(os.environ.get("TERMINAL_WIDTH") or "0")
    except ValueError:
        return None
    from rich.align import Align
    from rich.columns import Columns
    from rich.console import Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from agent_rl_plugin.cli.command_table import COMMAND_SUMMARIES, ROOT_HELP

    highlighter = _highlighter(HIGHLIGHTS)
    negative, types = _highlighter(NEGATIVE_HIGHLIGHTS), _highlighter(TYPES_HIGHLIGHTS)
    console = _help_console()
    console.print(Padding(highlighter(USAGE), 1), style="bold")
    first = inspect.cleandoc(ROOT_HELP).partition("\f")[0].split("\n\n")[0].replace("\n", " ")
    text = highlighter(Text.from_markup(first.strip(), style=""))
    console.print(Padding(Align(Group(text), pad=False), (0, 1, 1, 1)))
    table_style: dict[str, Any] = {
        "show_header": False,
        "expand": True,
        "box": None,
        "show_lines": False,
        "leading": 0,
        "border_style": None,
        "row_styles": None,
        "pad_edge": False,
        "padding": (0, 1),
    }
    options = Table(highlight=True, **table_style)
    for long, short, help_text in ROOT_OPTIONS:
        options.add_row(
            highlighter(long),
            highlighter(short),
            negative(""),
            negative(""),
            types(Text(style="bold yellow", overflow="fold")),
            Columns([highlighter(Text.from_markup(help_text, style=""))]),
        )
    console.print(Panel(options, border_style="dim", title="Options", title_align="left"))
    commands = Table(highlight=False, **table_style)
    commands.add_column(style="bold cyan", no_wrap=True, width=max(len(name) for name in COMMAND_SUMMARIES))
    commands.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, (_, summary) in COMMAND_SUMMARIES.items():
        line = inspect.cleandoc(summary).split("\n\n")[0]
        if line.startswith("\b"):
            line = line.replace("\b\n", "")
        commands.add_row(Text(name), highlighter(Text.from_markup(line.strip(), style="")))
    console.print(Panel(commands, border_style="dim", title="Commands", title_align="left"))
    if sys.stdout is not None:  # stdout closed (`>&-`): click's echo writes nothing
        sys.stdout.write("\n")  # click then echoes the help text it got back: empty, so one new line
    return 0
