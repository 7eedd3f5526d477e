"""``DuckDBSpanExporter``: the OTel span exporter that records spans into a DuckDB file.

Contract:

* :meth:`~DuckDBSpanExporter.export` converts spans to Arrow rows in the calling thread (the
  ``BatchSpanProcessor`` worker, never the agent's thread) and hands them to one writer thread
  (:mod:`agent_rl_plugin.store.writer`) that owns the DuckDB connection. It never raises and
  never blocks for long: it returns ``SUCCESS`` when every span was converted and queued, and
  ``FAILURE`` otherwise (a span that could not be converted, a full queue, a database that
  could not be opened recently, a shut-down exporter). Every lost span is counted.
* Attributes pass through the transform given to :meth:`set_attribute_transform` (the
  ``agent_rl_transform_attributes`` hooks, e.g. redaction) and then through the normalisers
  registered with ``agent_rl_register_normalizers`` (collected once, on first export).
* :meth:`force_flush` returns ``True`` once everything exported before the call is committed
  (or counted as dropped); ``False`` on timeout. :meth:`shutdown` flushes and closes.
* :attr:`stats` is a snapshot dict: ``spans_received``, ``spans_written``, ``spans_dropped``
  (``spans_invalid`` of them refused: all-zero ids), ``spans_duplicate``, ``spans_truncated``
  (kept with capped attributes), ``rewards_written``, ``batches_written``, ``batches_failed``,
  ``pending``, ``last_error``.
* Each kind of failure (open, locked, insert, row, convert, queue_full, a normaliser) is logged
  once, as an error naming the database and the fix; repeats are logged at debug level. A disk
  that cannot take the data (full: ENOSPC; a file-size limit: EFBIG; a quota: EDQUOT; a
  read-only file system: EROFS) is named as such ("cannot write PATH: the disk is full ..."),
  without a traceback; writing resumes by itself once there is room again.
* An exporter not shut down by its owner is shut down at interpreter exit; one with an upstream
  flush (:meth:`~DuckDBSpanExporter.set_upstream_flush`: attached by ``configure()``) is left to
  ``configure()``'s exit handler, which flushes its processor into it first.
* While alive, the exporter is registered so that :func:`~agent_rl_plugin.store.open_reader`
  in the same process first flushes it (and the span processor in front of it, see
  :meth:`DuckDBSpanExporter.set_upstream_flush`) and so sees every finished span.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agent_rl_plugin.plugins import get_plugin_manager
from agent_rl_plugin.store import arrow_columns
from agent_rl_plugin.store.errors import StoreError, storage_problem
from agent_rl_plugin.store.live_writers import register_writer, store_key, unregister_writer
from agent_rl_plugin.store.rows import AttributeTransform, Normalizer, SpanConverter
from agent_rl_plugin.store.spool_writer import SpoolWriter
from agent_rl_plugin.store.validation import MAX_SPAN_ATTRIBUTES_SIZE
from agent_rl_plugin.store.writer import ExportStats

logger = logging.getLogger("agent_rl_plugin.store")

_live: weakref.WeakSet[DuckDBSpanExporter] = weakref.WeakSet()


def _shutdown_at_exit() -> None:
    """Commit and close exporters still open at exit, so no connection is left to the
    interpreter's teardown. An exporter with an upstream flush (attached by
    :func:`agent_rl_plugin.configure`, which calls :meth:`~DuckDBSpanExporter.set_upstream_flush`)
    is left to configure()'s own exit handler, which first hands it the spans its processor
    still holds (and shuts it down when it detaches it)."""
    for exporter in list(_live):
        if exporter._upstream_flush is None:
            exporter.shutdown()


atexit.register(_shutdown_at_exit)


def collect_normalizers(plugin_manager: Any = None) -> list[tuple[str, Normalizer]]:
    """``[(name, normalize), ...]`` from every ``agent_rl_register_normalizers`` hook, in order."""
    if plugin_manager is None:
        plugin_manager = get_plugin_manager()
    found: list[tuple[str, Normalizer]] = []

    def register(name: str, normalize: Callable[[dict[str, Any], str], None]) -> None:
        found.append((name, normalize))

    plugin_manager.hook.agent_rl_register_normalizers(register=register)
    return found


_arrow_warm = False


def warm_arrow() -> None:
    """Build one small Arrow table on the calling thread, once per process, so the export
    thread's first batch pays no first-use cost while a busy agent holds the GIL. The store builds
    its columns with :mod:`agent_rl_plugin.store.arrow_columns`, which never makes pyarrow import
    pandas (``pyarrow.array`` does, ~0.3 s on its first call: left to the export thread under load,
    that import once took long enough for the span queue to fill)."""
    global _arrow_warm
    if _arrow_warm:
        return
    _arrow_warm = True
    try:
        arrow_columns.table([[0], ["warm"]], pa.schema([("n", pa.int64()), ("s", pa.string())]))
    except Exception:  # pragma: no cover - pyarrow broken: the writer reports it later
        pass


class DuckDBSpanExporter(SpanExporter):
    """Records finished spans into the DuckDB file at ``path`` (see the module contract).

    ``batch_rows``: most spans merged into one INSERT. ``max_pending_spans``: spans waiting for
    the writer before new ones are dropped. ``max_attribute_size``: longest string attribute
    value kept (characters; ``None``: no limit here). ``normalizers``: ``(name, fn)`` pairs, or
    ``None`` to collect them from ``plugin_manager`` (default: the process-wide one).
    ``reopen_interval_s``: after a failed open (e.g. a locked file), how long spans are dropped
    before opening is tried again. ``linger_s``: how long the writer waits for more spans to
    merge into one INSERT (each costs milliseconds however small; a flush never waits).
    ``max_span_attributes_size``: most characters of encoded attributes kept per span (see
    :mod:`agent_rl_plugin.store.validation`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch_rows: int = 50_000,
        max_pending_spans: int = 500_000,
        max_attribute_size: int | None = None,
        normalizers: Sequence[tuple[str, Normalizer]] | Mapping[str, Normalizer] | None = None,
        plugin_manager: Any = None,
        reopen_interval_s: float = 5.0,
        linger_s: float = 0.25,
        max_span_attributes_size: int | None = MAX_SPAN_ATTRIBUTES_SIZE,
    ) -> None:
        self.path = os.fspath(path)
        warm_arrow()
        self._stats = ExportStats()
        self._logged: set[str] = set()
        self._logged_lock = threading.Lock()
        self._plugin_manager = plugin_manager
        if isinstance(normalizers, Mapping):
            normalizers = list(normalizers.items())
        self._normalizers: list[tuple[str, Normalizer]] | None = None if normalizers is None else list(normalizers)
        self._converter = SpanConverter(
            normalizers=self._normalizers or (),
            max_attribute_size=max_attribute_size,
            on_error=self._report,
            max_span_attributes_size=max_span_attributes_size,
        )
        self._writer = SpoolWriter(
            os.path.abspath(self.path),  # fixed now: a later chdir must not move the database
            stats=self._stats,
            report=self._report,
            batch_rows=batch_rows,
            max_pending_spans=max_pending_spans,
            reopen_interval_s=reopen_interval_s,
            linger_s=linger_s,
        )
        self._shutdown = False
        self._upstream_flush: Callable[[int], Any] | None = None
        self._key = store_key(self.path)
        register_writer(self._key, self)
        _live.add(self)

    # --- configuration --------------------------------------------------------------------
    def set_attribute_transform(self, transform: AttributeTransform | None) -> None:
        """Apply ``transform(attrs, span_name) -> attrs`` to span and event attributes."""
        self._converter.transform = transform

    def set_upstream_flush(self, flush: Callable[[int], Any] | None) -> None:
        """``flush(timeout_millis)`` of the span processor feeding this exporter (configure()
        sets it): readers of this process flush it first, so they see every finished span."""
        self._upstream_flush = flush

    def reader_cursor(self, timeout_s: float) -> Any:
        """For :func:`~agent_rl_plugin.store.open_reader` in this process: every span finished
        so far is handed over (the processor in front first) and written; then ``None`` (open
        the file as usual)."""
        upstream = self._upstream_flush
        if upstream is not None:
            try:
                upstream(int(timeout_s * 1000))
            except Exception as exc:  # pragma: no cover - a processor that fails to flush
                self._report("flush", exc)
        return self._writer.reader_cursor(timeout_s)

    @property
    def stats(self) -> dict[str, Any]:
        """A snapshot of the counters (see the module contract)."""
        snapshot = self._stats.snapshot()
        snapshot["pending"] = self._writer.pending
        return snapshot

    # --- failures -------------------------------------------------------------------------
    def _report(self, kind: str, exc: BaseException) -> None:
        message = str(exc) or type(exc).__name__
        problem = storage_problem(exc)
        if problem is not None:
            detail = message.strip().splitlines()[0]
            message = f"cannot write {self.path}: {problem[0]} [{detail}]; fix: {problem[1]}"
        elif not isinstance(exc, StoreError) and kind not in ("queue_full",):
            message = f"{type(exc).__name__}: {message}"
        self._stats.set_error(message)
        with self._logged_lock:
            first = kind not in self._logged
            self._logged.add(kind)
        if first:
            logger.error(
                "agent-rl: %s [recording into %s: spans that cannot be written are counted in "
                "exporter.stats['spans_dropped']; the agent keeps running; shown once]",
                message,
                self.path,
                exc_info=problem is None and not isinstance(exc, (StoreError, OverflowError)),
            )
        else:
            logger.debug("agent-rl: %s failed again: %s", kind, message)

    def _ensure_normalizers(self) -> None:
        if self._normalizers is None:
            try:
                self._normalizers = collect_normalizers(self._plugin_manager)
            except Exception as exc:
                self._normalizers = []
                self._report("normalizers", exc)
            self._converter.normalizers = list(self._normalizers)

    # --- SpanExporter ---------------------------------------------------------------------
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Convert and queue ``spans`` (see the module contract). Never raises."""
        try:
            n = len(spans)
            self._stats.add(spans_received=n)
            if self._shutdown:
                self._stats.add(spans_dropped=n)
                return SpanExportResult.FAILURE
            if not self._writer.available():  # the file failed to open moments ago
                self._stats.add(spans_dropped=n, batches_failed=1)
                return SpanExportResult.FAILURE
            self._ensure_normalizers()
            batch = self._converter.convert(spans)
            if batch.failed or batch.truncated:
                self._stats.add(
                    spans_dropped=batch.failed, spans_invalid=batch.invalid, spans_truncated=batch.truncated
                )
            queued = self._writer.submit(batch)
            return SpanExportResult.SUCCESS if queued and not batch.failed else SpanExportResult.FAILURE
        except Exception as exc:  # pragma: no cover - every step above handles its own errors
            self._report("export", exc)
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """``True`` once everything exported so far is committed (or dropped); ``False`` on timeout."""
        try:
            return self._writer.flush(timeout_millis / 1000)
        except Exception as exc:  # pragma: no cover
            self._report("flush", exc)
            return False

    def shutdown(self) -> None:
        """Flush, close the database and stop the writer thread. Idempotent; never raises."""
        if self._shutdown:
            return
        self._shutdown = True
        try:
            unregister_writer(self._key, self)
            self._writer.close(30.0)
        except Exception as exc:  # pragma: no cover
            self._report("shutdown", exc)

    def __repr__(self) -> str:
        return f"DuckDBSpanExporter({self.path!r})"
