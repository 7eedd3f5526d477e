"""Entry point of ``agent-rl``: builds the app from the ``agent_rl_register_commands`` hook.

Every command group (built-in or from an outside plugin) registers itself through the hook, so
``agent-rl --help`` lists exactly what is installed. Errors that users can fix are printed as
one line plus the fix, with a non-zero exit code, never as a traceback.
"""

from __future__ import annotations

import sys

import typer

from agent_rl_plugin.cli.common import UserError, fail
from agent_rl_plugin.plugins import get_plugin_manager
from agent_rl_plugin.store.errors import StoreError


def build_app() -> typer.Typer:
    """A fresh Typer app with every registered command."""
    app = typer.Typer(
        name="agent-rl",
        help="Record agents into DuckDB, look at what they did, score them and train on them.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    get_plugin_manager().hook.agent_rl_register_commands(cli=app)
    return app


def main(argv: list[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``)."""
    app = build_app()
    try:
        app(args=argv, prog_name="agent-rl", standalone_mode=True)
    except UserError as exc:
        fail(str(exc), exc.hint)
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        fail(message, hint or None)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
