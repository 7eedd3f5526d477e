"""Counters of a receiver, served at ``GET /stats`` and printed by ``agent-rl serve --stats``.

Contract: :class:`ReceiverStats` is thread-safe; :meth:`ReceiverStats.snapshot` returns a plain
JSON-ready dict with these keys (all integers unless noted):

* ``requests``: ``POST /v1/traces`` requests handled (any outcome);
* ``batches_accepted``: requests whose spans were all queued (answered 200);
* ``batches_rejected``: requests refused (400/401/413/415/429/503): a bad request, a full
  queue, or a receiver shutting down;
* ``batches_delayed``: requests that found the queue full and were held until it had room
  (acknowledged later, not refused; see :class:`~agent_rl_plugin.receiver.sink.SpanSink`);
* ``spans_received``: spans decoded from accepted or back-pressured requests;
* ``spans_accepted``: spans queued for the writer (acknowledged to the sender);
* ``spans_rejected``: spans refused (queue full, shutting down, invalid ids, unconvertible);
* ``spans_written`` / ``spans_dropped``: committed to the database / accepted but lost when the
  database failed (from the store's writer);
* ``queue_depth``: spans accepted and not yet committed; ``queue_limit``: the bound;
* ``queries`` / ``snapshots``: ``POST /query`` / ``POST /snapshot`` requests served;
  ``connections_refused``: connections closed with 503 over ``max_connections``;
  ``uptime_s`` (float), ``last_error`` (text or null),
  ``db`` (the database path), ``pid``;
* ``decode_s`` / ``convert_s`` / ``commit_s`` (floats: CPU seconds of the thread doing it,
  summed; wall time would also count waiting for the GIL): parsing bodies into SDK spans and
  converting those to rows (both in the request threads), and the writer's inserts and commits
  (in its thread, DuckDB's work included; the receiver adds this one from its sink).
"""

from __future__ import annotations

import threading
import time
from typing import Any


class ReceiverStats:
    """Thread-safe counters (see the module contract)."""

    FIELDS = (
        "requests",
        "batches_accepted",
        "batches_rejected",
        "spans_received",
        "spans_accepted",
        "spans_rejected",
        "queries",
        "snapshots",
        "connections_refused",
        "batches_delayed",
    )
    TIMERS = ("decode_s", "convert_s")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.FIELDS, 0)
        self._seconds = dict.fromkeys(self.TIMERS, 0.0)
        self.started = time.monotonic()
        self.last_error: str | None = None

    def add(self, **deltas: int) -> None:
        """Add ``deltas`` to the named counters."""
        with self._lock:
            for name, delta in deltas.items():
                self._counts[name] += delta

    def add_time(self, **seconds: float) -> None:
        """Add ``seconds`` to the named timers (:attr:`TIMERS`)."""
        with self._lock:
            for name, delta in seconds.items():
                self._seconds[name] += delta

    def error(self, message: str) -> None:
        """Remember the latest error (shown as ``last_error``)."""
        with self._lock:
            self.last_error = message

    def snapshot(self) -> dict[str, Any]:
        """The counters as a plain dict, plus ``uptime_s`` and ``last_error``."""
        with self._lock:
            return {
                **self._counts,
                **{name: round(value, 6) for name, value in self._seconds.items()},
                "uptime_s": round(time.monotonic() - self.started, 3),
                "last_error": self.last_error,
            }
