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
already, or an installed distribution declares an ``agent_rl_plugin`` entry point. Before any
of that, :func:`main` offers the arguments to :mod:`agent_rl_plugin.cli.fast_path`, which runs
``query``, ``traces list`` and the root ``--help`` without typer (this module imports typer and
pluggy only when the app is built).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from agent_rl_plugin.cli.command_table import COMMAND_PLUGINS as COMMAND_PLUGINS
from agent_rl_plugin.cli.command_table import COMMAND_SUMMARIES as COMMAND_SUMMARIES
from agent_rl_plugin.cli.command_table import DISABLE_AUTOLOAD_ENV as DISABLE_AUTOLOAD_ENV
from agent_rl_plugin.cli.command_table import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from agent_rl_plugin.cli.command_table import ROOT_HELP as ROOT_HELP
from agent_rl_plugin.cli.command_table import VERSION_HELP
from agent_rl_plugin.cli.command_table import entry_point_plugins_installed as entry_point_plugins_installed
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.version import __version__

if TYPE_CHECKING:
    import pluggy
    import typer
    from typer.core import TyperGroup


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
        import typer

        sys.stdout.write(f"agent-rl {__version__}\n")
        raise typer.Exit(0)


def root_callback() -> Any:
    """The root callback (``--version``/``-V``), made on first use (typer is imported then)."""
    import typer

    def root(
        version: bool = typer.Option(
            False,
            "--version",
            "-V",
            callback=show_version,
            is_eager=True,
            expose_value=False,
            help=VERSION_HELP,
        ),
    ) -> None:
        """Record agents into DuckDB, look at what they did, score them and train on them."""

    return root


def build_app(*, lazy: bool = False) -> typer.Typer:
    """A fresh Typer app with every registered command.

    ``lazy=False``: the built-in command groups of :data:`COMMAND_PLUGINS` are first registered
    into the plugin manager in use (those already registered, under any name, are left as they
    are), then every plugin registers its commands. ``lazy=True`` (the console script): the
    built-ins are listed from :data:`COMMAND_SUMMARIES` and imported when one runs (see
    :mod:`agent_rl_plugin.cli.lazy_group`); only plugins in a manager that is set already, or
    one built because entry-point plugins are installed, register commands now. Both list the
    same commands with the same help."""
    import typer

    from agent_rl_plugin import plugins

    group_class: type[TyperGroup] | None = None
    if lazy:
        from agent_rl_plugin.cli.lazy_group import LazyGroup

        table = {name: (COMMAND_PLUGINS[plugin], summary) for name, (plugin, summary) in COMMAND_SUMMARIES.items()}
        group_class = type("AgentRLGroup", (LazyGroup,), {"lazy_commands": table})
    app = typer.Typer(
        name="agent-rl",
        help=ROOT_HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        cls=group_class,  # None: typer's own group
    )
    app.callback()(root_callback())
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


def report_error(exc: AgentRLError) -> None:
    """Print an error of the package's family that a command did not print itself: one line and
    the fix (a message that carries its own "Fix: ..." is split there), never a traceback, and
    exit 1. Messages are plain text (they can quote user input: a --where, a path), never markup."""
    from rich.markup import escape

    from agent_rl_plugin.cli.common import fail

    message, _, inline_hint = str(exc).partition(" Fix: ")
    hint = getattr(exc, "hint", None) or inline_hint or None
    fail(escape(message), escape(hint) if hint else None)


def main(argv: list[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``): through
    :func:`agent_rl_plugin.cli.fast_path.run` when it takes the arguments (same output, no
    typer), else through the app, built ``lazy``."""
    from agent_rl_plugin.cli import fast_path

    try:
        code = fast_path.run(sys.argv[1:] if argv is None else list(argv))
    except AgentRLError as exc:
        report_error(exc)
    if code is not None:
        sys.exit(code)
    app = build_app(lazy=True)
    try:
        app(args=argv, prog_name="agent-rl", standalone_mode=True)
    except AgentRLError as exc:
        report_error(exc)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
