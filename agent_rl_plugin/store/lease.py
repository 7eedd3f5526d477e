"""Short, bounded holds on a store file shared by many processes.

DuckDB lets one process write a file, and no other process read it meanwhile. So every process
of this package holds a file only briefly, waits a bounded time when another one holds it, and
says who does when it gives up.

Contract:

* :func:`write_lease` opens the file read-write (waiting up to ``wait_s`` for the lock, retrying
  with growing pauses), merges the spool segments first (``merge=True``), yields the
  connection, and closes it. While it runs, a holder note says ``what`` it is doing. If the lock
  cannot be had in time it raises :class:`StoreBusy` (a
  :class:`~agent_rl_plugin.store.errors.StoreLockedError` naming the holder, what it is doing
  and how long we waited).
* :func:`open_read_only` opens read-only with the same bounded wait.
* :func:`try_merge` merges the segments in a lease when the lock can be had within ``wait_s``,
  and returns ``None`` otherwise (or when there is nothing to merge). It can merge fewer of
  them (``max_segments``, ``max_rows``) with fewer DuckDB threads (``merge_threads``): a
  recording process bounds its memory that way, the rest waits for the next lease.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import duckdb

from agent_rl_plugin.store.compaction import MergeResult, merge_segments
from agent_rl_plugin.store.errors import StoreError, StoreLockedError, is_config_conflict
from agent_rl_plugin.store.holders import holding, remove_stale_notes, waiting
from agent_rl_plugin.store.opening import connect_file, make_private, open_write_connection
from agent_rl_plugin.store.spool import Segment, list_segments, remove_leftovers

#: How long a reader waits for a writer's lease to end before it gives up (the CLI's default): long enough to
#: find a gap between the back-to-back merges of several recording agents.
READ_WAIT_S = 15.0
#: How long a writer of results (score, label, advantages, training runs) waits for the lock.
WRITE_WAIT_S = 30.0
#: Longest pause between two tries of a waiting open (the pauses grow from 10 ms to this): a
#: recording process's merger leaves the file free for ``MERGE_GAP_S`` (0.25 s) when someone
#: waits, and a failed try costs about a millisecond, so the waiter gets in within ~50 ms of a
#: lease's end (with 0.2 s it lost ~0.15 s on average, and sometimes the whole gap).
MAX_RETRY_PAUSE_S = 0.05

T = TypeVar("T")


class StoreBusy(StoreLockedError):
    """The lock could not be had within the wait; the message names the holder."""


def _busy(exc: BaseException) -> bool:
    if isinstance(exc, StoreLockedError):
        return True
    # This process has the file open in the other mode (a reader handed to the user while we
    # want to write, or the reverse): wait for it like for another process.
    return isinstance(exc, StoreError) and is_config_conflict(exc.__cause__ or exc)


def with_wait(path: str, open_once: Callable[[], T], wait_s: float) -> T:
    """``open_once()`` until it succeeds or ``wait_s`` has passed while the file is busy. While it
    waits, a note says so (:func:`~agent_rl_plugin.store.holders.waiting`): a recording process's
    merger then leaves the file free between its leases."""
    started = time.monotonic()
    try:
        return open_once()
    except StoreError as exc:
        if not _busy(exc):
            raise
        if wait_s <= 0:
            raise _busy_error(path, exc, time.monotonic() - started) from exc
    with waiting(path):
        pause = 0.01
        while True:
            time.sleep(min(pause, max(0.0, wait_s - (time.monotonic() - started))))
            pause = min(pause * 2, MAX_RETRY_PAUSE_S)
            try:
                return open_once()
            except StoreError as exc:
                if not _busy(exc):
                    raise
                waited = time.monotonic() - started
                if waited >= wait_s:
                    raise _busy_error(path, exc, waited) from exc


def _busy_error(path: str, exc: StoreError, waited: float) -> StoreBusy:
    """The :class:`StoreBusy` to raise after waiting ``waited`` seconds, naming the holder."""
    if isinstance(exc, StoreLockedError):
        return StoreBusy(path, exc.pid, exc.holder, exc.detail, exc.doing, waited)
    return StoreBusy(path, os.getpid(), None, str(exc), None, waited)


@contextmanager
def write_lease(
    db_path: str | os.PathLike[str],
    *,
    wait_s: float = WRITE_WAIT_S,
    what: str = "writing",
    merge: bool = True,
    row_group_size: int | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection held for the block (see the module contract); ``row_group_size``:
    see :func:`~agent_rl_plugin.store.opening.connect_file`."""
    path = os.fspath(db_path)
    with holding(path, what):
        connection = with_wait(path, lambda: open_write_connection(path, row_group_size)[0], wait_s)
        try:
            if merge:
                merge_segments(connection, path)
            yield connection
        finally:
            try:
                connection.close()
            except duckdb.Error:
                pass
            make_private(path)


