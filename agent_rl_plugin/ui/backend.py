"""Where the UI reads and writes: a database file (``agent-rl ui``) or a running receiver
(``agent-rl serve`` mounts the UI at ``/ui``).

Contract of a backend:

* :meth:`reader` yields a DuckDB connection for the UI's **own** SQL (fixed text, values bound
  as parameters), closed afterwards. User SQL never runs on it.
* :meth:`user_query` runs **user** SQL (the console, the list's ``where`` box, a training run's
  recorded ``dataset_sql``) through the locked read-only path
  (:mod:`~agent_rl_plugin.store.user_sql`: statement checks, no file or network access, time,
  row and memory limits). Raises :class:`~agent_rl_plugin.store.user_sql.UserSqlError`.
* :meth:`append_labels` appends ``labels`` rows in one transaction; the ``human_label``
  reward then scores those rollouts in the background, as after ``agent-rl label``
  (:mod:`.scoring`; in a receiver's process scoring writes through the receiver's connection).
* :meth:`version` is a cheap token that changes whenever what the UI shows may have changed;
  the page polls it.

:class:`FileBackend` opens the file per request like any reader
(:func:`~agent_rl_plugin.store.connection.open_reader`: this process's recorder flushed, the
agents' unmerged spool segments shown), so agents recording into the same file keep running;
its :meth:`~FileBackend.version` only stats files (no DuckDB open). Its reads, user queries and
label writes take turns (one lock): DuckDB refuses to open one file in one process with two
configurations at once (read-only, locked, read-write). :class:`ReceiverBackend`
reads through cursors of the receiver's writer (after a flush), runs user SQL on the
receiver's locked copies and appends labels on its connection: a served file has one writer.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Iterator, Protocol

import duckdb

from agent_rl_plugin.rewards.labels import insert_label_rows
from agent_rl_plugin.store.connection import connect_writer, open_reader
from agent_rl_plugin.store.spool import SpoolNotPrivate, list_segments
from agent_rl_plugin.store.user_sql import QueryCancelled, QueryResult, QueryTimeout, run_user_query
from agent_rl_plugin.ui.scoring import HumanLabelScorer

if TYPE_CHECKING:
    from agent_rl_plugin.receiver import Receiver

#: Limits of user SQL from the UI (the console shows at most this many rows).
UI_QUERY_TIMEOUT_S = 30.0
UI_MAX_BYTES = 16 << 20


class Backend(Protocol):
    """What the UI needs from a store (see the module contract)."""

    db: str
    served: bool

    def version(self) -> str: ...

    def reader(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]: ...

    def user_query(self, sql: str, *, max_rows: int, timeout_s: float | None = None) -> QueryResult: ...

    def append_labels(self, rows: list[dict[str, Any]]) -> None: ...


class FileBackend:
    """A database file that agents may be recording into (see the module contract)."""

    served = False

    def __init__(self, db: str | os.PathLike[str], *, score_labels: bool = True) -> None:
        self.db = os.path.abspath(os.fspath(db))
        self._writes = itertools.count()
        self._last_write = 0
        self._lock = threading.Lock()
        self._turn = threading.RLock()  # one DuckDB configuration of the file at a time
        self.scorer = HumanLabelScorer(self.db, lambda: self._turn) if score_labels else None

    def version(self) -> str:
        parts = []
        for path in (self.db, self.db + ".wal"):
            try:
                stat = os.stat(path)
                parts.append(f"{stat.st_mtime_ns}.{stat.st_size}")
            except OSError:
                parts.append("-")
        try:
            segments = list_segments(self.db)
        except (SpoolNotPrivate, OSError):
            segments = []
        parts.append(str(len(segments)))
        parts.append(segments[-1].name if segments else "")
        parts.append(str(self._last_write))
        return ":".join(parts)

    @contextlib.contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._turn:
            connection = open_reader(self.db)
            try:
                yield connection
            finally:
                connection.close()

    def user_query(self, sql: str, *, max_rows: int, timeout_s: float | None = None) -> QueryResult:
        with self._turn:
            return run_user_query(
                self.db, sql, timeout_s=timeout_s or UI_QUERY_TIMEOUT_S, max_rows=max_rows, max_bytes=UI_MAX_BYTES
            )

    def append_labels(self, rows: list[dict[str, Any]]) -> None:
        with self._turn:
            connection = connect_writer(self.db)
            try:
                insert_label_rows(connection, rows)
            finally:
                connection.close()
        with self._lock:
            self._last_write = next(self._writes) + 1
        if self.scorer is not None:
            self.scorer.submit([row["rollout_id"] for row in rows])


class ReceiverBackend:
    """The database a running :class:`~agent_rl_plugin.receiver.Receiver` holds."""

    served = True

    def __init__(self, receiver: Receiver, *, score_labels: bool = True) -> None:
        self.receiver = receiver
        self.db = receiver.db
        self.scorer = HumanLabelScorer(self.db, contextlib.nullcontext) if score_labels else None
        self._labels_written = 0
        self._lock = threading.Lock()

    def version(self) -> str:
        written = self.receiver.sink.written()
        return f"{written.get('batches_written', 0)}:{self.receiver.sink.pending}:{self._labels_written}"

    @contextlib.contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        cursor = self.receiver.sink.cursor(timeout_s=10.0)
        try:
            yield cursor
        finally:
            cursor.close()

    def user_query(self, sql: str, *, max_rows: int, timeout_s: float | None = None) -> QueryResult:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            result = self.receiver.query(sql, cancel=None if deadline is None else lambda: time.monotonic() > deadline)
        except QueryCancelled:  # our own deadline, shorter than the receiver's limit
            raise QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped") from None
        if result.table.num_rows > max_rows:
            result.table = result.table.slice(0, max_rows)
            result.truncated, result.reason = True, "rows"
        return result

    def append_labels(self, rows: list[dict[str, Any]]) -> None:
        with self.reader() as cursor:
            insert_label_rows(cursor, rows)
        with self._lock:
            self._labels_written += len(rows)
        if self.scorer is not None:
            self.scorer.submit([row["rollout_id"] for row in rows])
