"""The fast path of ``agent-rl`` (:mod:`agent_rl_plugin.cli.fast_path`, issue 19 item 4).

* its grammar (:data:`~agent_rl_plugin.cli.fast_path.GRAMMAR`) is the typer commands' own:
  checked against their click parameters (names, flags, defaults, bounds, types, env vars);
* it prints what the typer app prints (``AGENT_RL_CLI_FAST=0``): stdout, stderr and exit code,
  over a matrix of widths, terminals, formats, filters, truncated results and errors, in this
  process (each call checked to have gone through the fast path) and, for what typer reads
  when it is imported (``TERMINAL_WIDTH``, ``PY_COLORS``) and a real terminal's table, in fresh
  processes;
* it leaves everything else to typer: argument shapes it does not take, plugins that may add
  commands, shell completion, ``AGENT_RL_CLI_FAST=0``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Iterator

import pytest
import typer

from agent_rl_plugin import plugins
from agent_rl_plugin.cli import fast_path
from agent_rl_plugin.cli.lazy_group import load_builtin
from agent_rl_plugin.cli.main import main
from agent_rl_plugin.data.synthetic import synthesize_store

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fast") / "store.duckdb"
    synthesize_store(path, rollouts=30, llm_calls=2, group_size=3)
    return path


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No plugin manager (as in a fresh ``agent-rl``), no entry-point plugins (conftest switches
    autoload off), none of the variables that change what rich or typer print."""
    for name in (
        "AGENT_RL_DB",
        "AGENT_RL_DB_PATH",
        fast_path.DISABLE_ENV,
        fast_path.COMPLETE_ENV,
        "FORCE_COLOR",
        "TTY_COMPATIBLE",
        "NO_COLOR",
        "PY_COLORS",
        "GITHUB_ACTIONS",
        "TERMINAL_WIDTH",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "120")
    previous = plugins.current_plugin_manager()
    plugins.set_plugin_manager(None)
    yield
    plugins.set_plugin_manager(previous)


# --- the grammar is the typer commands' ---------------------------------------------------------


def real_command(name: str) -> Any:
    if name == "query":
        return load_builtin("agent_rl_plugin.cli.query", "query")
    group: Any = load_builtin("agent_rl_plugin.cli.traces", "traces")
    return group.commands["list"]


def describe_click(command: Any) -> tuple[str | None, dict[str, tuple[Any, ...]]]:
    """(positional argument, {dest: (flags, kind, default, minimum, choices)}) of a click command."""
    argument = None
    options: dict[str, tuple[Any, ...]] = {}
    for param in command.get_params(typer.Context(command)):
        if param.name == "help":
            continue
        assert param.envvar is None and not param.multiple and param.nargs == 1, param.name
        assert getattr(param, "max", None) is None and not getattr(param, "clamp", False), param.name
        annotation = param.type_descriptor.annotation
        if isinstance(param, typer.core.TyperArgument):
            assert argument is None and param.required and annotation is str
            argument = param.name
            continue
        assert not param.hidden and param.secondary_opts == [], param.name
        choices: tuple[str, ...] = ()
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            kind, choices = "choice", tuple(m.value for m in annotation)
        else:
            kind = {str: "str", int: "int", float: "float", bool: "bool"}[annotation]
        assert param.is_flag == (kind == "bool"), param.name
        options[param.name] = (tuple(param.opts), kind, param.default, param.min, choices)
    return argument, options


def describe_fast(command: fast_path.Command) -> tuple[str | None, dict[str, tuple[Any, ...]]]:
    return command.argument, {
        o.dest: (o.flags, o.kind, o.default, o.minimum, o.choices if o.kind == "choice" else ())
        for o in command.options
    }


@pytest.mark.parametrize("name", list(fast_path.GRAMMAR))
def test_the_grammar_is_the_typer_commands(name: str) -> None:
    command = fast_path.GRAMMAR[name]
    assert " ".join(command.words) == name
    real = describe_click(real_command(name))
    fast = describe_fast(command)
    assert fast[0] == real[0]
    assert list(fast[1]) == list(real[1])  # same options, same order
    for dest, spec in real[1].items():
        assert fast[1][dest] == spec, dest


