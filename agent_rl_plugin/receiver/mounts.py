"""Mounted web apps: a path prefix of an HTTP server handed to an app object.

An app is a callable ``app(request) -> response`` over :class:`Request` and :class:`Response`
(plain data, no framework). :class:`~agent_rl_plugin.receiver.server.Receiver` takes
``mounts={"/ui": app}`` and hands every request under the prefix (``/ui`` and ``/ui/...``) to
the app after its Host/Origin check (:class:`~agent_rl_plugin.receiver.guard.HostPolicy`) but
**without** its bearer-token check: a mounted app authenticates requests itself (a browser
cannot send a bearer header when it follows a link). :func:`serve_app` serves one app alone,
on the same bounded server the receiver uses (``agent-rl ui``).

Contract of the plumbing, for every mounted request: the body is read only with a plain
decimal ``Content-Length`` (411 without one on POST, 400 when malformed, 413 over
``max_body_bytes``); methods other than GET, HEAD and POST get 405; an exception raised by the
app is logged and answered 500 with no detail; ``HEAD`` gets the GET answer without its body.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Mapping

from agent_rl_plugin.receiver.bounded import BoundedHTTPServer, busy_response
from agent_rl_plugin.receiver.guard import HostPolicy, content_length

logger = logging.getLogger("agent_rl_plugin.receiver.mounts")

MAX_APP_BODY = 1 << 20
_BUSY = busy_response(b'{"error": "too many connections: retry later", "code": 503}')


@dataclass(frozen=True)
class Request:
    """One HTTP request as a mounted app sees it. ``target``: the path and query as sent."""

    method: str
    target: str
    headers: Mapping[str, str] | Message
    body: bytes = b""
    client: str = ""

    @property
    def path(self) -> str:
        """The path, percent-decoded."""
        return urllib.parse.unquote(self.target.split("?", 1)[0])

    @property
    def raw_path(self) -> str:
        """The path as sent (percent-encoding kept, so an encoded ``/`` stays inside one segment)."""
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> dict[str, str]:
        """Query parameters, the last value of each name."""
        return dict(urllib.parse.parse_qsl(self.target.partition("?")[2], keep_blank_values=True))

    def header(self, name: str) -> str | None:
        """A header's value or ``None``."""
        return self.headers.get(name)


@dataclass
class Response:
    """An app's answer. ``headers``: extra headers (``Content-Type`` and ``Content-Length`` are set)."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


App = Callable[[Request], Response]


def mount_for(mounts: Mapping[str, App], path: str) -> App | None:
    """The app mounted at ``path``'s prefix (``/ui`` serves ``/ui`` and ``/ui/...``), or ``None``."""
    for prefix, app in mounts.items():
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            return app
    return None


def handle_with(handler: BaseHTTPRequestHandler, app: App, max_body_bytes: int = MAX_APP_BODY) -> None:
    """Answer the request ``handler`` holds with ``app`` (see the module contract)."""
    method = handler.command
    if method not in ("GET", "HEAD", "POST"):
        _send(handler, Response(405, b'{"error": "method not allowed"}', headers=[("Allow", "GET, HEAD, POST")]))
        return
    body = b""
    if method == "POST" or handler.headers.get("Content-Length") is not None:
        header = handler.headers.get("Content-Length")
        if handler.headers.get("Transfer-Encoding") is not None or header is None:
            handler.close_connection = True
            _send(handler, Response(411, b'{"error": "a Content-Length header is required"}'))
            return
        length = content_length(header)
        if length is None:
            handler.close_connection = True
            _send(handler, Response(400, b'{"error": "bad Content-Length"}'))
            return
        if length > max_body_bytes:
            handler.close_connection = True
            _send(handler, Response(413, b'{"error": "request body too large"}'))
            return
        body = handler.rfile.read(length) if length else b""
    request = Request(method, handler.path, handler.headers, body, handler.client_address[0])
    try:
        response = app(request)
    except Exception:  # noqa: BLE001 - the app's bug must not kill the server; the log has it
        logger.exception("agent-rl: the app at %s failed", request.path)
        response = Response(500, b'{"error": "internal error (see the server log)"}')
    _send(handler, response)


def _send(handler: BaseHTTPRequestHandler, response: Response) -> None:
    handler.send_response(response.status)
    handler.send_header("Content-Type", response.content_type)
    handler.send_header("Content-Length", str(len(response.body)))
    for name, value in response.headers:
        handler.send_header(name, value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(response.body)


class _AppServer(BoundedHTTPServer):
    app: App
    policy: HostPolicy


class _AppHandler(BaseHTTPRequestHandler):
    server: _AppServer
    protocol_version = "HTTP/1.1"
    timeout = 60
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
        logger.debug("%s " + format, self.address_string(), *args)

    def _serve(self) -> None:
        refusal = self.server.policy.refusal(self.headers)
        if refusal is not None:
            self.close_connection = True
            _send(self, Response(403, json.dumps({"error": refusal}).encode()))
            return
        handle_with(self, self.server.app)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _serve  # noqa: N815


class AppServer:
    """``app`` served alone on ``host:port`` in a background thread (:func:`serve_app`)."""

    def __init__(self, server: _AppServer) -> None:
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="agent-rl app server", daemon=True
        )

    @property
    def port(self) -> int:
        """The port served on (the real one when started with port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> AppServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def serve_app(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    allowed_hosts: tuple[str, ...] = (),
    max_connections: int = 32,
) -> AppServer:
    """Bind ``host:port`` (0: a free port) and serve ``app`` in a background thread. Requests
    whose Host or Origin show another site are refused (403) as the receiver does. Raises
    ``OSError`` when the address cannot be bound."""
    server = _AppServer((host, port), _AppHandler, max_connections=max_connections, busy=_BUSY, logger=logger)
    server.app = app
    server.policy = HostPolicy(host, allowed_hosts)
    return AppServer(server).start()
