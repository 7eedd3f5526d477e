"""Writing converted batches: one ``INSERT ... SELECT`` from an Arrow table per batch.

Contract:

* :func:`insert_batch` writes a spans table (:data:`~agent_rl_plugin.store.rows.SPAN_SCHEMA`)
  and its rewards table (:data:`~agent_rl_plugin.store.rows.REWARD_SCHEMA`, optional) in **one
  transaction**: both land or neither does; the error propagates after a rollback. A span
  already stored (same trace and span id: a replay, a retried export) is kept once, and so is
  a reward with a stored ``reward_id``; it returns how many spans it inserted. Both checks are
  bounded by time so that they cost the same in a store of any size: a stored span is looked
  for among spans that started within the batch's time range, a stored reward among rewards
  created within it (a copy has its original's time; a batch holding a reward without a time
  looks at every stored reward): :func:`new_spans_sql`, :func:`new_rewards_sql`.
* Nanosecond timestamps become ``TIMESTAMP`` columns in SQL (vectorised), ``duration_ms`` is
  computed from them, the denormalised columns are read from the attributes JSON, and
  ``ingested_at`` is one value per batch.
* :func:`insert_bisecting` is the fallback after a failed batch: halves, then quarters, ...
  down to single spans (each with the rewards its events carried), each in its own
  transaction, so one bad row loses only itself.
* :func:`is_data_error` tells a bad row (worth retrying row by row) from a broken database or
  disk (not worth it: every row would fail the same way).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store import arrow_columns
from agent_rl_plugin.store.rows import REWARD_SCHEMA, SPAN_SCHEMA

SPANS_VIEW = "_agent_rl_spans_batch"
REWARDS_VIEW = "_agent_rl_rewards_batch"

_DERIVED_KEYS = (sc.ROLLOUT_ID, sc.TASK_ID, sc.GROUP_ID, sc.ROLLOUT_ROOT, sc.GEN_AI_OPERATION_NAME, sc.SPAN_KIND)
_PATHS = "[" + ", ".join(f"'$.\"{key}\"'" for key in _DERIVED_KEYS) + "]"
_PASS_THROUGH = [name for name in SPAN_SCHEMA.names if name not in ("start_unix_nano", "end_unix_nano")]

#: A column :func:`insert_batch` adds to a registered batch: each row's position in it.
ORDINAL = "_agent_rl_ordinal"

#: The final columns of ``spans`` that :func:`spans_select_sql` produces, in order.
SPAN_COLUMNS: tuple[str, ...] = (
    *_PASS_THROUGH,
    "start_time",
    "end_time",
    "duration_ms",
    "rollout_id",
    "task_id",
    "group_id",
    "is_rollout_root",
    "operation",
    "span_kind",
    "start_unix_nano",
    "end_unix_nano",
    "ingested_at",
)


def spans_select_sql(source: str, ingested_at: str = "?::TIMESTAMP") -> str:
    """SELECT of the ``spans`` table's columns (:data:`SPAN_COLUMNS`) from ``source``, a relation
    with the columns of :data:`~agent_rl_plugin.store.rows.SPAN_SCHEMA` (a registered Arrow
    table, or ``read_parquet`` of segment files). Times become ``TIMESTAMP`` columns, and
    ``duration_ms`` is computed from the nanoseconds; from the attributes JSON, in one parse:
    rollout_id (else the trace id), task_id, group_id, operation, span_kind, and
    is_rollout_root (the root flag, or a parentless span with an operation name and no rollout
    id: a foreign framework's root). ``ingested_at`` is an SQL expression (default: a parameter)."""
    return f"""SELECT {", ".join(_PASS_THROUGH)},
    make_timestamp(start_unix_nano // 1000) AS start_time,
    make_timestamp(end_unix_nano // 1000) AS end_time,
    (end_unix_nano - start_unix_nano) / 1e6 AS duration_ms,
    coalesce(k[1], trace_id) AS rollout_id,
    k[2] AS task_id,
    k[3] AS group_id,
    coalesce(k[4] = 'true', false) OR (parent_span_id IS NULL AND k[1] IS NULL AND k[5] IS NOT NULL) AS is_rollout_root,
    k[5] AS operation,
    k[6] AS span_kind,
    start_unix_nano,
    end_unix_nano,
    {ingested_at} AS ingested_at
FROM (SELECT *, json_extract_string(attributes, {_PATHS}) AS k FROM {source})"""


def new_spans_sql(source: str, order_by: str, *, distinct_ids: bool = False) -> str:
    """The rows of ``source`` whose span is not stored yet (same trace and span id), each once:
    a replayed or re-sent span is kept once. The lookup is bounded to stored spans that started
    within the batch's own time range (a duplicate starts when the original did), which DuckDB
    prunes with its zone maps: the cost stays flat as the store grows. Rows keep their order in
    ``source`` (``order_by``: columns of ``source`` that give it), as a plain insert would.
    ``distinct_ids``: the caller knows no two rows of ``source`` share a span id, so the
    statement leaves out the step that keeps one of each (a window over the batch: ~2 µs a row)."""
    once = (
        ""
        if distinct_ids
        else f"QUALIFY row_number() OVER (PARTITION BY b.trace_id, b.span_id ORDER BY {order_by}) = 1\n"
    )
    return f"""(WITH b AS (SELECT * FROM {source}),
    bounds AS (SELECT min(start_unix_nano) AS lo, max(start_unix_nano) AS hi FROM b)
SELECT * FROM b WHERE NOT EXISTS (
    SELECT 1 FROM spans AS s
    WHERE s.start_unix_nano BETWEEN (SELECT lo FROM bounds) AND (SELECT hi FROM bounds)
      AND s.trace_id = b.trace_id AND s.span_id = b.span_id)
{once}ORDER BY {order_by})"""


def insert_spans_sql(
    source: str, ingested_at: str = "?::TIMESTAMP", order_by: str = ORDINAL, *, distinct_ids: bool = False
) -> str:
    """``INSERT INTO spans`` of :func:`spans_select_sql` over the new rows of ``source``
    (:func:`new_spans_sql`); the statement returns the number of rows inserted."""
    return insert_every_span_sql(new_spans_sql(source, order_by, distinct_ids=distinct_ids), ingested_at)


def insert_every_span_sql(source: str, ingested_at: str = "?::TIMESTAMP") -> str:
    """``INSERT INTO spans`` of :func:`spans_select_sql` over every row of ``source``, in its
    order (DuckDB keeps a plain scan's order on insert): for a ``source`` that
    :func:`repeats_sql` found without repeated or stored spans. It leaves out the anti-join and
    the sort that keeps the order after it (~1 µs a row of the ~6 a merged row costs)."""
    return f"INSERT INTO spans ({', '.join(SPAN_COLUMNS)}) {spans_select_sql(source, ingested_at)}"


def repeats_sql(source: str) -> str:
    """One row about ``source`` (columns of :data:`~agent_rl_plugin.store.rows.SPAN_SCHEMA`):
    (no two rows share a span id and every row has one, some row's span is stored already), the
    second bounded by start time as :func:`new_spans_sql` bounds its lookup (same answer, same
    flat cost). ``(True, False)`` lets the caller insert with :func:`insert_every_span_sql`."""
    return f"""WITH b AS (SELECT trace_id, span_id, start_unix_nano FROM {source}),
    bounds AS (SELECT min(start_unix_nano) AS lo, max(start_unix_nano) AS hi,
        count(*) = count(span_id) AND count(*) = count(DISTINCT span_id) AS distinct_ids FROM b)
SELECT (SELECT distinct_ids FROM bounds), EXISTS (
    SELECT 1 FROM spans AS s SEMI JOIN b ON s.trace_id = b.trace_id AND s.span_id = b.span_id
    WHERE s.start_unix_nano BETWEEN (SELECT lo FROM bounds) AND (SELECT hi FROM bounds))"""


def choose_insert_sql(
    connection: duckdb.DuckDBPyConnection,
    source: str,
    parameters: list[object],
    ingested_at: str = "?::TIMESTAMP",
    order_by: str = ORDINAL,
) -> str:
    """The statement that stores the new spans of ``source`` (its parameters: ``parameters``,
    then the ``ingested_at`` one when it is a parameter), chosen by :func:`repeats_sql` run on
    ``connection``: every row when none repeats nor is stored, else the anti-join
    (:func:`insert_spans_sql`), without its per-batch step when the span ids are distinct.

    Run it before the insert's transaction: a check that fails (DuckDB found no memory for it)
    then leaves no aborted transaction behind, and the full anti-join is chosen, as before the
    check existed. Between the check and the insert no other process can write (the caller holds
    the file); another connection of this process could, as it could between the anti-join's
    read and its insert."""
    try:
        rows = connection.execute(repeats_sql(source), parameters).fetchall()  # one row; fetched to the end
    except duckdb.Error:
        rows = []
    distinct, stored = (bool(rows[0][0]), bool(rows[0][1])) if rows else (False, True)
    if distinct and not stored:
        return insert_every_span_sql(source, ingested_at)
    return insert_spans_sql(source, ingested_at, order_by, distinct_ids=distinct)


_REWARD_PASS = [n for n in REWARD_SCHEMA.names if n != "created_unix_nano"]
#: The final columns of ``rewards`` that :func:`rewards_select_sql` produces, in order.
REWARD_COLUMNS: tuple[str, ...] = (*_REWARD_PASS, "created_at")


def rewards_select_sql(source: str, default_created_at: str = "?::TIMESTAMP") -> str:
    """SELECT of the ``rewards`` columns (:data:`REWARD_COLUMNS`) from ``source`` (columns of
    :data:`~agent_rl_plugin.store.rows.REWARD_SCHEMA`); ``created_at`` from the row's
    nanoseconds, else ``default_created_at`` (an SQL expression, default: a parameter)."""
    return (
        f"SELECT {', '.join(_REWARD_PASS)}, "
        f"coalesce(make_timestamp(created_unix_nano // 1000), {default_created_at}) AS created_at FROM {source}"
    )


def new_rewards_sql(source: str) -> str:
    """The rows of ``source`` (columns of :data:`~agent_rl_plugin.store.rows.REWARD_SCHEMA`) whose
    ``reward_id`` is not stored yet, each once (an emitted reward's id is derived from its span
    and event, so a replayed span does not add its reward again).

    A stored copy of an emitted reward has the ``created_at`` its event time gives
    (``created_unix_nano``), so when every row of ``source`` has a time the lookup is bounded to
    stored rewards created within the batch's own time range, which DuckDB prunes with its zone
    maps: the cost stays flat as the store grows (as :func:`new_spans_sql` bounds spans by start
    time). A batch holding a row without a time (stored with its insert time instead) looks at
    every stored reward, as a plain ``NOT EXISTS`` on ``reward_id`` would."""
    return f"""(WITH r AS (SELECT * FROM {source}),
    bounds AS (SELECT bool_or(created_unix_nano IS NULL) AS untimed,
        CASE WHEN untimed THEN '-infinity'::TIMESTAMP ELSE make_timestamp(min(created_unix_nano) // 1000) END AS lo,
        CASE WHEN untimed THEN 'infinity'::TIMESTAMP ELSE make_timestamp(max(created_unix_nano) // 1000) END AS hi
        FROM r)
SELECT * FROM r WHERE NOT EXISTS (
    SELECT 1 FROM rewards AS x
    WHERE x.created_at BETWEEN (SELECT lo FROM bounds) AND (SELECT hi FROM bounds)
      AND x.reward_id = r.reward_id)
QUALIFY row_number() OVER (PARTITION BY r.reward_id) = 1)"""


def insert_rewards_sql(source: str, default_created_at: str = "?::TIMESTAMP") -> str:
    """``INSERT INTO rewards`` of :func:`rewards_select_sql` over the new rows of ``source``
    (:func:`new_rewards_sql`)."""
    return (
        f"INSERT INTO rewards ({', '.join(REWARD_COLUMNS)}) "
        f"{rewards_select_sql(new_rewards_sql(source), default_created_at)}"
    )


INSERT_SPANS_SQL = insert_spans_sql(SPANS_VIEW)
INSERT_REWARDS_SQL = insert_rewards_sql(REWARDS_VIEW)

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
    """True when ``exc`` is about the rows written, not the database or the disk (nor DuckDB
    refusing work because the interpreter is shutting down: every row would fail alike)."""
    if "interpreter is shutting down" in str(exc):
        return False
    return isinstance(exc, _DATA_ERRORS) and not isinstance(exc, (duckdb.IOException, duckdb.FatalException))


def needs_smaller_batches(exc: BaseException) -> bool:
    """True when DuckDB found no memory for a batch (its ``memory_limit``): each half needs less,
    so the rows are written in halves rather than dropped. DuckDB says so with an
    ``OutOfMemoryException`` while it runs the insert, and with a ``TransactionException`` when
    the memory runs out at the commit (a plain insert streams its rows, so its commit is where a
    big batch needs the memory): "Failed to commit: could not allocate block ..." (DuckDB 2.0.1),
    "... failed to pin block ..." (2.0.0), each followed by DuckDB's advice to raise
    ``memory_limit``."""
    if isinstance(exc, duckdb.OutOfMemoryException):
        return True
    if not isinstance(exc, duckdb.TransactionException):
        return False
    text = str(exc).lower()
    return any(sign in text for sign in _NO_MEMORY_AT_COMMIT)


#: What DuckDB's commit errors say when the memory ran out (lower case).
_NO_MEMORY_AT_COMMIT = ("could not allocate", "failed to pin", "out of memory", "memory_limit")


@dataclass
class RowOutcome:
    """Result of the row-by-row fallback."""

    written: int = 0
    dropped: int = 0
    duplicates: int = 0
    rewards_written: int = 0
    first_error: BaseException | None = None


def utc_now() -> datetime:
    """Now, in UTC, as a naive datetime (what the store's TIMESTAMP columns hold)."""
    return datetime.now(UTC).replace(tzinfo=None)


def insert_batch(connection: duckdb.DuckDBPyConnection, spans: pa.Table, rewards: pa.Table | None = None) -> int:
    """Insert ``spans`` and ``rewards`` in one transaction (rolled back on error, which
    propagates); spans already stored are skipped. Returns the number of spans inserted."""
    now = utc_now()
    inserted = 0
    has_rewards = rewards is not None and rewards.num_rows > 0
    connection.register(
        SPANS_VIEW, spans.append_column(ORDINAL, arrow_columns.column(range(spans.num_rows), pa.int64()))
    )
    if has_rewards:
        connection.register(REWARDS_VIEW, rewards)
    try:
        sql = choose_insert_sql(connection, SPANS_VIEW, []) if spans.num_rows else ""
        connection.execute("BEGIN TRANSACTION")
        try:
            if spans.num_rows:
                row = connection.execute(sql, [now]).fetchone()
                assert row is not None  # an INSERT returns one row: its count
                inserted = int(row[0])
            if has_rewards:
                connection.execute(INSERT_REWARDS_SQL, [now])
            connection.execute("COMMIT")
        except BaseException:
            try:
                connection.execute("ROLLBACK")
            except duckdb.Error:
                pass
            raise
    finally:
        for name in (SPANS_VIEW, REWARDS_VIEW) if has_rewards else (SPANS_VIEW,):
            try:
                connection.unregister(name)
            except duckdb.Error:
                pass
    return inserted


def _rewards_of(rewards: pa.Table | None, spans: pa.Table) -> pa.Table | None:
    if rewards is None or not rewards.num_rows:
        return None
    import pyarrow.compute as pc  # here: a recording process writing spool segments never needs it (~9 MB)

    mask = pc.and_(
        pc.is_in(rewards["span_id"], value_set=spans["span_id"].combine_chunks()),
        pc.is_in(rewards["trace_id"], value_set=spans["trace_id"].combine_chunks()),
    )
    return rewards.filter(mask)


class _DatabaseFailed(Exception):
    pass


def insert_bisecting(
    connection: duckdb.DuckDBPyConnection,
    spans: pa.Table,
    rewards: pa.Table | None = None,
    *,
    max_inserts: int = 256,
) -> RowOutcome:
    """Fallback after a failed batch: insert each half in its own transaction, splitting a
    failing half again down to single rows, which are dropped. ``k`` bad rows among ``n`` cost
    about ``2 k log2(n)`` inserts instead of ``n``. A part DuckDB has no memory for
    (:func:`needs_smaller_batches`) is split the same way, losing nothing unless a single row
    does not fit. Stops (dropping the rest) at the first error that is not a data error (the
    database itself is failing), or after ``max_inserts`` attempts (most rows are bad: each
    INSERT costs milliseconds, the writer must not stall).
    """
    outcome = RowOutcome()
    budget = [max_inserts]
    last: list[BaseException | None] = [None]  # a budget spent on memory errors still says why

    def attempt(part: pa.Table) -> None:
        n = part.num_rows
        if n == 0:
            return
        if budget[0] <= 0:
            outcome.dropped += n
            if outcome.first_error is None:
                outcome.first_error = last[0]
            return
        budget[0] -= 1
        part_rewards = _rewards_of(rewards, part)
        try:
            inserted = insert_batch(connection, part, part_rewards)
        except Exception as exc:
            last[0] = exc
            smaller = needs_smaller_batches(exc)
            if not is_data_error(exc) and not (smaller and n > 1):
                if outcome.first_error is None:
                    outcome.first_error = exc
                raise _DatabaseFailed() from exc
            if outcome.first_error is None and not smaller:
                outcome.first_error = exc
            if n == 1:
                outcome.dropped += 1
                return
            half = n // 2
            attempt(part.slice(0, half))
            attempt(part.slice(half))
            return
        outcome.written += inserted
        outcome.duplicates += n - inserted
        outcome.rewards_written += 0 if part_rewards is None else part_rewards.num_rows

    half = spans.num_rows // 2
    try:
        if spans.num_rows == 1:
            attempt(spans)
        else:
            attempt(spans.slice(0, half))
            attempt(spans.slice(half))
    except _DatabaseFailed:
        outcome.dropped = spans.num_rows - outcome.written
    return outcome
