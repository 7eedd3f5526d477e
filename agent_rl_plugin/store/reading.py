"""Reading a store that has spool segments not merged yet.

A reader that finds segments first tries to merge them (a short write lease). When another
process holds the file read-only meanwhile, merging must wait, so the reader shows them instead:
:func:`overlay_unmerged` shadows the ``spans`` and ``rewards`` tables of a read-only connection
with temporary views over the table plus the unmerged segments. Every stored view (``rollouts``,
``steps``, ...) reads through them, so a query sees every span flushed before it was opened.

Contract: the overlay is a snapshot of the segments present when it is made (the file lock the
reader holds keeps any other process from merging them, so none disappears under it); a
connection this process also writes through (read-write) merges them instead. Returns the
number of segments shown.
"""

from __future__ import annotations

import logging
import os

import duckdb

from agent_rl_plugin.store.compaction import SEGMENT_TIME_SQL, merge_segments, merged_names
from agent_rl_plugin.store.spool import SpoolNotPrivate, list_segments, split_readable

logger = logging.getLogger("agent_rl_plugin.store")


def _sql_list(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def is_read_only(connection: duckdb.DuckDBPyConnection) -> bool:
    """True when ``connection``'s database was opened read-only."""
    row = connection.execute(
        "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()
    return bool(row and row[0])


def overlay_unmerged(connection: duckdb.DuckDBPyConnection, db_path: str | os.PathLike[str]) -> int:
    """Show the unmerged segments of ``db_path`` through ``connection`` (see the contract).
    A spool folder that is not private is left out (with a warning): the database alone is
    read. Unreadable segments are left out (the next merge quarantines them)."""
    try:
        segments = list_segments(db_path)
    except SpoolNotPrivate as exc:
        logger.warning("agent-rl: %s (reading the database without it)", exc)
        return 0
    if not segments:
        return 0
    if not is_read_only(connection):
        return merge_segments(connection, db_path, segments=segments).segments
    try:
        done = merged_names(connection, [s.name for s in segments])
    except duckdb.Error:  # a file from before the ledger: nothing of the spool is merged
        done = set()
    todo, _ = split_readable([s for s in segments if s.name not in done])
    if not todo:
        return 0
    from agent_rl_plugin.store.batch import rewards_select_sql, spans_select_sql  # pyarrow: only with a spool

    row = connection.execute("SELECT current_database()").fetchone()
    assert row is not None  # a SELECT without FROM returns one row
    catalog = _quoted(row[0])
    spans = f"read_parquet({_sql_list([s.spans_path for s in todo])}, filename = true)"
    connection.execute(
        f"CREATE OR REPLACE TEMP VIEW spans AS SELECT * FROM {catalog}.main.spans "
        f"UNION ALL BY NAME ({spans_select_sql(spans, SEGMENT_TIME_SQL)})"
    )
    _rollouts_without_row_ids(connection, catalog)
    rewards_files = [s.rewards_path for s in todo if s.rewards_path is not None]
    if rewards_files:
        rewards = f"read_parquet({_sql_list(rewards_files)}, filename = true)"
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW rewards AS SELECT * FROM {catalog}.main.rewards "
            f"UNION ALL BY NAME ({rewards_select_sql(rewards, SEGMENT_TIME_SQL)})"
        )
    return len(todo)


def _rollouts_without_row_ids(connection: duckdb.DuckDBPyConnection, catalog: str) -> None:
    """The overlay's ``spans`` is a view, which has no ``rowid``: where the file's ``rollouts``
    view fetches roots by row id (version 5, migration ``0012_lookup_indexes``), shadow it with
    version 4 (the same rows, found with a window) for this connection."""
    from agent_rl_plugin.store.views import ROLLOUTS_V4

    row = connection.execute(
        "SELECT sql FROM duckdb_views() WHERE database_name = current_database() AND schema_name = 'main' "
        "AND view_name = 'rollouts'"
    ).fetchone()
    if row is None or "rowid" not in str(row[0]):
        return
    connection.execute(
        ROLLOUTS_V4.replace("CREATE OR REPLACE VIEW rollouts", "CREATE OR REPLACE TEMP VIEW rollouts", 1)
    )
