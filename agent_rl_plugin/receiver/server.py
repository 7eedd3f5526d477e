"""``Receiver``: the OTLP/HTTP traces endpoint that is the single writer of a DuckDB file.

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

Lifecycle: :meth:`Receiver.start` opens the database (a locked file raises
:class:`~agent_rl_plugin.store.errors.StoreLockedError` there, not later), binds (port 0 picks a
free port, see :attr:`Receiver.port`), writes ``<db>.serve.json`` and serves in a background
thread. :meth:`Receiver.stop` refuses new batches (503), waits for requests in flight, writes
everything accepted, closes the database and removes ``<db>.serve.json``.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import select
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any, TypedDict

import pyarrow as pa

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.receiver import client
from agent_rl_plugin.receiver.bounded import BoundedHTTPServer, busy_response
from agent_rl_plugin.receiver.copies import Copies, RateLimited, content_key
from agent_rl_plugin.receiver.decode import (
    JSON,
    PROTOBUF,
    BodyTooLarge,
    DecodeError,
    UnsupportedMediaType,
    decode_body,
    encode_response,
    fields_from_request,
    media_type,
)
from agent_rl_plugin.receiver.guard import HostPolicy, content_length, is_media_type
from agent_rl_plugin.receiver.mounts import App, handle_with, mount_for
from agent_rl_plugin.receiver.sink import SpanSink
from agent_rl_plugin.receiver.stats import ReceiverStats
from agent_rl_plugin.store.announcements import base_url, remove_info, write_info
from agent_rl_plugin.store.user_sql import (
    QueryCancelled,
    QueryResult,
    QueryTimeout,
    SqlRefused,
    UserSqlError,
    check_user_sql,
    open_locked,
    run_locked,
)

logger = logging.getLogger("agent_rl_plugin.receiver")

TRACES_PATH = "/v1/traces"
DEFAULT_PORT = 4318
DEFAULT_MAX_BODY = 64 << 20  # the OTLP exporter's own default request limit
RETRY_AFTER_S = 1
TRACES_TYPES = (PROTOBUF, JSON)
_BUSY_BODY = b'{"error": "too many connections: retry later", "code": 503}'
BUSY = busy_response(_BUSY_BODY)


class _QueryLimits(TypedDict):
    """The limits :meth:`Receiver.query` passes to ``run_locked``."""

    timeout_s: float
    max_rows: int
    max_bytes: int


class ReceiverConfigError(AgentRLError, ValueError):
    """The receiver cannot start as configured; ``str(error)`` names the fix."""


class _Server(BoundedHTTPServer):
    def __init__(self, address: tuple[str, int], receiver: Receiver) -> None:
        self.receiver = receiver
        super().__init__(address, _Handler, max_connections=receiver.max_connections, busy=BUSY, logger=logger)

    def refused(self) -> None:
        self.receiver.stats.add(connections_refused=1)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
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
        started = time.thread_time()
        try:
            kind = media_type(self.headers.get("Content-Type"))
            request = decode_body(body, kind, self.headers.get("Content-Encoding"), max_bytes=receiver.max_body_bytes)
            fields, invalid = fields_from_request(request)
            stats.add_time(decode_s=time.thread_time() - started)
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
        except Exception as exc:  # anything else the decoder hits is still the body's fault
            stats.add(batches_rejected=1)
            stats.error(f"{type(exc).__name__}: {exc}")
            self._error(400, f"could not decode the body: {type(exc).__name__}: {exc}")
            return
        total = len(fields) + invalid  # every span of the request: decoded, or left out for its ids
        stats.add(spans_received=total)
        outcome = receiver.accept(fields, as_fields=True)
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
        self._send(200, _arrow_bytes(result.table), client.ARROW_STREAM, headers)

    def _client_gone(self) -> bool:
        """True once the client closed its side of the connection (the query is then stopped)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


