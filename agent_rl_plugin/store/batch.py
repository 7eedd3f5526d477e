"""Writing converted batches: one ``INSERT ... SELECT`` from an Arrow table per batch.

Contract:

* :func:`insert_batch` writes a spans table (:data:`~agent_rl_plugin.store.rows.SPAN_SCHEMA`)
  and its rewards table (:data:`~agent_rl_plugin.store.rows.REWARD_SCHEMA`, optional) in **one
  transaction**: both land or neither does; the error propagates after a rollback.
* Nanosecond timestamps become ``TIMESTAMP`` columns in SQL (vectorised), ``duration_ms`` is
  computed from them, ``ingested_at`` is one value per batch.
* :func:`insert_rows_one_by_one` is the fallback after a failed batch: each span (with the
  rewards its events carried) in its own transaction, so one bad row loses only itself.
* :func:`is_data_error` tells a bad row (worth retrying row by row) from a broken database or
  disk (not worth it: every row would fail the same way).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.store.rows import REWARD_SCHEMA, SPAN_SCHEMA

SPANS_VIEW = "_agent_rl_spans_batch"
REWARDS_VIEW = "_agent_rl_rewards_batch"

_NS_COLUMNS = {"start_unix_nano", "end_unix_nano"}
_PASS_THROUGH = [name for name in SPAN_SCHEMA.names if name not in _NS_COLUMNS]

INSERT_SPANS_SQL = (
    "INSERT INTO spans ("
    + ", ".join(_PASS_THROUGH)
    + ", start_time, end_time, duration_ms, start_unix_nano, end_unix_nano, ingested_at) SELECT "
    + ", ".join(_PASS_THROUGH)
    + ", make_timestamp(start_unix_nano // 1000), make_timestamp(end_unix_nano // 1000),"
    " (end_unix_nano - start_unix_nano) / 1e6, start_unix_nano, end_unix_nano, ?::TIMESTAMP"
    f" FROM {SPANS_VIEW}"
)

_REWARD_PASS = [n for n in REWARD_SCHEMA.names if n != "created_unix_nano"]
INSERT_REWARDS_SQL = (
    "INSERT INTO rewards ("
    + ", ".join(_REWARD_PASS)
    + ", created_at) SELECT "
    + ", ".join(_REWARD_PASS)
    + f", coalesce(make_timestamp(created_unix_nano // 1000), ?::TIMESTAMP) FROM {REWARDS_VIEW}"
)

# Errors caused by the data of a row; anything else (I/O, a fatal or internal error, a closed
# connection) is the database's and fails every row alike.
_DATA_ERRORS: tuple[type[BaseException], ...] = (
    duckdb.ConversionException,
    duckdb.InvalidInputException,
    duckdb.ConstraintException,
    duckdb.OutOfRangeException,
    duckdb.TypeMismatchException,
    duckdb.DataError,
    pa.ArrowException,
    ValueError,
    TypeError,
)


def is_data_error(exc: BaseException) -> bool:
    """True when ``exc`` is about the rows written, not the database or the disk."""
    return isinstance(exc, _DATA_ERRORS) and not isinstance(exc, (duckdb.IOException, duckdb.FatalException))


@dataclass
class RowOutcome:
    """Result of the row-by-row fallback."""

    written: int = 0
    dropped: int = 0
    rewards_written: int = 0
    first_error: BaseException | None = None


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def insert_batch(
    connection: duckdb.DuckDBPyConnection, spans: pa.Table, rewards: pa.Table | None = None
) -> None:
    """Insert ``spans`` and ``rewards`` in one transaction (rolled back on error, which propagates)."""
    now = _utc_now()
    connection.execute("BEGIN TRANSACTION")
    try:
        if spans.num_rows:
            connection.register(SPANS_VIEW, spans)
            try:
                connection.execute(INSERT_SPANS_SQL, [now])
            finally:
                connection.unregister(SPANS_VIEW)
        if rewards is not None and rewards.num_rows:
            connection.register(REWARDS_VIEW, rewards)
            try:
                connection.execute(INSERT_REWARDS_SQL, [now])
            finally:
                connection.unregister(REWARDS_VIEW)
        connection.execute("COMMIT")
    except BaseException:
        try:
            connection.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise


def insert_rows_one_by_one(
    connection: duckdb.DuckDBPyConnection,
    spans: pa.Table,
    rewards: pa.Table | None = None,
    *,
    give_up_after: int = 50,
) -> RowOutcome:
    """Insert each span (and its rewards) in its own transaction; bad rows are dropped.

    Stops early, dropping the rest, after ``give_up_after`` consecutive failures or at the
    first error that is not a data error (the database itself is failing).
    """
    outcome = RowOutcome()
    consecutive = 0
    for index in range(spans.num_rows):
        row = spans.slice(index, 1)
        row_rewards = None
        if rewards is not None and rewards.num_rows:
            mask = pc.and_(
                pc.equal(rewards["trace_id"], row["trace_id"][0]),
                pc.equal(rewards["span_id"], row["span_id"][0]),
            )
            row_rewards = rewards.filter(mask)
        try:
            insert_batch(connection, row, row_rewards)
        except Exception as exc:
            outcome.dropped += 1
            consecutive += 1
            if outcome.first_error is None:
                outcome.first_error = exc
            if consecutive >= give_up_after or not is_data_error(exc):
                outcome.dropped += spans.num_rows - index - 1
                break
            continue
        consecutive = 0
        outcome.written += 1
        outcome.rewards_written += 0 if row_rewards is None else row_rewards.num_rows
    return outcome