def open_read_only(db_path: str | os.PathLike[str], *, wait_s: float = READ_WAIT_S) -> duckdb.DuckDBPyConnection:
    """A read-only connection, waiting up to ``wait_s`` while another process writes."""
    path = os.fspath(db_path)
    return with_wait(path, lambda: connect_file(path, read_only=True), wait_s)


def _first_rows(segments: list[Segment], max_rows: int) -> list[Segment]:
    """The oldest of ``segments`` holding about ``max_rows`` span rows (at least one segment;
    row counts from the Parquet footers; a footer that cannot be read counts as one row, the
    merge quarantines it)."""
    import pyarrow.parquet as pq

    chosen: list[Segment] = []
    rows = 0
    for segment in segments:
        try:
            count = pq.read_metadata(segment.spans_path).num_rows
        except Exception:  # noqa: BLE001 - unreadable: the merge reports and quarantines it
            count = 1
        if chosen and rows + count > max_rows:
            break
        chosen.append(segment)
        rows += count
    return chosen


def try_merge(
    db_path: str | os.PathLike[str],
    *,
    wait_s: float = 0.0,
    max_segments: int | None = None,
    max_rows: int | None = None,
    merge_threads: int | None = None,
    row_group_size: int | None = None,
) -> MergeResult | None:
    """Merge the spool segments of ``db_path`` (the oldest ``max_segments`` of them, when
    given, and of those the oldest holding at most ``max_rows`` span rows, at least one
    segment) if the lock can be had within ``wait_s``; ``None`` when there was nothing to merge
    or the file stayed busy. ``merge_threads`` caps DuckDB's threads for the merge (fewer threads
    hold less memory: what a recording process wants; the lease's database is closed after it).
    ``row_group_size``: the merged rows go into row groups of that many rows (for a process that
    opens the file for nothing else: see :func:`~agent_rl_plugin.store.opening.connect_file`)."""
    path = os.fspath(db_path)
    segments = list_segments(path)[:max_segments]
    if not segments:
        remove_leftovers(path)
        remove_stale_notes(path)
        return None
    if max_rows is not None:
        segments = _first_rows(segments, max_rows)
    try:
        with write_lease(
            path,
            wait_s=wait_s,
            what=f"merging {len(segments)} spool segments",
            merge=False,
            row_group_size=row_group_size,
        ) as connection:
            if merge_threads is None:
                return merge_segments(connection, path, segments=segments)
            _setting(connection, f"SET threads = {int(merge_threads)}")
            try:
                return merge_segments(connection, path, segments=segments)
            finally:  # a connection of this process sharing the database keeps its threads
                _setting(connection, "RESET threads")
    except StoreBusy:
        return None


def _setting(connection: duckdb.DuckDBPyConnection, statement: str) -> None:
    try:
        connection.execute(statement)
    except duckdb.Error:  # pragma: no cover - a DuckDB without the setting: merge as it is
        pass