def test_the_root_options_and_constants_are_the_apps() -> None:
    from agent_rl_plugin.cli import main as main_module

    assert (main_module.ENTRY_POINT_GROUP, main_module.DISABLE_AUTOLOAD_ENV) == (
        plugins.ENTRY_POINT_GROUP,
        plugins.DISABLE_AUTOLOAD_ENV,
    )
    group = typer.main.get_command(main_module.build_app(lazy=True))
    params = group.get_params(typer.Context(group))
    shown = [(p.opts[0], (p.opts[1:] or [""])[0], getattr(p, "help", None)) for p in params]
    assert shown == list(fast_path.ROOT_OPTIONS)
    assert group.help == main_module.ROOT_HELP


# --- the same output as typer -----------------------------------------------------------------


def invoke(
    argv: list[str], fast: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[Any, str, str]:
    """(exit code, stdout, stderr) of ``agent-rl ARGV`` in this process; ``fast``: the fast
    path must run it (checked), else the typer app (``AGENT_RL_CLI_FAST=0``)."""
    ran: list[Any] = []
    original = fast_path.run

    def spy(args: Any) -> Any:
        ran.append("started")
        code = original(args)
        ran[-1] = code
        return code

    monkeypatch.setattr(fast_path, "run", spy)
    if fast:
        monkeypatch.delenv(fast_path.DISABLE_ENV, raising=False)
    else:
        monkeypatch.setenv(fast_path.DISABLE_ENV, "0")
    capsys.readouterr()
    code: Any = None
    try:
        main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    if fast:
        assert len(ran) == 1 and ran[0] is not None, (argv, ran)  # the fast path ran it
    else:
        assert ran == [None], (argv, ran)
    return code, out, err


def same(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[Any, str, str]:
    fast = invoke(argv, True, monkeypatch, capsys)
    slow = invoke(argv, False, monkeypatch, capsys)
    assert fast == slow, argv
    return fast


@pytest.mark.parametrize("width", ["50", "80", "120", "200"])
@pytest.mark.parametrize("terminal", [{}, {"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}])
def test_help_is_typers(
    width: str, terminal: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", width)
    for name, value in terminal.items():
        monkeypatch.setenv(name, value)
    code, out, err = same(["--help"], monkeypatch, capsys)
    assert code == 0 and "Commands" in out and err == ""
    assert ("\x1b[" in out) == bool(terminal)  # a terminal gets styles (NO_COLOR: bold, no colours)


QUERY_CASES: list[list[str]] = [
    ["query", "select count(*) from spans"],
    ["query", "select * from spans order by span_id", "--max-rows", "3"],  # truncated
    ["query", "select * from rollouts order by rollout_id", "--json", "--max-rows", "2"],
    ["query", "select * from rollouts order by rollout_id", "--csv"],
    ["query", "select * from rollouts order by rollout_id", "--wide", "--timeout", "30"],
    ["query", "select * from rollouts order by rollout_id", "-f", "json"],
    ["query", "--format=csv", "select task_id, count(*) from rollouts group by 1 order by 1"],
    ["query", "select * from llm_calls order by span_id limit 4", "--max-rows=100", "--timeout=5.5"],
    ["query", "delete from spans"],  # refused
    ["query", "select no_such_column from spans"],  # SQL error
    ["query", "   "],  # empty
    ["query", "select 1", "--json", "--csv"],  # two formats
    ["query", "select 1", "-f", "csv", "--json"],
    ["query", "select 1", "--json", "--json", "-f", "table"],
]
LIST_CASES: list[list[str]] = [
    ["traces", "list"],
    ["traces", "list", "-n", "3"],
    ["traces", "list", "--limit=5", "--wide"],
    ["traces", "list", "--json"],
    ["traces", "list", "--csv", "-n", "4"],
    ["traces", "list", "--status", "ok", "-f", "json"],
    ["traces", "list", "--task", "task-1", "--group", "nope"],
    ["traces", "list", "--task", "x'y"],
    ["traces", "list", "--json", "--csv"],
]


@pytest.mark.parametrize("argv", QUERY_CASES + LIST_CASES, ids=lambda a: " ".join(a)[:60])
def test_commands_print_what_typer_prints(
    argv: list[str], store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = same([*argv, "--db", str(store)], monkeypatch, capsys)
    assert (code == 0) == (err == "" or err.startswith("truncated")), (code, err)


@pytest.mark.parametrize("width", ["50", "200"])
@pytest.mark.parametrize("argv", [QUERY_CASES[1], LIST_CASES[0]], ids=["query", "traces list"])
def test_tables_at_other_widths_and_through_rich(
    width: str, argv: list[str], store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", width)
    code, out, err = same([*argv, "--db", str(store)], monkeypatch, capsys)
    assert code == 0 and out
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws the table (not the plain renderer)
    assert same([*argv, "--db", str(store)], monkeypatch, capsys)[0] == 0


def test_the_database_from_the_environment_and_a_missing_file(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENT_RL_DB", str(store))
    assert same(["query", "select count(*) from rollouts"], monkeypatch, capsys)[1].split()[-3:] == ["30", "1", "row"]
    assert same(["traces", "list", "-n", "2", "--json"], monkeypatch, capsys)[0] == 0
    monkeypatch.setenv("AGENT_RL_DB", str(tmp_path / "missing.duckdb"))
    for argv in (["query", "select 1"], ["traces", "list"]):
        code, _, err = same(argv, monkeypatch, capsys)
        assert code != 0 and "error" in err


FRESH = """
import sys
from agent_rl_plugin.cli.main import main
main(sys.argv[1:])
"""


def fresh(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("AGENT_RL_DB", "FORCE_COLOR", "TTY_COMPATIBLE")}
    environment.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", FRESH, *args], capture_output=True, text=True, env=environment, timeout=120, cwd=ROOT
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "args, env",
    [
        (["--help"], {"TERMINAL_WIDTH": "70", "PY_COLORS": "1"}),
        (["--help"], {"GITHUB_ACTIONS": "true", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}),
        (["query", "select * from spans order by span_id", "--max-rows", "2"], {"FORCE_COLOR": "1"}),
        (["traces", "list", "-n", "4"], {"FORCE_COLOR": "1", "COLUMNS": "70"}),
        (["query", "drop table spans"], {"FORCE_COLOR": "1"}),
    ],
    ids=["help-typer-env", "help-no-terminal", "query-terminal", "traces-terminal", "refused-terminal"],
)
def test_fresh_processes_print_what_typer_prints(args: list[str], env: dict[str, str], store: Path) -> None:
    if args[0] != "--help":
        args = [*args, "--db", str(store)]
    env = {"COLUMNS": "100", **env}
    fast = fresh(args, env)
    slow = fresh(args, {**env, fast_path.DISABLE_ENV: "0"})
    assert fast == slow
    assert ("\x1b[" in fast[1] + fast[2]) == ("FORCE_COLOR" in env or "PY_COLORS" in env)


# --- what it leaves to typer -------------------------------------------------------------------

DECLINED = [
    [],
    ["-V"],
    ["--version"],
    ["--help", "query"],
    ["query"],
    ["query", "--help"],
    ["query", "select 1", "--help"],
    ["query", "a", "b"],
    ["query", "select 1", "--bogus"],
    ["query", "select 1", "--max-rows", "0"],
    ["query", "select 1", "--max-rows", "1.5"],
    ["query", "select 1", "--max-rows", "+5"],
    ["query", "select 1", "--max-rows", "007"],
    ["query", "select 1", "--timeout", "0.01"],
    ["query", "select 1", "--timeout", "abc"],
    ["query", "select 1", "--timeout", "1e3"],
    ["query", "select 1", "--json=1"],
    ["query", "select 1", "--db"],
    ["query", "select 1", "--db", "-x"],
    ["query", "--", "select 1"],
    ["query", "select 1", "-fjson"],
    ["query", "select 1", "-f", "yaml"],
    ["query", "select 1", "-n", "3"],  # traces list's option
    ["query", "-"],
    ["traces"],
    ["traces", "--help"],
    ["traces", "list", "--help"],
    ["traces", "list", "extra"],
    ["traces", "list", "-n", "0"],
    ["traces", "list", "--limit", "-3"],
    ["traces", "list", "--max-rows", "3"],
    ["traces", "show", "abc"],
    ["query-x", "select 1"],
]


@pytest.mark.parametrize("argv", DECLINED, ids=lambda a: " ".join(a) or "no-args")
def test_what_it_does_not_take_goes_to_typer(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert fast_path.match(argv) is None
    assert fast_path.run(argv) is None
    assert capsys.readouterr() == ("", "")


def test_the_shapes_it_takes(store: Path) -> None:
    assert fast_path.match(["query", "--db=x", "select 1", "-f", "csv", "--wide"]) == (
        "query",
        {
            "db": "x",
            "timeout": 60.0,
            "max_rows": 100_000,
            "output_format": "csv",
            "output_json": False,
            "output_csv": False,
            "output_wide": True,
            "sql": "select 1",
        },
    )
    assert fast_path.match(["traces", "list", "-n", "7", "--limit", "9"])[1]["limit"] == 9  # type: ignore[index]
    assert fast_path.match(["--help"]) == ("--help", {})


def test_plugins_switch_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fast_path.match(["--help"]) is not None
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    assert fast_path.run(["--help"]) is None
    assert fast_path.run(["query", "select 1"]) is None
    plugins.set_plugin_manager(None)
    info = tmp_path / "mine-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[agent_rl_plugin]\nmine = mine\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    assert fast_path.run(["--help"]) is None
    monkeypatch.setenv("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert fast_path.run(["--help"]) == 0
    assert " Usage: agent-rl [OPTIONS]" in capsys.readouterr().out


@pytest.mark.parametrize(
    "name, value",
    [(fast_path.DISABLE_ENV, "0"), (fast_path.DISABLE_ENV, "false"), (fast_path.COMPLETE_ENV, "bash_complete")],
)
def test_the_environment_switches_it_off(
    name: str, value: str, store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, value)
    assert fast_path.run(["--help"]) is None
    assert fast_path.run(["query", "select 1", "--db", str(store)]) is None
    assert capsys.readouterr() == ("", "")
    monkeypatch.setenv(name, "")
    assert fast_path.run(["--help"]) == (None if name == fast_path.COMPLETE_ENV else 0)


CELL_TEXTS = [
    "",
    "a",
    "abc def",
    "x" * 40,
    "cut…",
    "…",
    "tab\there",
    "esc\x1b[2J",
    "wide 漢字",
    "é",
    "emoji 😀",
    "zw\u200bj",
]


@pytest.mark.parametrize("text", CELL_TEXTS)
def test_cell_widths_are_richs(text: str) -> None:
    """The table layout measures text without rich when it can (a piped table imports no rich);
    what it gives is rich's answer."""
    from rich.cells import cell_len as rich_cell_len
    from rich.cells import set_cell_size as rich_set_cell_size

    from agent_rl_plugin.cli.table_layout import cell_len, set_cell_size

    assert cell_len(text) == rich_cell_len(text)
    for size in range(0, len(text) + 3):
        assert set_cell_size(text, size) == rich_set_cell_size(text, size), size


@pytest.mark.parametrize(
    "raised", [KeyboardInterrupt(), EOFError(), BrokenPipeError(32, "Broken pipe")], ids=["ctrl-c", "eof", "epipe"]
)
def test_an_interrupt_or_a_closed_pipe_ends_as_in_typer(
    raised: BaseException, store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C: exit 130 quietly; end of input: a new line and "Aborted." on stderr, exit 1; a
    closed stdout pipe: exit 1 quietly."""
    from agent_rl_plugin.cli import query, query_core

    def interrupted(*args: Any) -> None:
        raise raised

    monkeypatch.setattr(query, "query_command", interrupted)  # what the typer command calls
    monkeypatch.setattr(query_core, "query_command", interrupted)  # what the fast path calls
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # put back what a closed pipe makes click replace
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    code, out, err = same(["query", "select 1", "--db", str(store)], monkeypatch, capsys)
    assert (code, out, err) == (
        (1, "", "\nAborted.\n")
        if isinstance(raised, EOFError)
        else (130 if isinstance(raised, KeyboardInterrupt) else 1, "", "")
    )
