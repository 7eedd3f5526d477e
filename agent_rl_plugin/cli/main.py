"""Entry point of ``agent-rl``: builds the app from the ``agent_rl_register_commands`` hook.

Every command group (built-in or from an outside plugin) registers itself through the hook, so
``agent-rl --help`` lists exactly what is installed. The built-in command groups are the modules
of :data:`COMMAND_PLUGINS`: :func:`build_app` registers them into the plugin manager in use (they
are not in :data:`agent_rl_plugin.plugins.DEFAULT_PLUGINS`, so an agent that only records never
imports the command line). Errors that users can fix are printed as
one line plus the fix, with a non-zero exit code, never as a traceback.

The grammar every command follows (short flags, output options, ``--reward``, ``--run``,
``--db``, exit codes) is written down in ``docs/cli.md`` and checked over every command by
``tests/test_cli_grammar.py``. ``agent-rl --version`` (``-V``) prints the package version.

Start-up: the console script (:func:`main`) builds the app with ``lazy=True``: a built-in
command group is imported only when it runs (``--help`` lists them from
:data:`COMMAND_SUMMARIES`, see :mod:`agent_rl_plugin.cli.lazy_group`), and the plugin manager
(which imports the recording plugins) is built only when a plugin may add commands: one is set
already, or an installed distribution declares an ``agent_rl_plugin`` entry point.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pluggy
import typer
from typer.core import TyperGroup

from agent_rl_plugin import plugins
from agent_rl_plugin.cli.common import fail
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.version import __version__

#: The built-in command groups, registered as plugins under these names by :func:`build_app`
#: (``agent-rl plugins`` lists them as built-ins).
COMMAND_PLUGINS: dict[str, str] = {
    "cli_query": "agent_rl_plugin.cli.query",
    "cli_traces": "agent_rl_plugin.cli.traces",
    "cli_doctor": "agent_rl_plugin.cli.doctor",
    "cli_db": "agent_rl_plugin.cli.db",
    "cli_demo": "agent_rl_plugin.cli.demo",
    "cli_plugins": "agent_rl_plugin.cli.plugins_cmd",
    "cli_score": "agent_rl_plugin.cli.score",
    "cli_tasks": "agent_rl_plugin.cli.tasks",
    "cli_label": "agent_rl_plugin.cli.label",
    "cli_dataset": "agent_rl_plugin.cli.dataset",
    "cli_rollouts": "agent_rl_plugin.cli.rollouts",
    "cli_import": "agent_rl_plugin.cli.import_cmd",
    "cli_advantages": "agent_rl_plugin.cli.advantages",
    "cli_train": "agent_rl_plugin.cli.train",
    "cli_export": "agent_rl_plugin.cli.export",
    "cli_serve": "agent_rl_plugin.cli.serve",
    "cli_ingest": "agent_rl_plugin.cli.ingest",
    "cli_report": "agent_rl_plugin.cli.report",
    "cli_policy": "agent_rl_plugin.cli.policy",
    "cli_loop": "agent_rl_plugin.cli.loop",
    "cli_ui": "agent_rl_plugin.cli.ui",
}

#: Each built-in command: name -> (plugin name in :data:`COMMAND_PLUGINS`, the one-line help
#: ``agent-rl --help`` shows), in the order ``--help`` lists them (the hook calls the groups
#: registered last first). A lazy app lists them from here without importing them;
#: ``tests/test_cli_startup.py`` checks this table against the real commands.
COMMAND_SUMMARIES: dict[str, tuple[str, str]] = {
    "ui": ("cli_ui", "Browse rollouts, label them and run SQL in a live local web UI."),
    "loop": (
        "cli_loop",
        "Train an agent's policy in closed rounds: rollouts -> rewards -> advantages -> LoRA -> reload -> eval.",
    ),
    "report": (
        "cli_report",
        "Write one self-contained HTML report: plots, tables, and the worst rollouts step by step.",
    ),
    "ingest": ("cli_ingest", "Load spans from OTLP/JSON lines files and Parquet exports (duplicates are skipped)."),
    "serve": ("cli_serve", "Receive OTLP/HTTP traces from many processes and write them into one DuckDB file."),
    "label": (
        "cli_label",
        "Label rollouts good / bad / skip (a review queue, or --set ID=LABEL), stored as human rewards.",
    ),
    "score": ("cli_score", "Score rollouts with the installed reward plugins and write the rows into `rewards`."),
    "plugins": (
        "cli_plugins",
        "List registered plugins (built-ins and those installed through entry points) and their rewards.",
    ),
    "demo": (
        "cli_demo",
        "Watch an agent get better: a tiny local LLM policy trained in closed rounds on a grid "
        "(--tour: the recording tour).",
    ),
    "doctor": ("cli_doctor", "Check the recorded traces for what makes them unfit for training, with a fix for each."),
    "query": (
        "cli_query",
        "Run a read-only SQL query over rollouts, steps, LLM calls, tool calls, events and rewards.",
    ),
    "policy": ("cli_policy", "Serve the policy being trained over OpenAI's chat-completions API."),
    "export": (
        "cli_export",
        "Export trained adapters (the adapter alone, or merged into its base model) and recorded data.",
    ),
    "train": ("cli_train", "Train LoRA adapters on recorded rollouts (KTO, GRPO online/offline, GiGPO)."),
    "advantages": ("cli_advantages", "Compute GRPO, RLOO, Dr. GRPO or GiGPO advantages into the store."),
    "import": ("cli_import", "Import history recorded elsewhere as rollouts."),
    "rollouts": ("cli_rollouts", "Run an agent over tasks in groups of rollouts, recorded into DuckDB."),
    "dataset": ("cli_dataset", "Build KTO, GRPO and GiGPO-step datasets from recorded rollouts."),
    "tasks": ("cli_tasks", "Import tasks with ground truth, and list them."),
    "db": ("cli_db", "Inspect or upgrade the DuckDB store."),
    "traces": ("cli_traces", "List recorded rollouts and show one as a tree."),
}


def hide_flag_types() -> None:
    """Show no value type next to a boolean flag in ``--help``. Typer 0.29 prints ``<bool>``
    beside every flag (``--json``, ``--help``, ``--merge/--no-merge``), which reads as if the
    flag took a value; a flag takes none, so its type column is left empty. Applied once, to
    every command (built-in or from a plugin); a typer without ``TyperOption.display_type_rich``
    is left as it is. Options that take values keep their type."""
    from typer.core import TyperOption

    original = getattr(TyperOption, "display_type_rich", None)
    if original is None or getattr(original, "flags_untyped", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and not self.count:
            return None
        return original(self, ctx)

    display_type_rich.flags_untyped = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


def show_version(value: bool) -> None:
    """The eager ``--version`` callback: print ``agent-rl <version>`` and exit 0 before any
    command runs."""
    if value:
        sys.stdout.write(f"agent-rl {__version__}\n")
        raise typer.Exit(0)


def root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=show_version,
        is_eager=True,
        expose_value=False,
        help="Print the version and exit.",
    ),
) -> None:
    """Record agents into DuckDB, look at what they did, score them and train on them."""


def entry_point_plugins_installed() -> bool:
    """Whether an installed distribution may add plugins (so commands) through the
    ``agent_rl_plugin`` entry-point group: false when autoload is switched off
    (``AGENT_RL_DISABLE_PLUGIN_AUTOLOAD``), else true when an ``entry_points.txt`` of a
    distribution on ``sys.path`` names the group. A scan of the files, without
    ``importlib.metadata`` (whose import and full scan cost more than the rest of a short
    command); it errs towards true (the plugin manager then decides as it always does), so
    any ``.egg`` entry of ``sys.path`` counts as a possible plugin."""
    if os.environ.get(plugins.DISABLE_AUTOLOAD_ENV, "").strip().lower() in ("1", "true", "yes"):
        return False
    header = f"[{plugins.ENTRY_POINT_GROUP}]"
    for folder in sys.path:
        if folder.endswith(".egg"):  # an egg install (a folder or a zip): not scanned here
            return True
        try:
            entries = list(os.scandir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry.path, "entry_points.txt"), encoding="utf-8", errors="replace") as handle:
                    if header in handle.read():
                        return True
            except OSError:
                continue
    return False


def build_app(*, lazy: bool = False) -> typer.Typer:
    """A fresh Typer app with every registered command.

    ``lazy=False``: the built-in command groups of :data:`COMMAND_PLUGINS` are first registered
    into the plugin manager in use (those already registered, under any name, are left as they
    are), then every plugin registers its commands. ``lazy=True`` (the console script): the
    built-ins are listed from :data:`COMMAND_SUMMARIES` and imported when one runs (see
    :mod:`agent_rl_plugin.cli.lazy_group`); only plugins in a manager that is set already, or
    one built because entry-point plugins are installed, register commands now. Both list the
    same commands with the same help."""
    group_class: type[TyperGroup] | None = None
    if lazy:
        from agent_rl_plugin.cli.lazy_group import LazyGroup

        table = {name: (COMMAND_PLUGINS[plugin], summary) for name, (plugin, summary) in COMMAND_SUMMARIES.items()}
        group_class = type("AgentRLGroup", (LazyGroup,), {"lazy_commands": table})
    app = typer.Typer(
        name="agent-rl",
        help="Record agents into DuckDB, look at what they did, score them and train on them.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        cls=group_class,  # None: typer's own group
    )
    app.callback()(root)
    hide_flag_types()
    pm: pluggy.PluginManager | None
    if not lazy:
        pm = plugins.get_plugin_manager()
        plugins.register_modules(pm, COMMAND_PLUGINS)
    else:
        pm = plugins.current_plugin_manager()
        if pm is None and entry_point_plugins_installed():
            pm = plugins.get_plugin_manager()
    if pm is not None:
        pm.hook.agent_rl_register_commands(cli=app)
    return app


def main(argv: list[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``), built ``lazy``."""
    app = build_app(lazy=True)
    try:
        app(args=argv, prog_name="agent-rl", standalone_mode=True)
    except AgentRLError as exc:
        # Any error of the package's family that a command did not print itself: one line and
        # the fix (a message that carries its own "Fix: ..." is split there), never a traceback.
        # Messages are plain text (they can quote user input: a --where, a path), never markup.
        from rich.markup import escape

        message, _, inline_hint = str(exc).partition(" Fix: ")
        hint = getattr(exc, "hint", None) or inline_hint or None
        fail(escape(message), escape(hint) if hint else None)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
