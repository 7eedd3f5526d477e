"""Start-up of ``agent-rl`` (issue 19): what a short command imports, and that the lazy app is
the eager one.

* ``agent-rl query``, ``traces list`` and ``--help`` run in a fresh interpreter and report the
  modules they loaded: none of the other command groups, the trainer, the receiver, the
  exporter, the settings model or pyarrow (the result is fetched by DuckDB); ``--help`` not even
  DuckDB.
* The static table of built-in commands (:data:`~agent_rl_plugin.cli.main.COMMAND_SUMMARIES`)
  equals what the real commands say, and the lazy app prints what the eager app prints.
* Outside plugins' commands still appear (found through their entry point) and run.
* ``run_user_query``'s short path (no reader opened first) still upgrades an old schema and
  still sees unmerged spool segments.

No timing is asserted here: ``python -m bench --only cli_startup`` measures.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pytest
import typer
from typer.testing import CliRunner

from agent_rl_plugin.cli.common import db_path
from agent_rl_plugin.cli.lazy_group import LazyCommand, load_builtin
from agent_rl_plugin.cli.main import COMMAND_PLUGINS, COMMAND_SUMMARIES, build_app, entry_point_plugins_installed
from agent_rl_plugin.config import resolve_db_path
from agent_rl_plugin.data.synthetic import synthesize_store

ROOT = Path(__file__).resolve().parents[1]

#: Loaded by none of the three short commands.
NEVER = (
    "agent_rl_plugin.config",
    "agent_rl_plugin.train",
    "agent_rl_plugin.receiver",
    "agent_rl_plugin.store.exporter",
    "agent_rl_plugin.store.batch",
    "agent_rl_plugin.store.transaction",
    "agent_rl_plugin.rewards",
    "agent_rl_plugin.data",
    "agent_rl_plugin.instrumentation",
    "opentelemetry.sdk",
    "pandas",
    "torch",
    "transformers",
    "trl",
    "peft",
    "datasets",
    "pyarrow",
    "numpy",
    "urllib.request",
)

#: Not loaded by a piped ``query`` or ``traces list``, which run on the fast path
#: (:mod:`agent_rl_plugin.cli.fast_path`): the argument parser and what comes with it, nor rich.
NOT_ON_FAST_PATH = ("typer", "click", "pydantic", "pydantic_core", "pluggy", "rich")

REPORT = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
from agent_rl_plugin.cli.main import main
sys.argv = ["agent-rl", *sys.argv[1:]]
main()
"""


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[str, set[str]]:
    """(stdout, modules loaded) of ``agent-rl ARGS`` in a fresh interpreter."""
    environment = dict(os.environ, COLUMNS="120", **(env or {}))
    environment.pop("AGENT_RL_DB", None)
    proc = subprocess.run(
        [sys.executable, "-c", REPORT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        cwd=str(cwd or ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [x for x in proc.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return proc.stdout, set(json.loads(line[len("MODULES ") :]))


def loaded(modules: set[str], prefix: str) -> list[str]:
    return sorted(m for m in modules if m == prefix or m.startswith(prefix + "."))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "store.duckdb"
    synthesize_store(path, rollouts=40, llm_calls=2, group_size=4)
    return path


def other_command_modules(*allowed: str) -> set[str]:
    keep = {"agent_rl_plugin.cli.main", "agent_rl_plugin.cli.common", "agent_rl_plugin.cli.lazy_group", *allowed}
    return set(COMMAND_PLUGINS.values()) - keep


def test_query_loads_only_what_it_runs(store: Path) -> None:
    out, modules = run_cli("query", "select count(*) from spans", "--db", str(store))
    assert "160" in out.split()  # 40 rollouts x 2 LLM calls x 2 spans
    assert {m for name in NEVER for m in loaded(modules, name)} == set()
    assert other_command_modules("agent_rl_plugin.cli.query") & modules == set()
    assert {m for name in NOT_ON_FAST_PATH for m in loaded(modules, name)} == set()
    out, modules = run_cli("query", "select rollout_id, task_id from rollouts", "--db", str(store))  # a table
    assert "40 rows" in out and {m for name in NOT_ON_FAST_PATH for m in loaded(modules, name)} == set()


def test_traces_list_loads_only_what_it_runs(store: Path) -> None:
    out, modules = run_cli("traces", "list", "--db", str(store), "--json")
    with duckdb.connect(str(store), read_only=True) as connection:
        newest = [
            r[0] for r in connection.sql("select rollout_id from rollouts order by start_time desc limit 20").fetchall()
        ]
    assert [r["rollout_id"] for r in json.loads(out)] == newest
    assert {m for name in NEVER for m in loaded(modules, name)} == set()
    assert other_command_modules("agent_rl_plugin.cli.traces", "agent_rl_plugin.cli.query") & modules == set()
    assert {m for name in NOT_ON_FAST_PATH for m in loaded(modules, name)} == set()
    out, modules = run_cli("traces", "list", "--db", str(store))  # the table
    assert "20 rows" in out and {m for name in NOT_ON_FAST_PATH for m in loaded(modules, name)} == set()


def test_help_loads_no_command_and_no_database() -> None:
    out, modules = run_cli("--help")
    assert all(name in out for name in COMMAND_SUMMARIES)
    assert other_command_modules() & modules == set()
    for heavy in ("duckdb", "pyarrow", "numpy", "pydantic", "agent_rl_plugin.store", "importlib.metadata", *NEVER):
        assert loaded(modules, heavy) == [], heavy
    for parser in ("typer", "click", "pluggy", "pydantic_core"):  # drawn by the fast path, with rich alone
        assert loaded(modules, parser) == [], parser


def root_group(app: typer.Typer) -> typer.core.TyperGroup:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    return group


def test_the_table_of_commands_is_what_the_commands_say() -> None:
    eager = root_group(build_app())
    ctx = typer.Context(eager)
    builtin = [n for n in eager.list_commands(ctx) if n in COMMAND_SUMMARIES or n in _builtin_names(eager)]
    assert builtin == list(COMMAND_SUMMARIES)  # same names, same order as the eager --help
    for name, (plugin, summary) in COMMAND_SUMMARIES.items():
        real = load_builtin(COMMAND_PLUGINS[plugin], name)
        first = (real.short_help or real.help or "").strip().split("\n\n")[0].replace("\n", " ").strip()
        assert summary == first, name


def _builtin_names(group: typer.core.TyperGroup) -> set[str]:
    return {
        name
        for name, command in group.commands.items()
        if (
            getattr(command, "callback", None) is not None and command.callback.__module__.startswith("agent_rl_plugin")
        )
        or any(
            getattr(sub, "callback", None) is not None and sub.callback.__module__.startswith("agent_rl_plugin")
            for sub in getattr(command, "commands", {}).values()
        )
    }


HELP_ARGS = [
    [],
    ["--help"],
    ["traces", "--help"],
    ["traces", "list", "--help"],
    ["train", "kto", "--help"],
    ["train", "grpo", "--help"],
    ["train", "gigpo", "--help"],
] + [[name, "--help"] for name in COMMAND_SUMMARIES]


@pytest.mark.parametrize("args", HELP_ARGS, ids=lambda a: " ".join(a) or "no-args")
def test_the_lazy_app_prints_what_the_eager_app_prints(args: list[str], no_plugin_manager: None) -> None:
    runner = CliRunner()
    lazy = runner.invoke(build_app(lazy=True), args, env={"COLUMNS": "120"})
    eager = runner.invoke(build_app(), args, env={"COLUMNS": "120"})
    assert (lazy.exit_code, lazy.output) == (eager.exit_code, eager.output)


@pytest.fixture
def no_plugin_manager():
    """No process-wide plugin manager (as in a fresh ``agent-rl``): earlier eager apps of this
    process registered the built-ins into it, and a lazy app then registers them for real."""
    from agent_rl_plugin import plugins

    previous = plugins.current_plugin_manager()
    plugins.set_plugin_manager(None)
    yield
    plugins.set_plugin_manager(previous)


def test_a_lazy_command_is_a_placeholder_until_it_runs(no_plugin_manager: None) -> None:
    group = root_group(build_app(lazy=True))
    ctx = typer.Context(group)
    assert isinstance(group.get_command(ctx, "query"), LazyCommand)
    name, command, rest = group.resolve_command(ctx, ["query", "select 1"])
    assert command is not None and name == "query" and not isinstance(command, LazyCommand) and rest == ["select 1"]
    assert command.callback is not None and command.callback.__module__ == "agent_rl_plugin.cli.query"


def test_a_misspelt_command_is_still_suggested(no_plugin_manager: None) -> None:
    result = CliRunner().invoke(build_app(lazy=True), ["quer"], env={"COLUMNS": "120"})
    assert result.exit_code == 2 and "Did you mean 'query'?" in result.output


def test_the_train_table_is_what_the_grpo_commands_say() -> None:
    from agent_rl_plugin.cli.train import TrainGroup

    group = root_group(build_app()).commands["train"]
    assert isinstance(group, TrainGroup)
    assert list(group.commands) == ["kto", "config", "grpo", "gigpo"]  # walking it imports them all
    for name, (module, summary) in TrainGroup.lazy_commands.items():
        real = load_builtin(module, name, TrainGroup.register_function)
        assert summary == (real.help or "").strip().split("\n\n")[0].replace("\n", " ").strip(), name


def test_train_kto_builds_no_other_training_command(tmp_path: Path) -> None:
    out, modules = run_cli("train", "kto", "--help")
    assert "--lora-r" in out
    unwanted = ("agent_rl_plugin.cli.train_grpo", "agent_rl_plugin.cli.advantages", "agent_rl_plugin.cli.score")
    assert [m for m in unwanted if m in modules] == []
    for heavy in ("agent_rl_plugin.rollouts.runner", "agent_rl_plugin.tracing", "opentelemetry.sdk", "torch"):
        assert loaded(modules, heavy) == [], heavy


@pytest.mark.parametrize(
    "explicit, environ",
    [
        (None, {}),
        ("x.duckdb", {"AGENT_RL_DB": "y.duckdb"}),
        (None, {"AGENT_RL_DB": "y.duckdb"}),
        (None, {"AGENT_RL_DB_PATH": "z.duckdb"}),
        (None, {"AGENT_RL_DB": "y.duckdb", "AGENT_RL_DB_PATH": "z.duckdb"}),
        ("", {"AGENT_RL_DB": ""}),
    ],
)
def test_the_cli_resolves_the_database_as_the_settings_do(
    explicit: str | None, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AGENT_RL_DB", "AGENT_RL_DB_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert db_path(explicit) == resolve_db_path(explicit)


PLUGIN = """
    import typer
    from agent_rl_plugin.hookspecs import hookimpl

    def hello(name: str = typer.Option("world", "--name", help="Who.")) -> None:
        '''Say hello (from an outside plugin).'''
        print(f"hello {name}")

    @hookimpl
    def agent_rl_register_commands(cli):
        cli.command("hello")(hello)
"""


def test_an_outside_plugin_adds_its_command_to_the_lazy_app(tmp_path: Path) -> None:
    (tmp_path / "fake_hello_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "fake_hello-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-hello\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[agent_rl_plugin]\nfake-hello = fake_hello_plugin\n")
    env = {"PYTHONPATH": str(tmp_path), "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "0"}  # conftest switches it off
    out, _ = run_cli("--help", env=env)
    listed = [m for m in re.findall(r"^│ (\S+) ", out, re.M) if not m.startswith("-")]
    assert listed[: len(COMMAND_SUMMARIES)] == list(COMMAND_SUMMARIES) and listed[-1] == "hello"
    out, modules = run_cli("hello", "--name", "there", env=env)
    assert out.strip() == "hello there" and "fake_hello_plugin" in modules
    out, _ = run_cli("--help", env=dict(env, AGENT_RL_DISABLE_PLUGIN_AUTOLOAD="1"))  # autoload off: not found
    assert "hello" not in out


def test_entry_point_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    other = tmp_path / "other-1.0.dist-info"
    other.mkdir()
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    baseline = entry_point_plugins_installed()
    mine = tmp_path / "mine-1.0.dist-info"
    mine.mkdir()
    (mine / "entry_points.txt").write_text("[agent_rl_plugin]\nmine = mine\n")
    assert entry_point_plugins_installed() is True
    monkeypatch.setenv("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert entry_point_plugins_installed() is False
    from importlib.metadata import entry_points

    assert baseline == bool([ep for ep in entry_points(group="agent_rl_plugin") if ep.name != "mine"])


def test_a_query_upgrades_an_old_schema_first(tmp_path: Path) -> None:
    from agent_rl_plugin.store.migrations import MIGRATIONS, migrate, pending_migrations
    from agent_rl_plugin.store.user_sql import run_user_query

    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as connection:
        migrate(connection, MIGRATIONS[:1])
    result = run_user_query(db, "select count(*) as n from spans")
    assert result.rows == [(0,)]
    with duckdb.connect(str(db), read_only=True) as connection:
        assert pending_migrations(connection) == []


def converted_spans(n: int) -> Any:
    """``n`` finished OTel spans of one rollout, converted to the store's Arrow rows."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agent_rl_plugin import semconv as sc
    from agent_rl_plugin.store.rows import SpanConverter

    keep = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    for i in range(n):
        with provider.get_tracer("t").start_as_current_span(f"step {i}", attributes={sc.ROLLOUT_ID: "spooled"}):
            pass
    return SpanConverter().convert(list(keep.get_finished_spans())).spans


def test_a_query_sees_unmerged_spool_segments(tmp_path: Path) -> None:
    from agent_rl_plugin.store.user_sql import run_user_query

    db = tmp_path / "s.duckdb"
    synthesize_store(db, rollouts=2, llm_calls=1, group_size=2)
    from agent_rl_plugin.store.spool import write_segment

    write_segment(db, converted_spans(3))
    result = run_user_query(db, "select count(*) from spans")
    assert result.rows == [(4 + 3,)]


def test_a_read_only_reader_lists_rollouts_through_the_spool_overlay(tmp_path: Path) -> None:
    """The overlay's spans is a view without row ids; rollouts (version 5 joins roots by row id)
    must still answer, with the rows it gives once the segment is merged."""
    from agent_rl_plugin.store.connection import open_reader
    from agent_rl_plugin.store.reading import overlay_unmerged
    from agent_rl_plugin.store.spool import write_segment

    db = tmp_path / "s.duckdb"
    synthesize_store(db, rollouts=2, llm_calls=1, group_size=2)
    write_segment(db, converted_spans(3))
    with duckdb.connect(str(db), read_only=True) as connection:
        assert overlay_unmerged(connection, db) == 1
        assert connection.execute("select count(*) from spans").fetchone() == (4 + 3,)
        overlaid = connection.execute("select * from rollouts order by rollout_id").fetchall()
    merged = open_reader(db)  # merges the segment into the file
    try:
        assert merged.execute("select * from rollouts order by rollout_id").fetchall() == overlaid
    finally:
        merged.close()


def test_an_egg_on_the_path_counts_as_a_possible_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eggs (folders or zips) are not scanned for entry points, so one on ``sys.path`` errs towards true."""
    monkeypatch.delenv("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "plugin-1.0-py3.11.egg")])
    assert entry_point_plugins_installed() is True
    monkeypatch.setattr(sys, "path", [str(tmp_path / "plain")])
    assert entry_point_plugins_installed() is False
