"""The live writers of this process, by database file: who a reader must flush first.

Contract: :func:`register_writer` announces a writer of a file (the exporter and the receiver do,
when created), :func:`unregister_writer` withdraws it (on shutdown), :func:`live_writer` gives
the most recent one of a file. Paths are compared by :func:`store_key`. Thread-safe; imports
nothing heavy, so a recording agent can register without loading DuckDB.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import duckdb


class WriterHandle(Protocol):
    """What a live writer of this process offers other users of the same file."""

    def reader_cursor(self, timeout_s: float) -> duckdb.DuckDBPyConnection | None:
        """Once everything received so far is on disk: a cursor on the writer's own connection
        when it holds the file (the receiver), else ``None`` (open the file as usual)."""


_writers: dict[str, list[WriterHandle]] = {}
_writers_lock = threading.Lock()


def store_key(path: str | os.PathLike[str]) -> str:
    """The canonical form of a database path (absolute, symlinks resolved)."""
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def register_writer(path: str | os.PathLike[str], handle: WriterHandle) -> None:
    """Announce a live in-process writer of ``path`` (the exporter does, when created)."""
    with _writers_lock:
        _writers.setdefault(store_key(path), []).append(handle)


def unregister_writer(path: str | os.PathLike[str], handle: WriterHandle) -> None:
    """Withdraw ``handle`` (the exporter does, on shutdown). Unknown handles are ignored."""
    with _writers_lock:
        handles = _writers.get(store_key(path), [])
        if handle in handles:
            handles.remove(handle)
        if not handles:
            _writers.pop(store_key(path), None)


def live_writer(path: str | os.PathLike[str]) -> WriterHandle | None:
    """The most recently registered live writer of ``path`` in this process, if any."""
    with _writers_lock:
        handles = _writers.get(store_key(path))
        return handles[-1] if handles else None
