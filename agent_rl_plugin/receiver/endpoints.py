"""The receiver's HTTP endpoints: :class:`Handler` answers each request for a
:class:`~agent_rl_plugin.receiver.server.Receiver`, served by :class:`Server`.

Endpoints (``http.server.ThreadingHTTPServer``, one thread per connection, at most
``max_connections`` at once: a connection over the cap gets **503** and is closed):

* ``POST /v1/traces``: an ``ExportTraceServiceRequest`` as protobuf (``application/x-protobuf``)
  or OTLP/JSON (``application/json``), optionally ``Content-Encoding: gzip``/``deflate``.
  Answers **200** with an empty ``ExportTraceServiceResponse`` in the request's format only
  after every span of the batch is in the writer's queue (``partial_success`` counts spans with
  invalid ids or that could not be converted); **400** with a message for a malformed body (the
  server keeps running); **415** for another Content-Type/Encoding; **413** for a body over
  ``max_body_bytes`` (compressed or not);
  **503** with ``Retry-After`` when the queue stayed full for ``admission_wait_s`` (the
  request is held that long first, its turn kept; nothing of the batch was taken: every OTLP
  exporter version retries a 503, not every one a 429), while shutting down or when the
  database cannot be opened; **413** for a batch with more spans than the whole queue
  (``max_pending_spans``: it could never fit); **401** without the bearer token when one is set. A missing
  Content-Type is **415** (a browser can send a body without one).
* ``GET /healthz``: ``{"status": "ok"}`` (200) while accepting, 503 while stopping.
* ``GET /stats``: the counters of :mod:`~agent_rl_plugin.receiver.stats` as JSON.
* ``POST /query`` (``Content-Type: application/json``): ``{"sql": "..."}``, checked by
  :func:`~agent_rl_plugin.store.user_sql.check_user_sql` (**403** when refused), then run on a
  locked read-only DuckDB instance over a copy of the database that holds everything accepted
  so far (:mod:`.copies`; never on the writer's connection), with a time limit
  (``query_timeout_s``; also interrupted when the client disconnects), a row and byte cap (a
  cut result carries ``X-Agent-RL-Truncated: rows|bytes``) and a memory limit; the result as an
  Arrow IPC stream, **400** with the message for an SQL error or a timeout. This is how
  ``agent-rl query`` reads a database the receiver holds, found through ``<db>.serve.json``.
* ``POST /snapshot`` (``application/json``): writes a consistent copy of the database (0600,
  under the 0700 folder ``<db>.snapshots/``) and answers ``{"path": ...}``;
  :func:`~agent_rl_plugin.store.connection.open_reader` in another process opens it read-only
  (and unlinks it). At most ``max_snapshots`` are kept, one per ``snapshot_interval_s`` (else
  **429** + ``Retry-After``). The folder is removed when the receiver stops.

Every request but ``GET /healthz`` is refused with **403** when its Host or Origin shows a web
page sent it (:class:`~agent_rl_plugin.receiver.guard.HostPolicy`), and **401** without the
bearer token. The token: ``token`` if given (``""`` disables it, only allowed on loopback), else
``$AGENT_RL_SERVE_TOKEN``, else a random one made at start and written to the 0600
``<db>.serve.json`` (and to this user's port entry, see :mod:`.client`) where local clients and
exporters read it. Bodies need a plain decimal ``Content-Length`` (411 when missing, 400 when
negative or not a number).
* A path under a mounted app's prefix (``mounts``, e.g. ``/ui``): handed to that app after the
  Host/Origin check; the app does its own authentication (:mod:`.mounts`).
* Anything else: 404 (405 for a wrong method on a known path).
"""

from __future__ import annotations

import hmac
import json
import logging
import select
import socket
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from agent_rl_plugin.receiver import client
from agent_rl_plugin.receiver.bounded import BoundedHTTPServer, busy_response
from agent_rl_plugin.receiver.copies import RateLimited
from agent_rl_plugin.receiver.decode import (
    JSON,
    PROTOBUF,
    BodyTooLarge,
    DecodeError,
    UnsupportedMediaType,
    encode_response,
    media_type,
)
from agent_rl_plugin.receiver.guard import content_length, is_media_type
from agent_rl_plugin.receiver.mounts import handle_with, mount_for
from agent_rl_plugin.receiver.workers import WorkerUnavailable, ipc_bytes
from agent_rl_plugin.store.user_sql import QueryCancelled, QueryTimeout, SqlRefused, UserSqlError

