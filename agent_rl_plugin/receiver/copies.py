"""Copies of the receiver's database: ``/snapshot`` files and the copy ``/query`` runs on.

Contract (``folder`` is ``<db>.snapshots``, created 0700; every copy is 0600):

* :meth:`Copies.snapshot` writes a new full copy for ``POST /snapshot`` and returns its path.
  At most ``max_kept`` snapshot files exist (the oldest are deleted first; readers open them at
  once and unlink them). A request sooner than ``min_interval_s`` after the previous one
  raises :class:`RateLimited` (the server answers 429 with ``Retry-After``).
* :meth:`Copies.for_query` is a context manager yielding the path of a copy that holds
  everything committed when it was called: the copy is reused while ``key`` (:func:`content_key`
  of the writer's connection: the row count of every table) is unchanged, replaced when it
  changed, and deleted once no query uses it.
* :meth:`Copies.clear` deletes the folder (the receiver calls it when stopping).

``cursor_factory`` gives a cursor on the writer's connection after a flush; the copy is
``COPY FROM DATABASE`` through it (see :func:`~agent_rl_plugin.store.user_sql.copy_database`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import uuid
from typing import Callable, Hashable, Iterator

import duckdb

from agent_rl_plugin.store.user_sql import copy_database


def content_key(cursor: duckdb.DuckDBPyConnection) -> Hashable:
    """What changes whenever rows are added to or removed from any table of ``cursor``'s
    database (the receiver only appends: its own batches and merged spool segments)."""
    tables = cursor.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() AND NOT temporary ORDER BY 1, 2"
    ).fetchall()
    quoted = ['"' + schema.replace('"', '""') + '"."' + name.replace('"', '""') + '"' for schema, name in tables]
    if not quoted:
        return ()
    counts = cursor.execute("SELECT " + ", ".join(f"(SELECT count(*) FROM {q})" for q in quoted)).fetchone()
    assert counts is not None  # a SELECT without FROM returns one row
    return tuple(zip(quoted, counts))


class RateLimited(Exception):
    """A snapshot was asked for too soon; ``retry_after_s`` says when to ask again."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"snapshots are rate-limited: retry in {retry_after_s:.1f} s")
        self.retry_after_s = retry_after_s


class Copies:
    """Snapshot and query copies of one database (see the module contract)."""

    def __init__(
        self,
        folder: str,
        cursor_factory: Callable[[], duckdb.DuckDBPyConnection],
        *,
        max_kept: int = 4,
        min_interval_s: float = 0.5,
    ) -> None:
        self.folder = folder
        self.cursor_factory = cursor_factory
        self.max_kept = max_kept
        self.min_interval_s = min_interval_s
        self._lock = threading.Lock()
        self._last_snapshot = float("-inf")
        self._snapshots: list[str] = []
        self._query_path: str | None = None
        self._query_key: Hashable = None
        self._users: dict[str, int] = {}

    def _new_path(self, prefix: str) -> str:
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        os.chmod(self.folder, 0o700)
        return os.path.join(self.folder, f"{prefix}_{uuid.uuid4().hex}.duckdb")

    def snapshot(self) -> str:
        """A new full copy (see the module contract)."""
        with self._lock:
            wait = self._last_snapshot + self.min_interval_s - time.monotonic()
            if wait > 0:
                raise RateLimited(wait)
            self._last_snapshot = time.monotonic()
            path = copy_database(self.cursor_factory(), self._new_path("snapshot"), close=True)
            self._snapshots.append(path)
            while len(self._snapshots) > self.max_kept:
                _remove(self._snapshots.pop(0))
        return path

    @contextlib.contextmanager
    def for_query(self, key: Hashable) -> Iterator[str]:
        """The path of a current copy, kept while the block runs (see the module contract)."""
        with self._lock:
            if self._query_path is None or self._query_key != key:
                old = self._query_path
                cursor = self.cursor_factory()
                self._query_path = copy_database(cursor, self._new_path("query"), close=True)
                self._query_key = key
                if old is not None and not self._users.get(old):
                    _remove(old)
            path = self._query_path
            self._users[path] = self._users.get(path, 0) + 1
        try:
            yield path
        finally:
            with self._lock:
                self._users[path] -= 1
                if not self._users[path]:
                    del self._users[path]
                    if path != self._query_path:
                        _remove(path)

    def clear(self) -> None:
        """Delete every copy and the folder."""
        with self._lock:
            self._snapshots.clear()
            self._query_path = None
            shutil.rmtree(self.folder, ignore_errors=True)


def _remove(path: str) -> None:
    for name in (path, path + ".wal"):
        try:
            os.remove(name)
        except OSError:
            pass
