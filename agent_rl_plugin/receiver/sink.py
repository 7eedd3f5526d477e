"""The receiver's bounded queue and single writer: spans in, rows into one DuckDB file.

Contract:

* :class:`SpanSink` reuses the store's own pieces: :class:`~agent_rl_plugin.store.rows.SpanConverter`
  (the same conversion, normalisers and attribute size limit as the in-process exporter, so a
  span lands as the same row either way) and :class:`~agent_rl_plugin.store.writer.StoreWriter`
  (one thread owning the connection, batched Arrow inserts, bisecting retry of bad rows).
* Received spans are redacted like the in-process exporter's: the converter gets the
  ``agent_rl_transform_attributes`` transform of the receiver's config (``AGENT_RL_*``
  variables: ``AGENT_RL_REDACT``, ``AGENT_RL_REDACTION_PATTERNS``, ``AGENT_RL_REDACT_PATTERNS``,
  ``AGENT_RL_CAPTURE_CONTENT``; plus ``agent_rl_redaction_patterns`` hooks), so secrets sent by
  any SDK are masked in attributes, names, status messages, events, links and resources before
  they reach the file. ``transform=`` replaces it (``None``: store spans as received).
* :meth:`SpanSink.accept` converts spans in the caller's thread and queues them **all or
  nothing**: it returns an :class:`Accepted` whose ``status`` is ``"ok"`` (every convertible
  span queued; ``failed`` counts unconvertible ones), ``"full"`` (more than ``max_pending_spans``
  would be waiting: nothing queued, the sender should retry later), ``"too_large"`` (the batch
  alone holds more than ``max_pending_spans`` spans: it can never fit, retrying cannot help) or
  ``"unavailable"`` (shut down, or the database failed to open moments ago: nothing queued).
* Admission: a batch that finds the queue full (or others already waiting) waits up to
  ``admission_wait_s`` for room, **first come, first served**: each commit of the writer wakes
  the waiters and the oldest one that fits goes first, so senders are not starved by luckier
  retries (an OTLP exporter retries a refusal only a few times). ``"full"`` only when no room came
  in time (``0``: at once, the behaviour without waiting). The bound holds while waiting: a
  waiting batch is not in the queue and was not acknowledged. ``Accepted.delayed`` tells that a
  batch waited; a batch larger than ``max_pending_spans`` is ``"too_large"`` at once.
* Timings (CPU seconds of the thread doing the work): ``Accepted.convert_s`` is the conversion's;
  :attr:`SpanSink.commit_s` sums the writer's inserts and commits (the receiver's ``convert_s`` /
  ``commit_s`` counters).
* :meth:`SpanSink.close` writes everything accepted, then closes the database.
* :meth:`SpanSink.cursor` gives a cursor on the writer's connection once everything accepted so
  far is committed (how ``POST /query`` reads while the receiver holds the file).
* ``write_delay_s`` (a test hook) makes the writer sleep before each insert, so tests can fill
  the queue and see back-pressure.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import duckdb
from opentelemetry.sdk.trace import ReadableSpan

from agent_rl_plugin.receiver.conversion import config_transform, registered_normalizers
from agent_rl_plugin.store.connection import register_writer, store_key, unregister_writer
from agent_rl_plugin.store.errors import StoreError
from agent_rl_plugin.store.rows import Normalizer, SpanBatch, SpanConverter
from agent_rl_plugin.store.writer import ExportStats, StoreWriter

logger = logging.getLogger("agent_rl_plugin.receiver")

DEFAULT_MAX_ATTRIBUTE_SIZE = 32_768  # RLConfig.max_attribute_size's default: the same cut as in-process
FROM_CONFIG: Any = object()  # SpanSink(transform=...) default: the transform of the AGENT_RL_* config


@dataclass(frozen=True)
class Accepted:
    """Outcome of :meth:`SpanSink.accept`: ``status`` is ``ok``, ``full``, ``too_large`` or
    ``unavailable``."""

    status: str
    queued: int = 0
    failed: int = 0
    delayed: bool = False  #: it waited for room before being queued (or refused)
    convert_s: float = 0.0  #: CPU seconds of the conversion to rows


class _Writer(StoreWriter):
    """The store's writer thread, with the receiver's test hook (a delay before each insert),
    the time spent writing (``commit_s``) and a call after each write (``written``: the queue
    has room again)."""

    write_delay_s: float = 0.0
    commit_s: float = 0.0
    written: Callable[[], None] | None = None

    def _write(self, batches: list[SpanBatch]) -> None:
        if self.write_delay_s:
            time.sleep(self.write_delay_s)
        started = time.thread_time()
        try:
            super()._write(batches)  # the spans leave ``pending`` (written or dropped) in there
        finally:
            self.commit_s += time.thread_time() - started
            if self.written is not None:
                self.written()


class SpanSink:
    """Bounded queue + single writer for one database file (see the module contract)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_pending_spans: int = 200_000,
        batch_rows: int = 50_000,
        linger_s: float = 0.25,
        max_attribute_size: int | None = DEFAULT_MAX_ATTRIBUTE_SIZE,
        normalizers: Sequence[tuple[str, Normalizer]] | None = None,
        write_delay_s: float = 0.0,
        transform: Any = FROM_CONFIG,
        admission_wait_s: float = 1.0,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.stats = ExportStats()
        self._logged: set[str] = set()
        self._opening = False
        self.converter = SpanConverter(
            transform=config_transform(self.report) if transform is FROM_CONFIG else transform,
            normalizers=registered_normalizers(self.report) if normalizers is None else list(normalizers),
            max_attribute_size=max_attribute_size,
            on_error=self.report,
        )
        self.writer = _Writer(
            self.path,
            stats=self.stats,
            report=self.report,
            batch_rows=batch_rows,
            max_pending_spans=max_pending_spans,
            reopen_interval_s=1.0,
            linger_s=linger_s,
        )
        self.writer.write_delay_s = write_delay_s
        self.writer.written = self._room_made
        self.max_pending_spans = max_pending_spans
        self.admission_wait_s = admission_wait_s
        self._room = threading.Condition()  # guards the check-and-enqueue and the waiting line
        self._waiting: collections.deque[object] = collections.deque()
        self._key = store_key(self.path)
        self._closed = False
        register_writer(self._key, self.writer)  # open_reader() in this process reads through us

    def report(self, kind: str, problem: BaseException | str) -> None:
        """Count a problem as the last error and log it (once per ``kind``)."""
        message = problem if isinstance(problem, str) else str(problem) or type(problem).__name__
        self.stats.set_error(message)
        if self._opening and kind in ("locked", "open"):
            return  # open() raises it to the caller; no log line as well
        if kind not in self._logged:
            self._logged.add(kind)
            logger.error("agent-rl serve: %s (%s; shown once)", message, self.path)

    def open(self) -> None:
        """Open (create, migrate) the database now, so a locked file fails at start-up.

        Raises :class:`~agent_rl_plugin.store.errors.StoreError` (e.g. ``StoreLockedError``)."""
        self._opening = True
        try:
            cursor = self.writer.reader_cursor(60.0)
            assert cursor is not None  # only a spool writer has no connection
            cursor.close()
        finally:
            self._opening = False

    @property
    def pending(self) -> int:
        """Spans accepted and not yet committed or dropped."""
        return self.writer.pending

    @property
    def commit_s(self) -> float:
        """CPU seconds the writer thread spent inserting and committing, summed."""
        return self.writer.commit_s

    def _room_made(self) -> None:
        with self._room:
            self._room.notify_all()

    def accept(self, spans: Sequence[ReadableSpan]) -> Accepted:
        """Convert and queue ``spans`` all or nothing (see the module contract)."""
        if self._closed or not self.writer.available():
            return Accepted("unavailable")
        started = time.thread_time()
        batch = self.converter.convert(spans)
        return self.accept_batch(batch, convert_s=time.thread_time() - started)

    def accept_batch(self, batch: SpanBatch, *, convert_s: float = 0.0) -> Accepted:
        """:meth:`accept` for spans converted already (by :attr:`converter`, or by a decode
        worker with an equal one, see :mod:`.workers`); ``convert_s`` (CPU seconds of that
        conversion) is reported back in the outcome."""
        if self._closed or not self.writer.available():
            return Accepted("unavailable")
        if batch.invalid or batch.truncated:
            self.writer.stats.add(spans_invalid=batch.invalid, spans_truncated=batch.truncated)
        n = batch.num_spans
        if n == 0:
            return Accepted("ok", 0, batch.failed, convert_s=convert_s)
        status, delayed = self._admit(batch)
        return Accepted(status, n if status == "ok" else 0, batch.failed, delayed, convert_s)

    def _fits(self, n: int) -> bool:
        return self.writer.pending + n <= self.max_pending_spans

    def _admit(self, batch: SpanBatch) -> tuple[str, bool]:
        """Queue ``batch`` now, or after waiting its turn for room (see the module contract):
        (status, whether it waited)."""
        n = batch.num_spans
        with self._room:  # the check and the enqueue together: concurrent requests cannot overshoot
            if n > self.max_pending_spans:
                return "too_large", False
            if not self._waiting and self._fits(n):
                return self._submit(batch), False
            if self.admission_wait_s <= 0:
                return "full", False
            turn = object()
            self._waiting.append(turn)
            deadline = time.monotonic() + self.admission_wait_s
            try:
                while True:
                    if self._closed or not self.writer.available():
                        return "unavailable", True
                    if self._waiting[0] is turn and self._fits(n):
                        return self._submit(batch), True
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return "full", True
                    self._room.wait(remaining)  # woken after each write, by close and by those leaving the line
            finally:
                self._waiting.remove(turn)
                self._room.notify_all()  # the next in line may fit now

    def _submit(self, batch: SpanBatch) -> str:
        return "ok" if self.writer.submit(batch) else "unavailable"

    def flush(self, timeout_s: float = 30.0) -> bool:
        """``True`` once everything accepted so far is committed (or dropped)."""
        return self.writer.flush(timeout_s)

    def cursor(self, timeout_s: float = 30.0) -> duckdb.DuckDBPyConnection:
        """A cursor on the writer's connection after a flush (close it when done)."""
        cursor = self.writer.reader_cursor(timeout_s)
        assert cursor is not None  # only a spool writer has no connection
        return cursor

    def written(self) -> dict[str, Any]:
        """The writer's counters: ``spans_written``, ``spans_dropped``, ``batches_written``, ..."""
        return self.stats.snapshot()

    def close(self, timeout_s: float = 120.0) -> None:
        """Write everything accepted, close the database, stop the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._room_made()  # waiting batches see the sink closed and give up
        try:
            unregister_writer(self._key, self.writer)
            self.writer.close(timeout_s)
        except StoreError as exc:  # pragma: no cover - close reports through _report
            self.report("close", exc)