if TYPE_CHECKING:
    from agent_rl_plugin.receiver.server import Receiver

logger = logging.getLogger("agent_rl_plugin.receiver")

TRACES_PATH = "/v1/traces"
DEFAULT_PORT = 4318
DEFAULT_MAX_BODY = 64 << 20  # the OTLP exporter's own default request limit
RETRY_AFTER_S = 1
TRACES_TYPES = (PROTOBUF, JSON)
_BUSY_BODY = b'{"error": "too many connections: retry later", "code": 503}'
BUSY = busy_response(_BUSY_BODY)


class Server(BoundedHTTPServer):
    def __init__(self, address: tuple[str, int], receiver: Receiver) -> None:
        self.receiver = receiver
        super().__init__(address, Handler, max_connections=receiver.max_connections, busy=BUSY, logger=logger)

    def refused(self) -> None:
        self.receiver.stats.add(connections_refused=1)


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"  # keep-alive, as the OTLP exporter's session expects
    timeout = 60  # an idle connection is closed after a minute
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms ACK stalls
    error_content_type = "application/json"
    error_message_format = '{"error": "%(message)s", "code": %(code)d}'

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
        logger.debug("%s " + format, self.address_string(), *args)

    # --- responses ------------------------------------------------------------------------
    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(data).encode("utf-8"), JSON, headers)

    def _error(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(code, {"error": message, "code": code}, headers)

    def _authorized(self) -> bool:
        refusal = self.server.receiver.host_policy.refusal(self.headers)
        if refusal is not None:
            self.close_connection = True
            self._error(403, refusal)
            return False
        token = self.server.receiver.token
        if not token:
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return True
        self._error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        return False

    def _read_body(self, limit: int, media_types: tuple[str, ...] | None = None) -> bytes | None:
        """The request body, or ``None`` after answering 411/400/413/415 (the connection is then
        closed). ``media_types``: the Content-Types accepted (exactly; a missing one is 415)."""
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") is not None or length_header is None:
            self.close_connection = True
            self._error(411, "a Content-Length header is required (no Transfer-Encoding)")
            return None
        length = content_length(length_header)
        if length is None:
            self.close_connection = True
            self._error(400, f"bad Content-Length {length_header[:40]!r}: a non-negative decimal number is required")
            return None
        if media_types is not None and not is_media_type(self.headers.get("Content-Type"), media_types):
            self.close_connection = True
            self._error(
                415,
                f"Content-Type must be {' or '.join(media_types)}, not {self.headers.get('Content-Type') or 'missing'}",
            )
            return None
        if length > limit:
            self.close_connection = True  # the unread body makes the connection unusable
            self._error(413, f"body of {length} bytes exceeds the limit of {limit} bytes")
            return None
        return self.rfile.read(length) if length else b""

    # --- routes ---------------------------------------------------------------------------
    def _mounted(self) -> bool:
        """Hand the request to the app mounted at its path, if any (after the Host/Origin check;
        the app authenticates it itself): True when handled."""
        app = mount_for(self.server.receiver.mounts, urllib.parse.unquote(self.path.split("?", 1)[0]))
        if app is None:
            return False
        refusal = self.server.receiver.host_policy.refusal(self.headers)
        if refusal is not None:
            self.close_connection = True
            self._error(403, refusal)
        else:
            handle_with(self, app)
        return True

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        if not self._mounted():
            self._error(405, "HEAD is only answered for mounted apps", {"Allow": "GET, POST"})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self._mounted():
            return
        path = self.path.split("?", 1)[0]
        receiver = self.server.receiver
        if path == "/healthz":
            if receiver.stopping:
                self._json(503, {"status": "stopping"})
            else:
                self._json(200, {"status": "ok"})
        elif path == "/stats":
            if self._authorized():
                self._json(200, receiver.stats_snapshot())
        elif path in (TRACES_PATH, "/query"):
            self._error(405, f"use POST for {path}", {"Allow": "POST"})
        else:
            self._error(404, f"no such path {path}: the traces endpoint is POST {TRACES_PATH}")

    def do_POST(self) -> None:  # noqa: N802
        if self._mounted():
            return
        path = self.path.split("?", 1)[0]
        if path == TRACES_PATH:
            self._traces()
        elif path == "/query":
            self._query()
        elif path == "/snapshot":
            if self._authorized() and self._read_body(1 << 16, (JSON,)) is not None:
                try:
                    self._json(200, {"path": self.server.receiver.snapshot()})
                except RateLimited as exc:
                    self._error(429, str(exc), {"Retry-After": str(max(1, round(exc.retry_after_s + 0.5)))})
                except Exception as exc:
                    self._error(503, f"cannot write a snapshot now: {_first_line(exc)}")
        elif path in ("/healthz", "/stats"):
            self._error(405, f"use GET for {path}", {"Allow": "GET"})
        else:
            self.close_connection = True
            self._error(404, f"no such path {path}: the traces endpoint is POST {TRACES_PATH}")

    def _traces(self) -> None:
        receiver = self.server.receiver
        stats = receiver.stats
        stats.add(requests=1)
        if not self._authorized():
            stats.add(batches_rejected=1)
            return
        body = self._read_body(receiver.max_body_bytes, TRACES_TYPES)
        if body is None:
            stats.add(batches_rejected=1)
            return
        kind = PROTOBUF
        try:
            kind = media_type(self.headers.get("Content-Type"))
            decoded = receiver.decode(body, kind, self.headers.get("Content-Encoding"))
        except BodyTooLarge as exc:
            stats.add(batches_rejected=1)
            self._error(413, str(exc))
            return
        except UnsupportedMediaType as exc:
            stats.add(batches_rejected=1)
            self._error(415, str(exc))
            return
        except DecodeError as exc:
            stats.add(batches_rejected=1)
            stats.error(str(exc))
            self._error(400, str(exc))
            return
        except WorkerUnavailable as exc:  # nothing of the body was taken: the exporter retries
            stats.add(batches_rejected=1)
            stats.error(str(exc))
            self._error(503, str(exc), {"Retry-After": str(RETRY_AFTER_S)})
            return
        stats.add_time(decode_s=decoded.decode_s)
        total = decoded.total  # every span of the request: decoded, or left out for its ids
        invalid = decoded.invalid
        stats.add(spans_received=total)
        outcome = receiver.accept_batch(decoded.batch, decoded.convert_s)
        if outcome is not None:
            stats.add_time(convert_s=outcome.convert_s)
            if outcome.delayed:
                stats.add(batches_delayed=1)
        if outcome is None or outcome.status != "ok":
            stats.add(batches_rejected=1, spans_rejected=total)
            if outcome is not None and outcome.status == "too_large":
                limit = receiver.sink.max_pending_spans
                hint = "lower the exporter's max_export_batch_size or raise agent-rl serve --max-queue"
                self._error(413, f"{total} spans in one batch, the whole queue holds {limit}: {hint}")
            elif outcome is not None and outcome.status == "full":  # 503: every exporter retries it, not 429
                self._error(503, "queue full: retry later", {"Retry-After": str(RETRY_AFTER_S)})
            else:
                self._error(
                    503,
                    "not accepting spans now (shutting down or database unavailable)",
                    {"Retry-After": str(RETRY_AFTER_S)},
                )
            return
        rejected = invalid + outcome.failed
        stats.add(batches_accepted=1, spans_accepted=outcome.queued, spans_rejected=rejected)
        message = f"{rejected} spans had invalid ids or could not be converted" if rejected else ""
        self._send(200, encode_response(kind, rejected, message), kind)

    def _query(self) -> None:
        receiver = self.server.receiver
        if not self._authorized():
            return
        body = self._read_body(1 << 20, (JSON,))
        if body is None:
            return
        try:
            sql = json.loads(body)["sql"]
            if not isinstance(sql, str):
                raise TypeError("sql must be a string")
        except (ValueError, KeyError, TypeError) as exc:
            self._error(400, f'expected a JSON body {{"sql": "..."}}: {exc}')
            return
        try:
            result = receiver.query(sql, cancel=self._client_gone)
        except SqlRefused as exc:
            self._error(403, str(exc))
            return
        except QueryCancelled:
            self.close_connection = True
            return
        except (UserSqlError, QueryTimeout) as exc:
            self._error(400, str(exc))
            return
        except Exception as exc:
            self._error(503, f"cannot read the database now: {_first_line(exc)}")
            return
        headers = {client.TRUNCATED_HEADER: result.reason} if result.truncated and result.reason else None
        self._send(200, ipc_bytes(result.table), client.ARROW_STREAM, headers)

    def _client_gone(self) -> bool:
        """True once the client closed its side of the connection (the query is then stopped)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
