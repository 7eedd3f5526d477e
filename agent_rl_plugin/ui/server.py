""":func:`serve_ui`: the UI alone over a database file (what ``agent-rl ui`` runs).

Contract: binds ``host:port`` (0: a free port) and serves :class:`~agent_rl_plugin.ui.app.UiApp`
in a background thread; :attr:`UiServer.url` is the link to open (with the token). A token is
made at random unless given; ``token=""`` (none) is refused beyond loopback, as the receiver
refuses it, and so is a made-up token there (give one explicitly).
"""

from __future__ import annotations

import os
import secrets

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.receiver.client import is_loopback
from agent_rl_plugin.receiver.mounts import AppServer, serve_app
from agent_rl_plugin.store.announcements import base_url
from agent_rl_plugin.ui.app import UiApp
from agent_rl_plugin.ui.backend import FileBackend

TOKEN_ENV = "AGENT_RL_UI_TOKEN"


class UiConfigError(AgentRLError, ValueError):
    """The UI cannot start as configured; ``str(error)`` names the fix."""


class UiServer:
    """A running UI (see :func:`serve_ui`)."""

    def __init__(self, app: UiApp, server: AppServer, host: str) -> None:
        self.app, self._server, self.host = app, server, host

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        """The link to open: the page with ``?token=`` when a token is required."""
        return self.app.login_url(base_url(self.host, self.port))

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> UiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_ui(
    db: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    labeller: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
) -> UiServer:
    """Serve the UI over the database file ``db`` (see the module contract). ``token=None``:
    ``$AGENT_RL_UI_TOKEN``, else a random one. Raises :class:`UiConfigError` or ``OSError``."""
    explicit = os.environ.get(TOKEN_ENV) or None if token is None else token
    if not is_loopback(host) and not explicit:
        raise UiConfigError(
            f"refusing to serve the UI on {host!r} (beyond loopback) without an explicit token: anyone who can "
            "reach the port could read the store and write labels",
            f"pass --token (or set {TOKEN_ENV}), ideally behind a TLS terminator (see docs/security.md)",
        )
    app = UiApp(FileBackend(db), token=secrets.token_urlsafe(32) if explicit is None else explicit, labeller=labeller)
    server = serve_app(app, host, port, allowed_hosts=allowed_hosts)
    return UiServer(app, server, host)