def _arrow_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Receiver:
    """OTLP/HTTP receiver writing into the DuckDB file ``db`` (see the module contract).

    ``token``: bearer token required on every request but ``/healthz`` (default:
    ``$AGENT_RL_SERVE_TOKEN``, else a random one made here; ``""`` disables it, refused by
    :meth:`start` on a host beyond loopback, as is a made-up token). ``allowed_hosts``: more Host
    names to answer (a reverse proxy's public name). ``max_pending_spans``: the queue bound (spans
    accepted and not yet committed) beyond which batches wait up to ``admission_wait_s`` for room,
    first come first served, then get 503 (:class:`~agent_rl_plugin.receiver.sink.SpanSink`;
    ``0``: 503 at once). ``max_connections``: open
    connections served at once. ``query_*``: the limits of ``/query``. ``mounts``: path prefix →
    app (:mod:`~agent_rl_plugin.receiver.mounts`; ``agent-rl serve`` mounts the UI at ``/ui``),
    also settable on :attr:`mounts` before :meth:`start`. ``write_delay_s``: test hook
    (see :mod:`~agent_rl_plugin.receiver.sink`). ``announce``: write ``<db>.serve.json`` (and, on
    loopback with a token, this user's port entry that local exporters read).
    """

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        max_pending_spans: int = 200_000,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        batch_rows: int = 50_000,
        linger_s: float = 0.25,
        write_delay_s: float = 0.0,
        announce: bool = True,
        allowed_hosts: tuple[str, ...] | list[str] = (),
        max_connections: int = 64,
        query_timeout_s: float = 30.0,
        query_max_rows: int = 100_000,
        query_max_bytes: int = 64 << 20,
        query_memory_limit: str = "1GB",
        max_snapshots: int = 4,
        snapshot_interval_s: float = 0.5,
        admission_wait_s: float = 1.0,
        mounts: dict[str, App] | None = None,
    ) -> None:
        self.db = os.path.abspath(os.fspath(db))
        self.mounts: dict[str, App] = dict(mounts or {})
        self.host = host
        self._requested_port = port
        explicit = os.environ.get(client.TOKEN_ENV) or None if token is None else token
        self.token_generated = explicit is None
        self.token = secrets.token_urlsafe(32) if explicit is None else explicit
        self.host_policy = HostPolicy(host, allowed_hosts)
        self.max_connections = max_connections
        self.query_limits: _QueryLimits = {
            "timeout_s": query_timeout_s,
            "max_rows": query_max_rows,
            "max_bytes": query_max_bytes,
        }
        self.query_memory_limit = query_memory_limit
        self.max_body_bytes = max_body_bytes
        self.announce = announce
        self.stats = ReceiverStats()
        self.sink = SpanSink(
            self.db,
            max_pending_spans=max_pending_spans,
            batch_rows=batch_rows,
            linger_s=linger_s,
            write_delay_s=write_delay_s,
            admission_wait_s=admission_wait_s,
        )
        self.copies = Copies(
            self.db + ".snapshots", self.sink.cursor, max_kept=max_snapshots, min_interval_s=snapshot_interval_s
        )
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._gate = threading.Condition()
        self._in_flight = 0
        self.stopping = False
        self._stopped = False

    # --- lifecycle ------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port served on (the real one when started with port 0)."""
        if self._server is None:
            return self._requested_port
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port`` for clients (the traces endpoint is ``url + "/v1/traces"``)."""
        return base_url(self.host, self.port)

    def start(self) -> Receiver:
        """Open the database, bind, announce and serve in a background thread; returns self.
        Raises :class:`ReceiverConfigError` for a host beyond loopback without an explicit token."""
        if not client.is_loopback(self.host) and (not self.token or self.token_generated):
            raise ReceiverConfigError(
                f"refusing to listen on {self.host!r} (beyond loopback) without a token: anyone who can reach "
                "the port could write spans and read the database; pass --token (or set AGENT_RL_SERVE_TOKEN) "
                "and give it to the agents, ideally behind a TLS terminator (see docs/security.md)"
            )
        try:
            self.sink.open()
            self._server = _Server((self.host, self._requested_port), self)
        except BaseException:
            self.sink.close()
            raise
        if self.announce:
            write_info(self.db, self.host, self.port, self.token or None)
            if self.token and client.is_loopback(self.host):
                client.write_port_entry(self.port, self.token, self.db)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"agent-rl serve :{self.port}",
            daemon=True,
        )
        self._thread.start()
        logger.info("agent-rl serve: listening on %s, writing %s", self.url, self.db)
        return self

    def __enter__(self) -> Receiver:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 120.0) -> dict[str, Any]:
        """Refuse new batches, finish those in flight, write everything accepted, close.
        Idempotent; returns the final stats."""
        with self._gate:
            if self._stopped:
                return self.stats_snapshot()
            self.stopping = True
            self._gate.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)
        try:
            self.sink.close(timeout_s)
        finally:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
            if self.announce:
                remove_info(self.db)
                client.remove_port_entry(self.port)
            self.copies.clear()
            with self._gate:
                self._stopped = True
        return self.stats_snapshot()

    def serve_until(self, event: threading.Event) -> None:
        """Block until ``event`` is set (e.g. by a signal handler), then :meth:`stop`."""
        try:
            while not event.wait(0.5):
                pass
        finally:
            self.stop()

    # --- work -----------------------------------------------------------------------------
    def accept(self, spans: list, *, as_fields: bool = False) -> Any:
        """Queue ``spans`` unless stopping (``None`` then); see :meth:`SpanSink.accept` (and
        :meth:`SpanSink.accept_fields` with ``as_fields``: the converter's field tuples)."""
        with self._gate:
            if self.stopping:
                return None
            self._in_flight += 1
        try:
            return self.sink.accept_fields(spans) if as_fields else self.sink.accept(spans)
        finally:
            with self._gate:
                self._in_flight -= 1
                self._gate.notify_all()

    def query(self, sql: str, cancel: Any = None) -> QueryResult:
        """Check ``sql`` and run it on a locked read-only instance over a current copy (see the
        module contract). Raises :class:`~agent_rl_plugin.store.user_sql.UserSqlError` (refused,
        failed, timed out, cancelled)."""
        check_user_sql(sql)
        cursor = self.sink.cursor()  # after a flush: everything accepted is committed
        try:
            key = content_key(cursor)
        finally:
            cursor.close()
        with self.copies.for_query(key) as path:
            connection = open_locked(path, memory_limit=self.query_memory_limit)
            try:
                result = run_locked(connection, sql, cancel=cancel, **self.query_limits)
            finally:
                connection.close()
        self.stats.add(queries=1)
        return result

    def query_arrow(self, sql: str) -> bytes:
        """:meth:`query`, the result as Arrow IPC stream bytes."""
        return _arrow_bytes(self.query(sql).table)

    @property
    def snapshot_dir(self) -> str:
        """Where :meth:`snapshot` writes copies (removed by :meth:`stop`)."""
        return self.db + ".snapshots"

    def snapshot(self) -> str:
        """Copy the database (everything accepted so far, committed) to a new 0600 file; its
        path. Raises :class:`~agent_rl_plugin.receiver.copies.RateLimited` when asked too often."""
        path = self.copies.snapshot()
        self.stats.add(snapshots=1)
        return path

    def stats_snapshot(self) -> dict[str, Any]:
        """Counters (see :mod:`~agent_rl_plugin.receiver.stats`), the writer's included."""
        snapshot = self.stats.snapshot()
        written = self.sink.written()
        snapshot.update(
            spans_written=written["spans_written"],
            spans_dropped=written["spans_dropped"],
            batches_written=written["batches_written"],
            commit_s=round(self.sink.commit_s, 6),
            queue_depth=self.sink.pending,
            queue_limit=self.sink.max_pending_spans,
            db=self.db,
            pid=os.getpid(),
        )
        snapshot["last_error"] = snapshot["last_error"] or written["last_error"]
        return snapshot
