"""``agent-rl serve``: run the OTLP/HTTP receiver, the single writer of a database.

``agent-rl serve [--db PATH] [--host 127.0.0.1] [--port 4318] [--token T]`` receives
``POST /v1/traces`` (protobuf or JSON, gzip/deflate) from any number of agent processes
(``configure(otlp_endpoint="http://127.0.0.1:4318", db=None)``) and writes the spans into
``PATH``; it runs until SIGTERM or SIGINT (Ctrl-C), then writes everything it acknowledged and
exits 0. ``agent-rl serve --stats [--host --port]`` prints a running receiver's counters
(``--json`` for JSON). The token defaults to ``$AGENT_RL_SERVE_TOKEN``, else a random one made
at start and written to the 0600 ``<db>.serve.json`` (local clients, ``agent-rl query`` and
loopback OTLP exporters of this user pick it up). ``--no-token`` serves without one (loopback
only); a ``--host`` beyond loopback needs ``--token``. See docs/security.md and
:mod:`agent_rl_plugin.receiver` for the endpoints.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import typer

from agent_rl_plugin.cli.common import DbOption, UserError, console, db_path, err_console, print_json, stop_on_signal
from agent_rl_plugin.hookspecs import hookimpl

STATS_ORDER = (
    "requests",
    "batches_accepted",
    "batches_rejected",
    "spans_received",
    "spans_accepted",
    "spans_rejected",
    "spans_written",
    "spans_dropped",
    "queue_depth",
    "queue_limit",
    "decode_workers",
    "decode_worker_restarts",
    "queries",
    "uptime_s",
    "last_error",
    "db",
    "pid",
)


def _print_stats(stats: dict[str, Any], json_output: bool) -> None:
    if json_output:
        print_json(stats)
        return
    from rich.table import Table

    table = Table(show_header=False)
    table.add_column("counter", style="bold")
    table.add_column("value", justify="right")
    for key in STATS_ORDER:
        if key in stats:
            table.add_row(key, "" if stats[key] is None else str(stats[key]))
    console.print(table)


def serve(
    db: str = DbOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(4318, "--port", help="Port (4318 is OTLP/HTTP's; 0 picks a free one)."),
    token: Optional[str] = typer.Option(
        None,
        "--token",
        help="Require 'Authorization: Bearer TOKEN' (default: $AGENT_RL_SERVE_TOKEN).",
        show_default=False,
    ),
    no_token: bool = typer.Option(False, "--no-token", help="Serve without a token (loopback only)."),
    allow_host: list[str] = typer.Option(
        [],
        "--allow-host",
        help="Also answer requests for this Host name (e.g. a reverse proxy's public name); repeatable.",
    ),
    max_connections: int = typer.Option(
        64, "--max-connections", min=1, help="Connections served at once (more get 503)."
    ),
    stats: bool = typer.Option(False, "--stats", help="Print the counters of a running receiver and exit."),
    max_queue: int = typer.Option(
        200_000,
        "--max-queue",
        min=1,
        help="Spans waiting to be written before batches are refused with 503 (the exporters retry).",
    ),
    max_body_mb: int = typer.Option(64, "--max-body-mb", min=1, help="Largest request body (MiB), else 413."),
    json_output: bool = typer.Option(False, "--json", help="With --stats: print JSON."),
    ui: bool = typer.Option(True, "--ui/--no-ui", help="Serve the web UI at /ui (docs/ui.md)."),
    decode_workers: Optional[int] = typer.Option(
        None,
        "--decode-workers",
        min=0,
        help="Processes that decode request bodies (0: the receiver's own; default: one per CPU, at most 4).",
        show_default=False,
    ),
) -> None:
    """Receive OTLP/HTTP traces from many processes and write them into one DuckDB file."""
    if no_token and token:
        raise UserError("give --token or --no-token, not both")
    token = token if token is not None else os.environ.get("AGENT_RL_SERVE_TOKEN") or None
    if stats:
        from agent_rl_plugin.receiver.client import base_url, fetch_stats, token_for_endpoint

        token = token or token_for_endpoint(base_url(host, port))
        try:
            counters = fetch_stats(host, port, token)
        except PermissionError as exc:
            raise UserError(str(exc), "pass the receiver's token with --token") from None
        except OSError as exc:
            raise UserError(
                f"no receiver answers at {host}:{port} ({exc})",
                "start one with `agent-rl serve --db PATH`, or pass its --host/--port",
            ) from None
        _print_stats(counters, json_output)
        return

    from agent_rl_plugin.receiver import Receiver, ReceiverConfigError
    from agent_rl_plugin.receiver.workers import default_decode_workers
    from agent_rl_plugin.store.errors import StoreLockedError

    path = db_path(db)
    receiver = Receiver(
        path,
        host=host,
        port=port,
        token="" if no_token else token,
        max_pending_spans=max_queue,
        max_body_bytes=max_body_mb << 20,
        allowed_hosts=tuple(allow_host),
        max_connections=max_connections,
        decode_workers=default_decode_workers() if decode_workers is None else decode_workers,
    )
    if ui:
        from agent_rl_plugin.ui import ReceiverBackend, UiApp

        ui_app = UiApp(ReceiverBackend(receiver), token=receiver.token or None)
        receiver.mounts["/ui"] = ui_app
    try:
        receiver.start()
    except ReceiverConfigError as exc:
        raise UserError(str(exc), f'e.g. agent-rl serve --host {host} --token "$(openssl rand -hex 32)"') from None
    except StoreLockedError as exc:
        holder = f" (PID {exc.pid})" if exc.pid is not None else ""
        raise UserError(
            f"database {receiver.db} is locked: another process{holder} has it open for writing",
            "stop that process (if it is another `agent-rl serve`, point agents at it instead), "
            "or serve another --db path",
        ) from None
    except OSError as exc:
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", "pick another --port (or stop what uses it)"
        ) from None
    with stop_on_signal() as stop:
        err_console.print(
            f"agent-rl serve: writing [bold]{receiver.db}[/] — agents: "
            f'configure(otlp_endpoint="{receiver.url}", db=None); stop with Ctrl-C or SIGTERM',
            highlight=False,
        )
        if receiver.token_generated:
            err_console.print(
                f"agent-rl serve: a token was made for this run; local clients read it from "
                f"{receiver.db}.serve.json (mode 0600); other processes: export AGENT_RL_SERVE_TOKEN",
                highlight=False,
            )
        if receiver.pool is not None:
            err_console.print(f"agent-rl serve: {receiver.pool.workers} decode worker processes", highlight=False)
        elif receiver.decode_workers_refused:
            err_console.print(
                f"agent-rl serve: decoding in this process, no decode workers: {receiver.decode_workers_refused}",
                highlight=False,
            )
        if ui:
            err_console.print(f"agent-rl serve: the UI is at {ui_app.login_url(receiver.url)}", highlight=False)
        receiver.serve_until(stop)
    final = receiver.stats_snapshot()
    err_console.print(
        f"agent-rl serve: stopped; {final['spans_written']} spans written, "
        f"{final['spans_rejected']} rejected, {final['spans_dropped']} dropped",
        highlight=False,
    )


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("serve")(serve)
