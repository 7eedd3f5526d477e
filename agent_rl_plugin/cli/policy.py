"""``agent-rl policy serve``: an OpenAI-compatible chat-completions server over a local policy
(a transformers model plus an optional LoRA adapter), so agents call the policy being trained
like any LLM (see docs/policy-server.md and :mod:`agent_rl_plugin.policy.server`).

``agent-rl policy serve --model PATH [--adapter PATH] [--host 127.0.0.1] [--port 0]
[--adapter-root DIR] [--api-key-env VAR] [--allow-download]`` loads the model (offline: a local
directory or a cached name, unless ``--allow-download``), prints the OpenAI base URL
(``http://HOST:PORT/v1``, the real port when ``--port 0``) as the only line on stdout, and serves
until SIGTERM or SIGINT (Ctrl-C), then exits 0. The API key is read from the environment variable
named by ``--api-key-env`` (never from the command line, where other users could see it); a
``--host`` beyond loopback needs one. Runtime adapter loading (``POST /v1/load_lora_adapter``) is
allowed only with ``--adapter-root``, for adapters under that folder.
"""

from __future__ import annotations

import os
from typing import Optional

import typer

from agent_rl_plugin.cli.common import UserError, err_console, stop_on_signal
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Serve the policy being trained over OpenAI's chat-completions API.", no_args_is_help=True)


@app.command("serve")
def serve(
    model: str = typer.Option(
        ..., "--model", "-m", help="Model to load: a local directory, or a hub name already in the cache."
    ),
    allow_download: bool = typer.Option(
        False,
        "--allow-download",
        metavar="",
        help="Download --model from the Hugging Face hub when it is neither local nor cached (default: offline; "
        "also AGENT_RL_ALLOW_DOWNLOAD=1).",
    ),
    adapter: Optional[str] = typer.Option(None, "--adapter", help="LoRA adapter directory to start with."),
    adapter_name: str = typer.Option(
        "adapter", "--adapter-name", help="Model name requests use for the --adapter (and /v1/models shows)."
    ),
    served_model_name: Optional[str] = typer.Option(
        None, "--served-model-name", help="Name of the base model in requests (default: --model, as vLLM)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port (0 picks a free one; the URL is printed)."),
    adapter_root: Optional[str] = typer.Option(
        None,
        "--adapter-root",
        help="Allow POST /v1/load_lora_adapter for adapters under this folder (off without it).",
    ),
    api_key_env: Optional[str] = typer.Option(
        None,
        "--api-key-env",
        help="Environment variable holding the API key clients must send as 'Authorization: Bearer KEY'.",
    ),
    allow_host: list[str] = typer.Option(
        [], "--allow-host", help="Also answer requests for this Host name (a reverse proxy's); repeatable."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the policy's sampling generator."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch CPU threads (default: torch's)."),
    max_body_mb: int = typer.Option(8, "--max-body-mb", min=1, help="Largest request body (MiB), else 413."),
) -> None:
    """Serve a local policy over OpenAI's chat-completions API (vLLM-compatible LoRA endpoints)."""
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env) or None
        if api_key is None:
            raise UserError(
                f"--api-key-env {api_key_env}: that environment variable is not set or empty",
                f'export {api_key_env}="$(openssl rand -hex 32)" before starting the server',
            )
    from agent_rl_plugin.receiver.client import is_loopback

    if api_key is None and not is_loopback(host):  # checked before the model loads (PolicyServer checks too)
        raise UserError(
            f"refusing to serve the policy on {host!r} (beyond loopback) without an API key",
            'export AGENT_RL_POLICY_KEY="$(openssl rand -hex 32)" and add --api-key-env AGENT_RL_POLICY_KEY',
        )
    from agent_rl_plugin.policy import LocalPolicy
    from agent_rl_plugin.policy.local import PolicyError
    from agent_rl_plugin.policy.server import PolicyServer
    from agent_rl_plugin.train.loading import cli_hint

    try:
        policy = LocalPolicy(model, adapter=adapter, seed=seed, threads=threads, allow_download=allow_download)
    except PolicyError as exc:
        raise UserError(str(exc), cli_hint(exc.hint)) from None
    server = PolicyServer(
        policy,
        host=host,
        port=port,
        api_key=api_key,
        adapter_root=adapter_root,
        model_name=served_model_name,
        adapter_name=adapter_name,
        max_body_bytes=max_body_mb << 20,
        allowed_hosts=tuple(allow_host),
    )
    try:
        server.start()
    except OSError as exc:
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", "pick another --port (or stop what uses it)"
        ) from None
    with stop_on_signal() as stop:
        print(f"{server.url}/v1", flush=True)
        names = server.model_name + (f", {server.adapter_name} ({policy.version})" if server.adapter_name else "")
        err_console.print(
            f"agent-rl policy: serving {names} at {server.url}/v1"
            + ("" if server.adapter_root is None else f"; adapters load from {server.adapter_root}")
            + "; stop with Ctrl-C or SIGTERM",
            highlight=False,
        )
        try:
            stop.wait()
        finally:
            server.stop()


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="policy")
