"""The single writer thread that owns a store's DuckDB connection.

:class:`StoreWriter` holds the database for as long as it runs: what ``agent-rl serve`` uses,
the one process that writes the file. A recording agent uses
:class:`~agent_rl_plugin.store.spool_writer.SpoolWriter` instead, the same thread writing
segment files, so that it never holds the database.

Contract:

* One daemon thread per :class:`StoreWriter`, started on first use. It alone touches the
  connection, which it opens lazily (applying migrations) when the first batch arrives.
* :meth:`StoreWriter.submit` never blocks: it enqueues a converted batch, or refuses it (returns
  ``False`` and counts the spans as dropped) when more than ``max_pending_spans`` are waiting or
  when the database failed to open less than ``reopen_interval_s`` ago.
* The thread merges what arrives within ``linger_s`` of a first batch (up to ``batch_rows``
  spans; a flush ends the wait) into one Arrow table and one transaction. A batch that fails on
  its data is split and retried (halves, down to single rows), so one bad span loses only
  itself; a failing database drops the batch and the connection is reopened later.
* :meth:`StoreWriter.flush` returns ``True`` once everything submitted before the call has been
  committed or dropped, ``False`` on timeout. :meth:`StoreWriter.reader_cursor` does the same
  and then hands out a cursor of the connection (for readers in this process).
* Nothing here raises into the caller except :meth:`reader_cursor` (a
  :class:`~agent_rl_plugin.store.errors.StoreError` when the database cannot be opened); every
  failure goes to ``report(kind, exc)`` and into :class:`ExportStats`.
* Every ``merge_interval_s``, and on each flush, the thread merges the spool segments that
  recording processes left beside the database (:mod:`agent_rl_plugin.store.compaction`).
"""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import pyarrow as pa

from agent_rl_plugin.store.errors import StoreError, StoreLockedError, is_duckdb_error
from agent_rl_plugin.store.rows import SpanBatch
from agent_rl_plugin.store.spool import list_segments

if TYPE_CHECKING:  # DuckDB is imported by the writer that opens the file: a recording agent never does
    import duckdb

Report = Callable[[str, BaseException], None]


