"""``Receiver``: the OTLP/HTTP traces endpoint that is the single writer of a DuckDB file.

Its endpoints and their answers are in :mod:`.endpoints`.

Lifecycle: :meth:`Receiver.start` opens the database (a locked file raises
:class:`~agent_rl_plugin.store.errors.StoreLockedError` there, not later), binds (port 0 picks a
free port, see :attr:`Receiver.port`), writes ``<db>.serve.json`` and serves in a background
thread. :meth:`Receiver.stop` refuses new batches (503), waits for requests in flight, writes
everything accepted, closes the database and removes ``<db>.serve.json``.

With ``decode_workers``, request bodies are decoded and converted in that many child processes
(:mod:`.workers`; ``agent-rl serve --decode-workers``), so the receiver's process only queues
and writes; a worker whose converter would differ from the receiver's is refused at start and
the receiver decodes in its own process (logged, and in ``last_error``).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from typing import Any, TypedDict

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.receiver import client
from agent_rl_plugin.receiver.conversion import converter_fingerprint
from agent_rl_plugin.receiver.copies import Copies, content_key
from agent_rl_plugin.receiver.endpoints import DEFAULT_MAX_BODY, DEFAULT_PORT, TRACES_PATH, Server
from agent_rl_plugin.receiver.guard import HostPolicy
from agent_rl_plugin.receiver.mounts import App
from agent_rl_plugin.receiver.sink import Accepted, SpanSink
from agent_rl_plugin.receiver.stats import ReceiverStats
from agent_rl_plugin.receiver.workers import Decoded, DecodePool, decode_and_convert, ipc_bytes
from agent_rl_plugin.store.announcements import base_url, remove_info, write_info
from agent_rl_plugin.store.rows import SpanBatch
from agent_rl_plugin.store.user_sql import QueryResult, check_user_sql, open_locked, run_locked

__all__ = ["DEFAULT_PORT", "TRACES_PATH", "Receiver", "ReceiverConfigError"]

logger = logging.getLogger("agent_rl_plugin.receiver")


class _QueryLimits(TypedDict):
    """The limits :meth:`Receiver.query` passes to ``run_locked``."""

    timeout_s: float
    max_rows: int
    max_bytes: int


class ReceiverConfigError(AgentRLError, ValueError):
    """The receiver cannot start as configured; ``str(error)`` names the fix."""


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
    also settable on :attr:`mounts` before :meth:`start`. ``decode_workers``: child processes
    that decode and convert request bodies (``0``: this process does; see :mod:`.workers`),
    started by :meth:`start`. ``write_delay_s``: test hook
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
        decode_workers: int = 0,
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
        self.decode_workers = decode_workers
        self.pool: DecodePool | None = None  #: the decode workers once started (None: decoding here)
        self.decode_workers_refused: str | None = None  #: why :meth:`start` started no workers
        self._server: Server | None = None
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
            self._server = Server((self.host, self._requested_port), self)
        except BaseException:
            self.sink.close()
            raise
        if self.decode_workers > 0:
            self._start_pool()
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

    def _start_pool(self) -> None:
        converter = self.sink.converter
        pool = DecodePool(
            self.decode_workers,
            max_body_bytes=self.max_body_bytes,
            max_attribute_size=converter.max_attribute_size,
            fingerprint=converter_fingerprint(converter),
        )
        self.decode_workers_refused = pool.start()
        if self.decode_workers_refused is None:
            self.pool = pool
        else:  # decoding here stays correct, only slower: say so and go on
            why_not = self.decode_workers_refused
            logger.warning("agent-rl serve: decoding in this process, no decode workers: %s", why_not)
            self.stats.error(f"no decode workers: {why_not}")

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
            if self.pool is not None:
                self.pool.close()
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
    def decode(self, body: bytes, kind: str, encoding: str | None) -> Decoded:
        """Decode and convert a ``POST /v1/traces`` body, in a decode worker when there are any
        (:mod:`.workers`), else in the calling thread with the sink's converter. Raises
        :class:`~.decode.DecodeError` (:class:`~.decode.BodyTooLarge` too) for the body's faults,
        :class:`~.workers.WorkerUnavailable` when no worker answered."""
        pool = self.pool
        if pool is None:
            return decode_and_convert(self.sink.converter, body, kind, encoding, self.max_body_bytes)
        decoded = pool.decode(body, kind, encoding)
        for kind_, message in decoded.reports:
            self.sink.report(kind_, message)
        return decoded

    def accept_batch(self, batch: SpanBatch, convert_s: float = 0.0) -> Accepted | None:
        """Queue a converted batch unless stopping (``None`` then); see
        :meth:`SpanSink.accept_batch`."""
        with self._gate:
            if self.stopping:
                return None
            self._in_flight += 1
        try:
            return self.sink.accept_batch(batch, convert_s=convert_s)
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
        return ipc_bytes(self.query(sql).table)

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
            decode_workers=self.pool.workers if self.pool is not None else 0,
            decode_worker_restarts=self.pool.restarts if self.pool is not None else 0,
            db=self.db,
            pid=os.getpid(),
        )
        snapshot["last_error"] = snapshot["last_error"] or written["last_error"]
        return snapshot
