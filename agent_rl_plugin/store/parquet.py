"""Exporting the ``spans`` table as Parquet partitioned by date and service.

Contract:

* :func:`export_parquet` writes every row of ``spans`` (or those matching ``where``, an SQL
  condition over the spans columns) with DuckDB's ``COPY ... (FORMAT parquet, PARTITION_BY
  (date, service))`` into the Hive layout ``OUT/date=YYYY-MM-DD/service=NAME/part-<uuid>.parquet``:
  ``date`` is the UTC day of ``start_time``, ``service`` the ``service_name`` (``unknown`` when
  NULL; DuckDB percent-encodes characters a path cannot hold and decodes them on reading).
  Each file holds every column of ``spans``; the partition columns live in the paths, so read
  them back with ``read_parquet('OUT/**/*.parquet', hive_partitioning=true)``.
* ``where`` must be one read-only condition (it is checked with
  :func:`~agent_rl_plugin.store.user_sql.check_condition` as part of a SELECT: no write, no
  data-modifying CTE, no table function reading files); anything else raises
  :class:`ParquetExportError`.
* New files are mode 0600 and new folders 0700 (``file_mode=None`` keeps the umask's).
* ``OUT`` must not already hold Parquet files unless ``append=True`` (then new files with new
  names are added beside the old ones; ``agent-rl ingest`` skips rows it already has).
* Returns ``{"out", "rows", "files", "partitions"}``: rows written, new files, and the
  ``date=.../service=...`` folders written to. The database is only read (through
  :func:`~agent_rl_plugin.store.connection.open_reader`).
"""

from __future__ import annotations

import glob
import os
from typing import Any

import duckdb

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.store.connection import open_reader
from agent_rl_plugin.store.opening import sql_string
from agent_rl_plugin.store.user_sql import SqlRefused, UserSqlError, check_condition

PARTITION_COLUMNS = ("date", "service")

_SELECT = (
    "SELECT *, strftime(start_time, '%Y-%m-%d') AS \"date\", coalesce(service_name, 'unknown') AS service FROM spans"
)


class ParquetExportError(AgentRLError, ValueError):
    """The export cannot run as asked; ``str(error)`` says why and what to do."""


def select_sql(where: str | None = None) -> str:
    """The SELECT the export copies (``where`` vetted: one read-only condition)."""
    if where is None or not where.strip():
        return _SELECT
    try:
        return check_condition(where, _SELECT + " WHERE ({where})")
    except SqlRefused as exc:
        raise ParquetExportError(
            f"the where condition must be one read-only condition over the spans columns: {exc}"
        ) from None
    except UserSqlError as exc:
        raise ParquetExportError(f"the where condition is not valid SQL: {exc}") from None


def parquet_files(folder: str | os.PathLike[str]) -> list[str]:
    """Every ``*.parquet`` file under ``folder`` (recursively), sorted."""
    return sorted(glob.glob(os.path.join(os.fspath(folder), "**", "*.parquet"), recursive=True))


def export_parquet(
    db: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    where: str | None = None,
    *,
    append: bool = False,
    file_mode: int | None = 0o600,
) -> dict[str, Any]:
    """Write ``spans`` from ``db`` as partitioned Parquet under ``out_dir`` (see the module contract)."""
    out = os.path.abspath(os.fspath(out_dir))
    sql = select_sql(where)
    before = set(parquet_files(out)) if os.path.isdir(out) else set()
    if before and not append:
        raise ParquetExportError(
            f"{out} already holds {len(before)} Parquet files: choose an empty folder, or add to it with --append"
        )
    os.makedirs(out, exist_ok=True)
    connection = open_reader(db)
    try:
        options = "FORMAT parquet, PARTITION_BY (\"date\", service), FILENAME_PATTERN 'part-{uuid}'"
        if before or os.listdir(out):
            options += ", APPEND"
        try:
            result = connection.execute(f"COPY ({sql}) TO {sql_string(out)} ({options})").fetchone()
        except duckdb.Error as exc:
            message = str(exc).strip().splitlines()[0]
            raise ParquetExportError(f"export failed: {message}") from None
    finally:
        connection.close()
    rows = int(result[0]) if result else 0
    new_files = [f for f in parquet_files(out) if f not in before]
    if file_mode is not None:
        for name in new_files:
            os.chmod(name, file_mode)
            folder = os.path.dirname(name)
            while folder.startswith(out + os.sep):
                os.chmod(folder, 0o700 if file_mode & 0o077 == 0 else 0o755)
                folder = os.path.dirname(folder)
    partitions = sorted({os.path.relpath(os.path.dirname(f), out) for f in new_files})
    return {"out": out, "rows": rows, "files": len(new_files), "partitions": partitions}