class ExportStats:
    """Thread-safe counters of an exporter; :meth:`snapshot` gives a plain dict."""

    FIELDS = (
        "spans_received",
        "spans_written",
        "spans_dropped",
        "spans_duplicate",
        "spans_invalid",
        "spans_truncated",
        "rewards_written",
        "batches_written",
        "batches_failed",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.FIELDS, 0)
        self.last_error: str | None = None

    def add(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._counts[name] += delta

    def set_error(self, message: str) -> None:
        with self._lock:
            self.last_error = message

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {**self._counts, "last_error": self.last_error}


@dataclass
class _Marker:
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _CursorRequest:
    done: threading.Event = field(default_factory=threading.Event)
    cursor: duckdb.DuckDBPyConnection | None = None
    error: BaseException | None = None


_STOP = object()

#: DuckDB settings of the writer's connection while only the writer uses it (``agent-rl serve``).
#: Appending Arrow batches needs no parallelism and bounded memory, but DuckDB's defaults (80% of
#: RAM, one thread per core) let its buffer pool and per-thread state grow without need. A full
#: batch (``batch_rows``, 50,000 spans) into the indexed ``spans`` table needs ~100 MB: under the
#: 64 MB this once was, DuckDB ran out of memory on it (a receiver taking ~20k spans/s dropped a
#: quarter of them). The indexes need memory that grows with the table, so a batch that finds
#: none doubles the writer's limit (up to a quarter of the RAM) and is tried again, then
#: written in halves (see ``StoreWriter._write``): a limit never costs a span.
#: A reader served from the same connection (:meth:`StoreWriter.reader_cursor`) gets the
#: defaults back first (its queries may need them); the writer sets these again before its
#: first write after the last reader cursor is gone (a limit set under a running reader's query
#: would cap that query: the settings belong to the whole DuckDB instance).
WRITER_SETTINGS = (("memory_limit", "'256MB'"), ("threads", "1"))
#: The most the writer's limit grows to when a batch finds no memory (a quarter of the RAM where
#: it can be read, else this).
MAX_WRITER_MEMORY_MB = 4096


def _max_writer_memory_mb() -> int:
    try:
        return max(256, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (4 << 20))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - no sysconf (Windows)
        return MAX_WRITER_MEMORY_MB


def _limit_writer_memory(connection: duckdb.DuckDBPyConnection, memory_mb: int | None = None) -> None:
    """:data:`WRITER_SETTINGS` on ``connection``, with ``memory_mb`` as the memory limit when given."""
    for name, value in WRITER_SETTINGS:
        if name == "memory_limit" and memory_mb is not None:
            value = f"'{int(memory_mb)}MB'"
        try:
            connection.execute(f"SET {name} = {value}")
        except Exception as exc:  # noqa: BLE001
            if not is_duckdb_error(exc):
                raise  # pragma: no cover - an older DuckDB without the setting
            pass


def _size_mb(text: str) -> int | None:
    """Megabytes of a DuckDB size setting as it shows it (``'244.1 MiB'``, ``'1.5 GiB'``)."""
    units = {"KIB": 1 / 1024, "MIB": 1, "GIB": 1024, "TIB": 1 << 20, "KB": 1 / 1000, "MB": 1, "GB": 1000}
    number, _, unit = text.strip().partition(" ")
    try:
        return int(float(number) * units[unit.strip().upper()])
    except (ValueError, KeyError):
        return None


def _restore_reader_settings(connection: duckdb.DuckDBPyConnection) -> None:
    for name, _ in WRITER_SETTINGS:
        try:
            connection.execute(f"RESET {name}")
        except Exception as exc:  # noqa: BLE001 # pragma: no cover
            if not is_duckdb_error(exc):
                raise


class StoreWriter:
    """Queue + thread + connection for one database file (see the module contract)."""

    #: Wake up while idle to merge spool segments (a writer holding the file must: nobody else can).
    idle_merges = True

    def __init__(
        self,
        path: str,
        *,
        stats: ExportStats,
        report: Report,
        batch_rows: int = 50_000,
        max_pending_spans: int = 500_000,
        reopen_interval_s: float = 5.0,
        linger_s: float = 0.25,
        merge_interval_s: float = 1.0,
    ) -> None:
        self.path = path
        self.linger_s = linger_s
        self.stats = stats
        self._report = report
        self.batch_rows = batch_rows
        self.max_pending_spans = max_pending_spans
        self.reopen_interval_s = reopen_interval_s
        self.merge_interval_s = merge_interval_s
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._pending = 0
        self._closed = False
        self._open_failed_at: float | None = None
        self._merged_at = float("-inf")
        self._readers = 0  # reader cursors handed out and not yet garbage (see WRITER_SETTINGS)
        self._readers_lock = threading.Lock()
        self._reader_settings = False  # the connection runs with DuckDB's defaults for readers
        self._memory_mb: int | None = None  # the writer's memory limit once a batch made it grow

    # --- caller side ----------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's thread and connection are not ours
            with self._lock:
                if self._pid != os.getpid():
                    self._reset()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    thread = threading.Thread(target=self._run, name=f"agent-rl-writer {self.path}", daemon=True)
                    thread.start()
                    self._thread = thread

    @property
    def pending(self) -> int:
        """Spans submitted and not yet committed or dropped."""
        return self._pending

    def available(self) -> bool:
        """False after :meth:`close`, or while a failed open is younger than ``reopen_interval_s``."""
        return not self._closed and self._may_open()

    def _may_open(self) -> bool:
        failed_at = self._open_failed_at
        return failed_at is None or time.monotonic() - failed_at >= self.reopen_interval_s

    def submit(self, batch: SpanBatch) -> bool:
        """Enqueue ``batch``; ``False`` (spans counted as dropped) when it cannot be taken."""
        n = batch.num_spans
        if n == 0:
            return True
        self._ensure_thread()
        with self._lock:
            full = self._pending + n > self.max_pending_spans
            if not full and self.available():
                self._pending += n
                self._queue.put(batch)
                return True
        self.stats.add(spans_dropped=n)
        if full:
            self._report(
                "queue_full",
                OverflowError(
                    f"{self._pending} spans are waiting to be written to {self.path} "
                    f"(limit {self.max_pending_spans}); new spans are dropped until it catches up"
                ),
            )
        return False

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything submitted so far is committed or dropped (``False``: timeout)."""
        if self._thread is None or self._closed:
            return True
        self._ensure_thread()
        marker = _Marker()
        self._queue.put(marker)
        return marker.done.wait(max(timeout_s, 0.0))

    def reader_cursor(self, timeout_s: float) -> duckdb.DuckDBPyConnection | None:
        """A cursor of the writer's connection after a flush (opening the database if needed);
        ``None`` from a writer that holds no connection (a spool writer)."""
        if self._closed:
            raise StoreError(f"the recorder of {self.path} is shut down", self.path)
        self._ensure_thread()
        request = _CursorRequest()
        self._queue.put(request)
        if not request.done.wait(max(timeout_s, 0.0)):
            raise StoreError(
                f"timed out after {timeout_s:.0f} s waiting for the recorder to commit spans to {self.path}",
                self.path,
            )
        if request.error is not None:
            raise request.error
        cursor, request.cursor = request.cursor, None  # the writer thread may hold the request a while
        return cursor

    def close(self, timeout_s: float = 30.0) -> None:
        """Write what is queued, close the connection and stop the thread (idempotent)."""
        with self._lock:  # submit() checks and enqueues under this lock: nothing lands after STOP
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            if thread is None or self._pid != os.getpid():
                return
            self._queue.put(_STOP)
        thread.join(max(timeout_s, 0.0))

    # --- writer thread --------------------------------------------------------------------
    def _run(self) -> None:
        stop = False
        while not stop:
            items = self._collect()
            try:
                batches = [i for i in items if isinstance(i, SpanBatch)]
                if batches:
                    self._write(batches)
            except Exception as exc:  # pragma: no cover - _write handles its own failures
                self._report("writer", exc)
            control = [i for i in items if not isinstance(i, SpanBatch)]
            try:
                self._housekeeping(force=bool(control), closing=_STOP in control)
            except Exception as exc:  # pragma: no cover - _housekeeping handles its own failures
                self._report("merge", exc)
            for other in control:
                if isinstance(other, _Marker):
                    other.done.set()
                elif isinstance(other, _CursorRequest):
                    self._serve_cursor(other)
                elif other is _STOP:
                    stop = True
        self._discard_connection()

    def _housekeeping(self, force: bool, closing: bool) -> None:
        """Called by the thread after each round of writes (``force``: a flush, cursor or stop
        request is waiting). Merges spool segments other processes left beside the database
        into it, through the connection this writer holds, at most every
        ``merge_interval_s`` unless forced."""
        connection = self._connection
        now = time.monotonic()
        if connection is None or (not force and now - self._merged_at < self.merge_interval_s):
            return
        self._merged_at = now
        if not list_segments(self.path):
            return
        from agent_rl_plugin.store.compaction import merge_segments

        try:
            merge_segments(connection, self.path)
        except Exception as exc:
            self._report("merge", exc)

    def _collect(self) -> list[Any]:
        """The next items to handle: waits for one, then gathers more until ``batch_rows``
        spans, a control item (flush, cursor, stop) or ``linger_s`` after the first item.
        Each INSERT has a fixed cost of a few milliseconds, so bigger batches write faster.
        While it holds the database, it wakes every ``merge_interval_s`` even when idle (an
        empty list), so spool segments of other processes are merged without traffic here."""
        idle_wake = self.merge_interval_s if self._connection is not None and self.idle_merges else None
        try:
            item = self._queue.get(timeout=idle_wake)
        except queue.Empty:
            return []
        items = [item]
        if not isinstance(item, SpanBatch):
            return items
        rows = item.num_spans
        deadline = time.monotonic() + self.linger_s
        while rows < self.batch_rows:
            remaining = deadline - time.monotonic()
            try:
                more = self._queue.get_nowait() if remaining <= 0 else self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            items.append(more)
            if not isinstance(more, SpanBatch):
                # Control item: write now, but take what is already queued along.
                while rows < self.batch_rows:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    items.append(more)
                    rows += more.num_spans if isinstance(more, SpanBatch) else 0
                break
            rows += more.num_spans
        return items

    def _open(self, force: bool = False) -> duckdb.DuckDBPyConnection | None:
        if self._connection is not None:
            return self._connection
        if not force and not self._may_open():
            return None
        from agent_rl_plugin.store.opening import open_write_connection

        try:
            self._connection, _ = open_write_connection(self.path)
            _limit_writer_memory(self._connection, self._memory_mb)
            self._reader_settings = False
        except Exception as exc:
            self._open_failed_at = time.monotonic()
            self._report("locked" if isinstance(exc, StoreLockedError) else "open", exc)
            if force:
                raise
            return None
        self._open_failed_at = None
        return self._connection

    def _discard_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception as exc:  # noqa: BLE001
                if not is_duckdb_error(exc):
                    raise

    def _serve_cursor(self, request: _CursorRequest) -> None:
        try:
            connection = self._open(force=True)
            assert connection is not None
            _restore_reader_settings(connection)
            self._reader_settings = True
            cursor = connection.cursor()
            with self._readers_lock:
                self._readers += 1
            weakref.finalize(cursor, self._reader_gone, self._pid)
            request.cursor = cursor
        except BaseException as exc:
            request.error = exc
        finally:
            request.done.set()

    def _reader_gone(self, pid: int) -> None:
        """A reader cursor served by this process is garbage. One a forked child inherited was
        counted by its parent (the child's count starts at 0 in :meth:`_reset`): ignored."""
        if pid != self._pid:
            return
        with self._readers_lock:
            self._readers -= 1

    def _limit_again_without_readers(self, connection: duckdb.DuckDBPyConnection) -> None:
        """Writer thread, before a write: :data:`WRITER_SETTINGS` again once every reader
        cursor served since they were reset is gone."""
        if self._reader_settings and self._readers == 0:
            _limit_writer_memory(connection, self._memory_mb)
            self._reader_settings = False

    def _insert_growing_memory(
        self, connection: duckdb.DuckDBPyConnection, spans: pa.Table, rewards: pa.Table | None
    ) -> int:
        """``insert_batch``; when DuckDB finds no memory for it (and no reader has the connection's
        settings), the writer's limit is doubled, up to a quarter of the RAM, and it is tried again."""
        from agent_rl_plugin.store.batch import insert_batch, needs_smaller_batches

        while True:
            try:
                return insert_batch(connection, spans, rewards)
            except Exception as exc:
                if not needs_smaller_batches(exc) or self._reader_settings:
                    raise
                row = connection.execute("SELECT current_setting('memory_limit')").fetchone()
                current = _size_mb(str(row[0])) if row else None
                ceiling = _max_writer_memory_mb()
                if current is None or current >= ceiling:
                    raise
                self._memory_mb = min(ceiling, max(2 * current, 64))
                _limit_writer_memory(connection, self._memory_mb)

    def _write(self, batches: list[SpanBatch]) -> None:
        from agent_rl_plugin.store.batch import insert_bisecting, is_data_error, needs_smaller_batches

        n = sum(b.num_spans for b in batches)
        try:
            connection = self._open()
            if connection is None:
                self.stats.add(spans_dropped=n, batches_failed=1)
                return
            self._limit_again_without_readers(connection)
            spans = batches[0].spans if len(batches) == 1 else pa.concat_tables([b.spans for b in batches])
            reward_tables = [b.rewards for b in batches if b.rewards is not None]
            rewards = None
            if reward_tables:
                rewards = reward_tables[0] if len(reward_tables) == 1 else pa.concat_tables(reward_tables)
            try:
                inserted = self._insert_growing_memory(connection, spans, rewards)
            except Exception as exc:
                smaller = needs_smaller_batches(exc)  # still no memory: halves need less
                if not smaller:
                    self._report("insert", exc)
                    self.stats.add(batches_failed=1)
                if not smaller and not is_data_error(exc):
                    self.stats.add(spans_dropped=n)
                    self._discard_connection()
                    return
                outcome = insert_bisecting(connection, spans, rewards)
                self.stats.add(
                    spans_written=outcome.written,
                    spans_dropped=outcome.dropped,
                    spans_duplicate=outcome.duplicates,
                    rewards_written=outcome.rewards_written,
                )
                if outcome.first_error is not None and outcome.first_error is not exc:
                    self._report("row", outcome.first_error)
                return
            self.stats.add(
                spans_written=inserted,
                spans_duplicate=n - inserted,
                batches_written=1,
                rewards_written=0 if rewards is None else rewards.num_rows,
            )
        finally:
            with self._lock:
                self._pending -= n
