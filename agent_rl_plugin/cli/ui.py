"""``agent-rl ui``: the live web UI over a store, on 127.0.0.1 (``docs/ui.md``).

``agent-rl ui [--db PATH] [--port 4320] [--host 127.0.0.1] [--token T | --no-token]
[--labeller NAME] [--open] [--json]`` serves the UI until SIGTERM or Ctrl-C and prints the link
to open (it carries the access token; ``--json``: one line ``{"url", "db", "port"}``). Agents
may keep recording into the file meanwhile: the page shows new rollouts as they land. A file
held by ``agent-rl serve`` is not opened here: that receiver serves the same UI at ``/ui``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import typer

from agent_rl_plugin.cli.common import DbOption, UserError, db_path, err_console, stop_on_signal
from agent_rl_plugin.hookspecs import hookimpl

DEFAULT_UI_PORT = 4320


def ui_command(
    db: str = DbOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(DEFAULT_UI_PORT, "--port", help="Port (0 picks a free one)."),
    token: Optional[str] = typer.Option(
        None, "--token", help="Access token (default: $AGENT_RL_UI_TOKEN, else a random one).", show_default=False
    ),
    no_token: bool = typer.Option(False, "--no-token", help="Serve without a token (loopback only)."),
    labeller: Optional[str] = typer.Option(None, "--labeller", help="Author of the labels written (default: $USER)."),
    allow_host: list[str] = typer.Option([], "--allow-host", help="Also answer this Host name; repeatable."),
    open_browser: bool = typer.Option(False, "--open", help="Open the link in the default browser."),
    json_output: bool = typer.Option(False, "--json", help='Print one JSON line {"url", "db", "port"}.'),
) -> None:
    """Browse rollouts, label them and run SQL in a live local web UI."""
    from agent_rl_plugin.receiver.client import is_loopback
    from agent_rl_plugin.store.announcements import find_receiver, receiver_url
    from agent_rl_plugin.ui.server import UiConfigError, serve_ui

    if no_token and token:
        raise UserError("give --token or --no-token, not both")
    if no_token and not is_loopback(host):
        raise UserError(f"--no-token is only allowed on loopback, not {host!r}", "give --token instead")
    path = db_path(db)
    if not os.path.exists(path):
        raise UserError(
            f"no database at {path}",
            "record some rollouts first (or `agent-rl demo --tour --db PATH`), or pass --db",
        )
    served = find_receiver(path)
    if served is not None:
        raise UserError(
            f"{path} is held by `agent-rl serve` (PID {served.get('pid')}), which serves this UI itself",
            f"open {receiver_url(served)}/ui/ (the link `agent-rl serve` printed carries the token)",
        )
    try:
        server = serve_ui(
            path,
            host=host,
            port=port,
            token="" if no_token else token,
            labeller=labeller,
            allowed_hosts=tuple(allow_host),
        )
    except UiConfigError as exc:
        raise UserError(str(exc), exc.hint) from None
    except OSError as exc:
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", "pick another --port (0 picks a free one)"
        ) from None
    with stop_on_signal() as stop:
        if json_output:
            sys.stdout.write(json.dumps({"url": server.url, "db": path, "port": server.port}) + "\n")
            sys.stdout.flush()
        else:
            err_console.print(f"agent-rl ui: [bold]{path}[/] at\n\n  {server.url}\n", highlight=False, soft_wrap=True)
            err_console.print("Open the link (it carries the access token); stop with Ctrl-C.", highlight=False)
        if open_browser:
            import webbrowser

            webbrowser.open(server.url)
        try:
            stop.wait()
        finally:
            server.stop()


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("ui")(ui_command)
