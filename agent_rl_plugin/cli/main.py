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
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from agent_rl_plugin.cli.common import fail
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.plugins import get_plugin_manager, register_modules
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


def build_app() -> typer.Typer:
    """A fresh Typer app with every registered command: the built-in command groups of
    :data:`COMMAND_PLUGINS` are first registered into the plugin manager in use (those already
    registered, under any name, are left as they are)."""
    app = typer.Typer(
        name="agent-rl",
        help="Record agents into DuckDB, look at what they did, score them and train on them.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.callback()(root)
    hide_flag_types()
    pm = get_plugin_manager()
    register_modules(pm, COMMAND_PLUGINS)
    pm.hook.agent_rl_register_commands(cli=app)
    return app


def main(argv: list[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``)."""
    app = build_app()
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
