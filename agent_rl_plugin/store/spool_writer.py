"""The recording process's writer: batches become spool segments, never a held database.

Contract (in addition to :class:`~agent_rl_plugin.store.writer.StoreWriter`'s queue, batching
and flush semantics):

* Each merged batch is written as one segment (:func:`~agent_rl_plugin.store.spool.write_segment`:
  durable and atomic) and counted in ``spans_written`` once it is on disk. A batch the disk
  cannot take is counted as dropped and reported (once per kind); for ``reopen_interval_s``
  after that, new batches are refused at once (counted), then writing is tried anew. Rows the
  database refuses when a merge of this process inserts them move from ``spans_written`` to
  ``spans_dropped``.
* A segment holds what waited for the writer, up to ``MAX_SEGMENT_ROWS`` spans (passed by less
  than one submitted batch), so the Arrow tables and encoded Parquet held at once stay bounded.
* Every ``merge_interval_s``, or as soon as ``PROMPT_MERGE_ROWS`` rows were written since its
  last merge began (but at least ``MERGE_GAP_S`` after that merge ended, so readers and other
  writers get the file), a merger thread (started with the first batch) tries to merge the
  segments into the database in short leases (:func:`~agent_rl_plugin.store.lease.try_merge`)
  of at most ``CHILD_MERGE_MAX_ROWS`` rows in the merger process (``MERGE_MAX_ROWS`` in the
  agent's own) and ``MERGE_THREADS`` DuckDB thread each (a merge's memory grows with both),
  without waiting for the lock; segment writing never waits for it. On each flush and at close
  the writer thread merges after writing: on a flush only if the lock is free at once
  (``flush_merge_wait_s``, 0: readers see unmerged segments anyway, so the agent never waits
  for another process), at close waiting up to ``close_merge_wait_s`` (2 s). When another process holds the file, the segments stay for
  the next merge (a reader shows them meanwhile): nothing is lost and the agent never waits.
* Merges are done by a child process (:class:`~agent_rl_plugin.store.merger_process.MergerProcess`),
  started by the first merge that finds segments waiting (background, flush or close), with the
  same leases, waits and counts: DuckDB (its library, and its memory, which grows with the file)
  never enters the agent's process, and merges run beside the recording instead of taking turns
  with it for the GIL. The flush or close that starts it waits for it to start (a fraction of a
  second, once per writer). A run whose child cannot be started or does not answer merges in its
  own process. ``AGENT_RL_MERGER=process`` starts the child at the first merge even with nothing
  waiting; ``thread`` never starts one (the agent merges itself, in its merger thread and on flush
  and close, as the Windows and embedded-Python fallback does).
* The database is never held between merges, so other processes (readers, scorers, other
  agents) can open it at any time but during a merge's fraction of a second.
* :meth:`reader_cursor` flushes and returns ``None``: readers open the file themselves.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import pyarrow as pa

from agent_rl_plugin.store.errors import StoreError, storage_problem
from agent_rl_plugin.store.holders import someone_waiting
from agent_rl_plugin.store.merger_process import LeaseLimits, MergerProcess, merge_leases
from agent_rl_plugin.store.rows import SpanBatch
from agent_rl_plugin.store.spool import (
    CHUNK_SEGMENTS,
    SpoolNotPrivate,
    list_segments,
    remove_spool_if_empty,
    spool_dir,
    write_segment,
)
from agent_rl_plugin.store.writer import StoreWriter, _CursorRequest

logger = logging.getLogger(__name__)


def _spool_error(path: str, exc: BaseException) -> StoreError:
    folder = spool_dir(path)
    if isinstance(exc, SpoolNotPrivate):
        message = str(exc)
    elif isinstance(exc, (NotADirectoryError, PermissionError)) or (
        isinstance(exc, FileNotFoundError) and not os.path.isdir(os.path.dirname(folder))
    ):
        message = f"cannot create the folder of {path} (spool {folder}): {exc}"
    else:
        message = f"cannot write a spool segment of {path} in {folder}: {exc}"
    error = StoreError(message, path)
    error.__cause__ = exc  # storage_problem() reads the errno from the cause
    return error


#: Most spans in one segment (the writer merges what waits, up to this many, into one segment):
#: bounds the Arrow tables and the encoded Parquet a recording process holds at once.
MAX_SEGMENT_ROWS = 8_192
#: Most span rows one merge lease inserts (whole segments, at least one) and DuckDB's threads for
#: it, when the agent merges in its own process: the memory of a merge grows with the rows of its
#: transaction (about 3-4 KB each) and with its threads, and the agent runs meanwhile.
MERGE_MAX_ROWS = 8_192
MERGE_THREADS = 1
#: Leases one merge may take in a row (each merges at most MERGE_MAX_ROWS rows).
MAX_LEASES_PER_MERGE = 8
#: The same for the merger process, whose memory is not the agent's: a lease costs ~50-70 ms
#: whatever its size (opening the file, checkpointing a small transaction), so 8,192-row leases
#: merged at half the rate of one bulk insert (21 against 10 us per span); 65,536-row leases come
#: within 10% of it, for ~35 MB more peak memory in the child (measured: docs/benchmarks.md). Two
#: of them hold the file about as long as eight small ones did (~1.3 s), so readers wait no longer.
CHILD_MERGE_MAX_ROWS = 65_536
CHILD_MAX_LEASES_PER_MERGE = 2
#: Rows written to segments since the last background merge began at which the merger thread
#: merges at once instead of at its next ``merge_interval_s``: a burst is merged while it is
#: being recorded, beside it, not a second after it. One full segment: only an agent recording
#: at full speed fills one before a flush.
PROMPT_MERGE_ROWS = MAX_SEGMENT_ROWS
#: Shortest pause between the end of one background merge and the start of the next: the file is
#: free for readers and other writers then (a waiting reader retries at least every 0.05 s).
MERGE_GAP_S = 0.25
#: ``AGENT_RL_MERGER``: ``auto`` (the default: see :meth:`SpoolWriter._merger_for_merge`),
#: ``process`` or ``thread``.
MERGER_MODES = ("auto", "process", "thread")
#: How long closing waits for a background merge in progress to finish.
MERGER_JOIN_TIMEOUT_S = 30.0


#: What one merge of a recording process may do, in the merger process and in the agent's own.
CHILD_LIMITS = LeaseLimits(
    max_leases=CHILD_MAX_LEASES_PER_MERGE,
    max_segments=CHUNK_SEGMENTS,
    max_rows=CHILD_MERGE_MAX_ROWS,
    merge_threads=MERGE_THREADS,
)
IN_PROCESS_LIMITS = LeaseLimits(
    max_leases=MAX_LEASES_PER_MERGE,
    max_segments=CHUNK_SEGMENTS,
    max_rows=MERGE_MAX_ROWS,
    merge_threads=MERGE_THREADS,
)


#: The mode when ``AGENT_RL_MERGER`` names none (the test suite sets ``thread`` for its own process:
#: a merger child per test that records would cost it minutes; subprocesses it starts get ``auto``).
DEFAULT_MERGER_MODE = "auto"


def merger_mode_from_env() -> str:
    """``AGENT_RL_MERGER`` when it names a mode of ``MERGER_MODES``, else ``DEFAULT_MERGER_MODE``."""
    mode = os.environ.get("AGENT_RL_MERGER", "").strip().lower()
    return mode if mode in MERGER_MODES else DEFAULT_MERGER_MODE


class SpoolWriter(StoreWriter):
    """See the module contract."""

    idle_merges = False  # its merger thread does

    def __init__(
        self, path: str, *, flush_merge_wait_s: float = 0.0, close_merge_wait_s: float = 2.0, **kwargs: Any
    ) -> None:
        super().__init__(path, **kwargs)
        self.batch_rows = min(self.batch_rows, MAX_SEGMENT_ROWS)
        self.flush_merge_wait_s = flush_merge_wait_s
        self.close_merge_wait_s = close_merge_wait_s
        self.merges = 0
        self.merges_interrupted = 0  # merges DuckDB interrupted (rolled back; their segments wait)
        self.merger_mode = merger_mode_from_env()
        self.merger_peak_rss_mb: float | None = None  # the merger process's peak RSS, once it answered
        self._merger_process: MergerProcess | None = None
        self._merger: threading.Thread | None = None
        self._stop_merging = threading.Event()
        self._merge_now = threading.Event()  # set with _stop_merging too: wakes the merger thread
        self._rows_since_merge = 0  # rows written to segments since the last background merge began

    def _write(self, batches: list[SpanBatch]) -> None:
        n = sum(b.num_spans for b in batches)
        try:
            spans = batches[0].spans if len(batches) == 1 else pa.concat_tables([b.spans for b in batches])
            reward_tables = [b.rewards for b in batches if b.rewards is not None and b.rewards.num_rows]
            rewards = None
            if reward_tables:
                rewards = reward_tables[0] if len(reward_tables) == 1 else pa.concat_tables(reward_tables)
            try:
                try:
                    write_segment(self.path, spans, rewards)
                except Exception as exc:
                    if storage_problem(exc) is not None or isinstance(exc, SpoolNotPrivate):
                        raise
                    write_segment(self.path, spans, rewards)  # a passing hitch: once more, at once
            except Exception as exc:
                self._open_failed_at = time.monotonic()  # refuse batches for reopen_interval_s
                self._report("spool", _spool_error(self.path, exc))
                self.stats.add(spans_dropped=n, batches_failed=1)
                return
            self._open_failed_at = None
            self.stats.add(
                spans_written=n, batches_written=1, rewards_written=0 if rewards is None else rewards.num_rows
            )
            self._rows_since_merge += n  # the writer thread alone adds; the merger thread resets
            if self._rows_since_merge >= PROMPT_MERGE_ROWS:
                self._merge_now.set()
        finally:
            with self._lock:
                self._pending -= n

    def _housekeeping(self, force: bool, closing: bool) -> None:
        """Background merges run in their own thread, so segment writing never waits for one;
        a flush or close merges here, in the writer thread, after the last segment is written."""
        if closing:  # no DuckDB work may be left running in a thread when the process ends
            self._stop_merging.set()
            self._merge_now.set()
            merger = self._merger
            if merger is not None and merger is not threading.current_thread():
                merger.join(MERGER_JOIN_TIMEOUT_S)
        if force:
            self._merge(self.close_merge_wait_s if closing else self.flush_merge_wait_s)
        if closing:
            merger_process = self._merger_process
            if merger_process is not None:
                merger_process.close()
            remove_spool_if_empty(self.path)
        elif self._merger is None:
            with self._lock:
                if self._merger is None and not self._closed:
                    self._merger = threading.Thread(
                        target=self._merge_in_background, daemon=True, name=f"agent-rl-merger {self.path}"
                    )
                    self._merger.start()

    def _merge_in_background(self) -> None:
        """Merge every ``merge_interval_s``, or as soon as ``PROMPT_MERGE_ROWS`` rows were written
        since the last merge began (or that merge took all the leases it may: more may wait).
        While another process or thread waits for the file (:func:`~agent_rl_plugin.store.holders.someone_waiting`),
        never sooner than ``MERGE_GAP_S`` after the last merge ended. The first merge starts at
        once when a merger process does it: the process starts beside the agent's first segments,
        not in a later flush."""
        ended = time.monotonic()
        try:
            at_once = self._wants_merger_process()
        except Exception as exc:  # noqa: BLE001 - e.g. a spool folder that is not private
            self._report("merge", exc)
            at_once = False
        if not at_once:
            self._merge_now.wait(self.merge_interval_s)
        while not self._stop_merging.is_set():
            pause = MERGE_GAP_S - (time.monotonic() - ended)
            if pause > 0 and someone_waiting(self.path) and self._stop_merging.wait(pause):
                return
            self._merge_now.clear()
            self._rows_since_merge = 0
            try:
                if self._merge(0.0):
                    self._merge_now.set()
            except Exception as exc:  # noqa: BLE001 - reported; the next merge tries again
                self._report("merge", exc)
            ended = time.monotonic()
            if self._stop_merging.is_set():
                return
            self._merge_now.wait(self.merge_interval_s)

    def _merge(self, wait_s: float) -> bool:
        """Merge in bounded leases (:data:`CHILD_LIMITS` in the merger process,
        :data:`IN_PROCESS_LIMITS` here; one DuckDB thread), so that a backlog (segments that
        waited while another process held the file) never holds the file, nor memory, for long at
        a time; readers and writers get the file between the leases, and what is left waits for
        the next merge. The merger process does it when this writer has one, or starts one
        (:meth:`_merger_for_merge`); this process does it otherwise, and when the merger could
        not answer. True when it took every lease it may (more segments may be waiting)."""
        outcome = None
        limits = CHILD_LIMITS
        merger = self._merger_for_merge()
        if merger is not None:
            outcome = merger.merge(wait_s=wait_s, limits=limits, lock_wait_s=None if wait_s > 0 else 0.0)
            if outcome is not None and outcome.peak_rss_mb is not None:
                self.merger_peak_rss_mb = max(self.merger_peak_rss_mb or 0.0, outcome.peak_rss_mb)
        if outcome is None:
            limits = IN_PROCESS_LIMITS
            outcome = merge_leases(
                self.path, wait_s=wait_s, limits=limits, keep_going=lambda: not someone_waiting(self.path)
            )
        for fields in outcome.results:
            self._count(fields)
        if outcome.interrupted:
            self.merges_interrupted += 1
            logger.debug("merge into %s interrupted; its segments wait for the next merge", self.path)
        failure = outcome.failure(self.path)
        if failure is not None:
            self._report("merge", failure)
        return len(outcome.results) >= limits.max_leases

    def _wants_merger_process(self) -> bool:
        """True when the next merge is the merger process's: ``auto`` wants one for the first
        merge that finds segments waiting (none is started for nothing),
        ``AGENT_RL_MERGER=process`` for any merge, ``thread`` never."""
        if self.merger_mode == "thread" or not MergerProcess.supported():
            return False
        return self._merger_process is not None or self.merger_mode == "process" or bool(list_segments(self.path))

    def _merger_for_merge(self) -> MergerProcess | None:
        """The merger process to merge with (started on first use); ``None``: merge in this process."""
        if not self._wants_merger_process():
            return None
        if self._merger_process is None:
            with self._lock:
                if self._merger_process is None:
                    self._merger_process = MergerProcess(self.path)
        return self._merger_process

    def _count(self, result: dict[str, Any]) -> None:
        """Count one lease's ``MergeResult`` (as a dict)."""
        self.merges += 1
        dropped = int(result["dropped_rows"])
        if dropped:  # rows the database refused: counted here, logged by the merge
            self.stats.add(spans_dropped=dropped, spans_written=-dropped, batches_failed=1)
            self.stats.set_error(f"{dropped} rows refused by the database: {'; '.join(result['errors'])}")

    def _serve_cursor(self, request: _CursorRequest) -> None:
        request.cursor = None  # everything is on disk; nothing is held
        request.done.set()
