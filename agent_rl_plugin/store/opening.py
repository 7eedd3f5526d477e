"""Opening a store file, once, without waiting: the primitives under every other way in.

Contract:

* :func:`connect_file` opens ``path`` with DuckDB. A read-only open of a file this process
  already has open read-write shares that database (DuckDB refuses a second configuration of
  one file in a process). Failures are :class:`~agent_rl_plugin.store.errors.StoreError`s:
  :class:`~agent_rl_plugin.store.errors.StoreLockedError` when another process holds the file.
* :func:`open_write_connection` opens ``path`` read-write (creating its folder, and the file
  0600), applies the migrations and returns ``(connection, applied)``.
* Either may attach the file with a row group size instead (the merger child's leases: see
  :data:`~agent_rl_plugin.store.merger_process.MERGE_ROW_GROUP_SIZE`).

Neither waits for a lock nor merges spool segments: :mod:`agent_rl_plugin.store.lease` does.
"""

from __future__ import annotations

import os

import duckdb

from agent_rl_plugin.store.errors import StoreError, is_config_conflict, translate_duckdb_error
from agent_rl_plugin.store.migrations import migrate

#: The name a file opened with a row group size (:func:`connect_file`) has in its connection.
ATTACHED_NAME = "agent_rl_store"


def connect_file(path: str, read_only: bool, row_group_size: int | None = None) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect(path, read_only=...)`` with the store's errors (see the contract).

    ``row_group_size`` (read-write only): the file is attached to a connection of its own, with
    rows appended from it going into row groups of that many rows (DuckDB's ``ATTACH ...
    (ROW_GROUP_SIZE n)``), and made the connection's default database. For a process that opens
    the file for nothing else (the merger child): DuckDB refuses to attach a file this process
    already has open another way."""
    try:
        if row_group_size and not read_only:
            return _attach(path, int(row_group_size))
        return duckdb.connect(path, read_only=read_only)
    except duckdb.Error as exc:
        if read_only and is_config_conflict(exc):
            # This process already has the file open read-write: share that database.
            return connect_file(path, read_only=False)
        translated = translate_duckdb_error(exc, path)
        if translated is not None:
            raise translated from exc
        raise StoreError(f"cannot open {path}: {exc}", path) from exc


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal (quotes doubled): for the places DuckDB takes no
    parameter (``ATTACH``, ``COPY ... TO``, a table function's literal path)."""
    return "'" + text.replace("'", "''") + "'"


def _attach(path: str, row_group_size: int) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    try:
        connection.execute(f"ATTACH {sql_string(path)} AS {ATTACHED_NAME} (ROW_GROUP_SIZE {row_group_size})")
        connection.execute(f"USE {ATTACHED_NAME}")
    except BaseException:
        connection.close()
        raise
    return connection


def open_write_connection(
    path: str | os.PathLike[str], row_group_size: int | None = None
) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """Open ``path`` read-write (creating its folder), apply migrations; (connection, applied).
    ``row_group_size``: see :func:`connect_file`."""
    text = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(text))
    if "?" in os.path.abspath(text):
        raise StoreError(
            f"cannot use {text} as a database: DuckDB cannot write a database whose path contains '?' "
            "(it reads the rest as options). Fix: choose a path without '?'",
            text,
        )
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder of {text}: {exc}", text) from exc
    new = not os.path.exists(text)
    connection = connect_file(text, read_only=False, row_group_size=row_group_size)
    try:
        applied = migrate(connection)
    except BaseException:
        connection.close()
        raise
    if new or applied:
        make_private(text)
    return connection, applied


def make_private(path: str) -> None:
    """chmod 0600 the database file and its write-ahead log, where they exist and are ours
    (DuckDB creates them with the umask's permissions, usually 0644)."""
    for created in (path, path + ".wal"):
        try:
            os.chmod(created, 0o600)
        except OSError:
            pass
