"""Opening store files: for writing (with migrations), for reading, and SQL read-only checks.

Contract:

* :func:`connect_writer` opens ``path`` read-write (creating it and its folder), applies the
  migrations and returns the connection. :func:`ensure_schema` does the same and closes it,
  returning the migrations applied.
* :func:`open_reader` returns a connection for reading:

  - when a live :class:`~agent_rl_plugin.store.exporter.DuckDBSpanExporter` of this process
    writes that file, a cursor of the exporter's own connection, after everything it received
    has been committed (DuckDB refuses a second, read-only connection to a file this process
    has open read-write). The cursor stays valid until the exporter shuts down;
  - otherwise a ``read_only=True`` connection (an older schema written by this package is
    upgraded first, which needs a moment of write access);
  - when another process holds the file and it is an ``agent-rl serve`` receiver (announced in
    ``<db>.serve.json``), and ``snapshot`` is true: a read-only connection to a consistent copy
    the receiver writes on request (``POST /snapshot``; the copy is unlinked once open, and it
    costs a full copy of the file: ``agent-rl query`` uses the receiver's ``/query`` instead).

* Failures are :class:`~agent_rl_plugin.store.errors.StoreError`: no file ("no database at
  PATH..."), not a DuckDB file, or :class:`~agent_rl_plugin.store.errors.StoreLockedError` when
  another process holds the lock (its PID and the fix are in the message).
* :func:`is_read_only_sql` says whether every statement of ``sql`` only reads.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Protocol

import duckdb

from agent_rl_plugin.store.errors import StoreError, StoreLockedError, is_config_conflict, translate_duckdb_error
from agent_rl_plugin.store.migrations import applied_migrations, migrate, pending_migrations

NO_DATABASE = "no database at {path}: run an agent with agent-rl configured, or `agent-rl demo`"


class WriterHandle(Protocol):
    """What the exporter offers readers of the same process."""

    def reader_cursor(self, timeout_s: float) -> duckdb.DuckDBPyConnection:
        """A cursor on the writer's connection once everything received so far is committed."""


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


def _connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(path, read_only=read_only)
    except duckdb.Error as exc:
        if read_only and is_config_conflict(exc):
            # This process already has the file open read-write: share that database.
            return _connect(path, read_only=False)
        translated = translate_duckdb_error(exc, path)
        if translated is not None:
            raise translated from exc
        raise StoreError(f"cannot open {path}: {exc}", path) from exc


def open_write_connection(path: str | os.PathLike[str]) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """Open ``path`` read-write (creating its folder), apply migrations; (connection, applied).

    Does not consult the in-process writer registry: this is what the exporter's writer thread
    itself calls.
    """
    text = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(text))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder of {text}: {exc}", text) from exc
    connection = _connect(text, read_only=False)
    try:
        applied = migrate(connection)
    except BaseException:
        connection.close()
        raise
    return connection, applied


def connect_writer(path: str | os.PathLike[str], *, flush_timeout_s: float = 30.0) -> duckdb.DuckDBPyConnection:
    """A read-write connection to ``path`` with every migration applied. Close it when done.

    If a live exporter of this process writes ``path``, this is a cursor of its connection
    (after a flush), since DuckDB lets one process hold a file once.
    """
    handle = live_writer(path)
    if handle is not None:
        return handle.reader_cursor(flush_timeout_s)
    connection, _ = open_write_connection(path)
    return connection


def ensure_schema(path: str | os.PathLike[str]) -> list[str]:
    """Create ``path`` if needed and apply missing migrations; returns the names applied."""
    if live_writer(path) is not None:
        connect_writer(path).close()  # the exporter migrated on open
        return []
    connection, applied = open_write_connection(path)
    connection.close()
    return applied


def _receiver_snapshot(path: str) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection to a fresh copy made by the ``agent-rl serve`` holding ``path``,
    or ``None`` when no receiver of ``path`` runs (or it cannot make one)."""
    from agent_rl_plugin.receiver.client import find_receiver, request_snapshot

    info = find_receiver(path)
    if info is None:
        return None
    try:
        copy = request_snapshot(info)
        connection = duckdb.connect(copy, read_only=True)
    except (OSError, ValueError, KeyError, duckdb.Error):
        return None
    try:
        os.remove(copy)  # the open connection keeps reading it; nothing is left behind
    except OSError:
        pass
    return connection


def open_reader(
    path: str | os.PathLike[str], *, flush_timeout_s: float = 30.0, upgrade: bool = True, snapshot: bool = True
) -> duckdb.DuckDBPyConnection:
    """A connection for reading ``path`` (see the module contract). Close it when done."""
    text = os.fspath(path)
    handle = live_writer(text)
    if handle is not None:
        return handle.reader_cursor(flush_timeout_s)
    if not os.path.exists(text):
        raise StoreError(NO_DATABASE.format(path=text), text)
    try:
        connection = _connect(text, read_only=True)
    except StoreLockedError:
        copy = _receiver_snapshot(text) if snapshot else None
        if copy is None:
            raise
        return copy
    if upgrade:
        try:
            needs_upgrade = bool(applied_migrations(connection)) and bool(pending_migrations(connection))
        except duckdb.Error:
            needs_upgrade = False
        if needs_upgrade:
            connection.close()
            writer, _ = open_write_connection(text)
            writer.close()
            connection = _connect(text, read_only=True)
    return connection


# --- read-only SQL ------------------------------------------------------------------------
_READ_PRAGMAS = frozenset(
    {
        "collations",
        "database_list",
        "database_size",
        "functions",
        "metadata_info",
        "platform",
        "show",
        "show_databases",
        "show_tables",
        "show_tables_expanded",
        "storage_info",
        "table_info",
        "user_agent",
        "version",
    }
)
_PRAGMA_NAME = re.compile(r"^\s*pragma\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_EXPLAIN_PREFIX = re.compile(r"^\s*explain\s+(?:analy[sz]e\s+)?", re.IGNORECASE)
_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL)


def is_read_only_sql(sql: str) -> bool:
    """True when every statement in ``sql`` only reads.

    Accepted: SELECT (incl. WITH, VALUES, FROM-first, DESCRIBE, SHOW, SUMMARIZE), EXPLAIN [ANALYZE]
    of a read-only statement, and PRAGMAs that only report (``table_info``, ``show_tables``,
    ``database_size``, ``version``, ...). Everything else (INSERT, UPDATE, DELETE, CREATE, DROP,
    ALTER, ATTACH, DETACH, COPY, EXPORT, IMPORT, SET, RESET, USE, LOAD/INSTALL, CALL, CHECKPOINT,
    VACUUM, transactions) is refused; so is an empty string. SQL that does not parse raises the
    ``duckdb.ParserException`` (a ``duckdb.Error``).
    """
    statements = duckdb.extract_statements(sql)
    if not statements:
        return False
    return all(_statement_reads_only(statement) for statement in statements)


def _statement_reads_only(statement: "duckdb.Statement") -> bool:
    kind = statement.type
    if kind == duckdb.StatementType.SELECT:
        return True
    text = _LEADING_COMMENTS.sub("", statement.query)
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN_PREFIX.sub("", text, count=1)
        if inner == text:
            return False
        try:
            return is_read_only_sql(inner)
        except duckdb.Error:
            return False
    if kind == duckdb.StatementType.PRAGMA:
        match = _PRAGMA_NAME.match(text)
        return bool(match) and match.group(1).lower() in _READ_PRAGMAS
    return False
