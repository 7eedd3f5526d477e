"""Merging spool segments into the database (see :mod:`agent_rl_plugin.store.spool`).

Contract:

* :func:`merge_segments` runs on a read-write connection of the database. It inserts the spans
  and rewards of every segment not yet in the ledger table ``_agent_rl_segments`` together with
  their ledger rows, in **one transaction per chunk** of segments, then deletes the merged
  files. A crash between the commit and the deletion leaves files whose names the ledger holds:
  the next merge deletes them without inserting them again. Segments are read with
  ``read_parquet`` in SQL (no Python object is scanned), so a merge works at interpreter exit.
* A span already in the database (same trace and span id) is not inserted again, and neither is
  a reward whose id is stored: spans skipped that way are counted in :attr:`MergeResult.duplicates`.
* A chunk that fails on its data is retried segment by segment, and a failing segment is split
  in halves by row ranges down to single rows, each in its own transaction: a bad row loses
  only itself, and the dropped count is kept in the segment's ledger row and reported.
  Errors that are not about the data (I/O, a lock, a closed connection) propagate; nothing is
  deleted that is not merged.
* :func:`agent_rl_plugin.store.lease.try_merge` does it in a short lease of the file.
* Leftover ``.tmp-`` files of dead writers are removed on each merge; a segment whose Parquet
  cannot be read (truncated, foreign) is moved to ``<spool>/quarantine/`` with one logged error
  and the others are merged.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import duckdb

from agent_rl_plugin.store.holders import remove_stale_notes
from agent_rl_plugin.store.migrations import SEGMENT_LEDGER_TABLE
from agent_rl_plugin.store.spool import (  # noqa: F401 - CHUNK_SEGMENTS: re-exported, its old home
    CHUNK_SEGMENTS,
    Segment,
    SpoolNotPrivate,
    list_segments,
    quarantine,
    remove_leftovers,
    remove_segment,
    split_readable,
)

logger = logging.getLogger("agent_rl_plugin.store")

#: The time a segment was written, from its name (``<ns>-<pid>-<n>``): the rows' ``ingested_at``
#: and the rewards' default ``created_at``, the same whether merged or read from the spool.
SEGMENT_TIME_SQL = "make_timestamp(CAST(split_part(parse_filename(filename, true), '-', 1) AS BIGINT) // 1000)"
#: Segment rows in the order they were written (segments sort by name, rows by position).
SEGMENT_ORDER = "filename, file_row_number"


def segment_source(paths_param: str = "?") -> str:
    """``read_parquet`` of segment files given as a list parameter, with their file names and
    row numbers."""
    return f"read_parquet({paths_param}, filename = true, file_row_number = true)"


@dataclass
class MergeResult:
    """What one merge did: segments merged, rows dropped by bad data, seconds spent."""

    segments: int = 0
    spans: int = 0
    duplicates: int = 0
    dropped_rows: int = 0
    leftovers_removed: int = 0
    quarantined: int = 0
    undeleted: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def merged_names(connection: duckdb.DuckDBPyConnection, names: Sequence[str]) -> set[str]:
    """Which of ``names`` the ledger holds."""
    if not names:
        return set()
    rows = connection.execute(
        f"SELECT name FROM {SEGMENT_LEDGER_TABLE} WHERE name IN (SELECT unnest(?::VARCHAR[]))", [list(names)]
    ).fetchall()
    return {row[0] for row in rows}


def _insert(
    connection: duckdb.DuckDBPyConnection, segments: Sequence[Segment], rows: tuple[int, int] | None, dropped: int = 0
) -> int:
    """Insert ``segments`` (or the row range ``rows`` = (offset, count) of a single one) and, when
    the whole of each is done, their ledger rows: one transaction. Returns the spans inserted
    (spans already stored are skipped)."""
    from agent_rl_plugin.store.batch import (  # pyarrow: merges only
        choose_insert_sql,
        insert_rewards_sql,
        insert_spans_sql,
        utc_now,
    )
    from agent_rl_plugin.store.transaction import arrow_transaction

    spans_files = [s.spans_path for s in segments]
    rewards_files = [s.rewards_path for s in segments if s.rewards_path is not None]
    sql = (  # checked before the transaction (see choose_insert_sql)
        choose_insert_sql(connection, segment_source(), [spans_files], SEGMENT_TIME_SQL, SEGMENT_ORDER)
        if rows is None
        else ""
    )
    with arrow_transaction(connection, {}):
        if rows is None:
            row = connection.execute(sql, [spans_files]).fetchone()
            if rewards_files:
                connection.execute(insert_rewards_sql(segment_source(), SEGMENT_TIME_SQL), [rewards_files])
            connection.execute(
                f"INSERT INTO {SEGMENT_LEDGER_TABLE} (name, merged_at, dropped_rows) "
                "SELECT unnest(?::VARCHAR[]), ?::TIMESTAMP, ?",
                [[s.name for s in segments], utc_now(), dropped],
            )
        else:
            offset, count = rows
            source = (
                f"(SELECT * FROM {segment_source()} ORDER BY file_row_number LIMIT {int(count)} OFFSET {int(offset)})"
            )
            row = connection.execute(
                insert_spans_sql(source, SEGMENT_TIME_SQL, SEGMENT_ORDER), [spans_files]
            ).fetchone()
        assert row is not None  # an INSERT returns one row: its count
    return int(row[0])


def _rows(connection: duckdb.DuckDBPyConnection, segments: Sequence[Segment]) -> int:
    """Span rows in ``segments`` (from the Parquet footers)."""
    row = connection.execute("SELECT count(*) FROM read_parquet(?)", [[s.spans_path for s in segments]]).fetchone()
    assert row is not None  # count(*) returns one row
    return int(row[0])


def _merge_one_bisecting(connection: duckdb.DuckDBPyConnection, segment: Segment, result: MergeResult) -> int:
    """Merge one segment whose whole insert failed on its data: row ranges, halving down to
    single rows; its rewards follow with the ledger row (a reward whose span was dropped is
    kept: it still names its rollout)."""
    from agent_rl_plugin.store.batch import insert_rewards_sql, is_data_error, utc_now
    from agent_rl_plugin.store.transaction import arrow_transaction

    total = _rows(connection, [segment])
    dropped = 0
    inserted = 0

    def attempt(offset: int, count: int) -> None:
        nonlocal dropped, inserted
        if count <= 0:
            return
        try:
            inserted += _insert(connection, [segment], (offset, count))
        except Exception as exc:
            if not is_data_error(exc):
                raise
            if count == 1:
                dropped += 1
                if len(result.errors) < 5:
                    result.errors.append(f"{segment.name} row {offset}: {str(exc).splitlines()[0]}")
                return
            half = count // 2
            attempt(offset, half)
            attempt(offset + half, count - half)

    attempt(0, total)
    with arrow_transaction(connection, {}):
        if segment.rewards_path is not None:
            connection.execute(insert_rewards_sql(segment_source(), SEGMENT_TIME_SQL), [[segment.rewards_path]])
        connection.execute(
            f"INSERT INTO {SEGMENT_LEDGER_TABLE} (name, merged_at, dropped_rows) VALUES (?, ?, ?)",
            [segment.name, utc_now(), dropped],
        )
    result.dropped_rows += dropped
    return inserted


def merge_segments(
    connection: duckdb.DuckDBPyConnection,
    db_path: str | os.PathLike[str],
    *,
    segments: Sequence[Segment] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> MergeResult:
    """Merge the spool segments of ``db_path`` through ``connection`` (see the module contract)."""
    with _merge_lock(db_path):
        return _merge(connection, db_path, segments, on_progress)


def _merge_lock(db_path: str | os.PathLike[str]) -> threading.Lock:
    """One merge at a time per file in this process (two threads would insert the same segment
    and fail on the ledger's key; other processes are kept out by DuckDB's file lock)."""
    key = os.path.realpath(os.fspath(db_path))
    with _locks_lock:
        return _locks.setdefault(key, threading.Lock())


_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def _merge(
    connection: duckdb.DuckDBPyConnection,
    db_path: str | os.PathLike[str],
    segments: Sequence[Segment] | None,
    on_progress: Callable[[int], None] | None,
) -> MergeResult:
    started = time.perf_counter()
    result = MergeResult()
    result.leftovers_removed = remove_leftovers(db_path) + remove_stale_notes(db_path)
    try:
        todo = list(list_segments(db_path) if segments is None else segments)
    except SpoolNotPrivate as exc:  # nothing in it is merged; the database itself is fine
        logger.warning("agent-rl: %s", exc)
        return result
    if not todo:
        result.seconds = time.perf_counter() - started
        return result
    from agent_rl_plugin.store.batch import is_data_error  # pyarrow, OTel: only when there is something to merge

    done = merged_names(connection, [s.name for s in todo])
    finished = [s for s in todo if s.name in done]  # merged before, files not deleted yet
    todo, unreadable = split_readable([s for s in todo if s.name not in done])
    for segment, why in unreadable:
        folder = quarantine(db_path, segment)
        result.quarantined += 1
        logger.error(
            "agent-rl: spool segment %s of %s cannot be read (%s): moved to %s, not merged",
            segment.name,
            db_path,
            why,
            folder,
        )
    for start in range(0, len(todo), CHUNK_SEGMENTS):
        chunk = todo[start : start + CHUNK_SEGMENTS]
        total, spans_before, dropped_before = _rows(connection, chunk), result.spans, result.dropped_rows
        try:
            result.spans += _insert(connection, chunk, None)
        except Exception as exc:
            if not is_data_error(exc):
                raise
            for segment in chunk:
                try:
                    result.spans += _insert(connection, [segment], None)
                except Exception as one_exc:
                    if not is_data_error(one_exc):
                        raise
                    result.spans += _merge_one_bisecting(connection, segment, result)
        result.duplicates += total - (result.spans - spans_before) - (result.dropped_rows - dropped_before)
        result.segments += len(chunk)
        finished.extend(chunk)
        if on_progress is not None:
            on_progress(len(chunk))
    result.undeleted = sum(not remove_segment(s) for s in finished)
    result.seconds = time.perf_counter() - started
    if result.dropped_rows:
        logger.error(
            "agent-rl: %d span rows of the spool of %s could not be stored (%s) and were dropped; "
            "the rest of their segments was merged",
            result.dropped_rows,
            db_path,
            "; ".join(result.errors),
        )
    return result
