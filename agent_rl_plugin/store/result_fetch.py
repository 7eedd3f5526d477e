"""Fetching a user query's result under a row cap and a byte cap (:mod:`agent_rl_plugin.store.user_sql`).

Contract:

* :func:`fetch_arrow` reads the result as Arrow record batches (at most 10,000 rows each) and cuts
  it at ``max_rows`` rows or where its Arrow bytes would pass ``max_bytes`` (``reason``
  ``"rows"``/``"bytes"``); a cut is never an error.
* :func:`fetch_rows` gives the same result as Python rows (the ``to_pylist`` values of
  :func:`fetch_arrow`'s table) without importing pyarrow when it can: when every column has a
  type of :data:`PLAIN_TYPES` (whose values a DuckDB fetch gives exactly as Arrow does), DuckDB
  streams the rows under the same row cap, and as long as an upper bound of their Arrow bytes
  (:func:`bytes_bound`) stays within ``max_bytes`` no byte cap can cut them. Another type, or a
  bound over ``max_bytes``, runs the query through :func:`fetch_arrow`, so the columns, the rows
  and where a cap cuts are always :func:`fetch_arrow`'s. With ``plan_once`` (SQL known to give
  plain columns) the statement is planned once: its types come from its own result.
* Both take ``params``: values bound to the statement's ``?``/``$name`` parameters by DuckDB
  (never spliced into its text), as ``DuckDBPyConnection.execute`` takes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:  # pyarrow is imported where a result is fetched as Arrow, not by agent-rl query
    import pyarrow as pa

#: DuckDB column types whose Python values a DuckDB fetch gives exactly as Arrow's ``to_pylist``
#: does (checked type by type in tests/test_user_sql_rows.py), plus ``DECIMAL(p,s)``. Not here:
#: HUGEINT, UUID, INTERVAL, MAP, BIT, TIMESTAMP_NS/WITH TIME ZONE, ENUM, nested types.
PLAIN_TYPES = frozenset(
    {
        "BOOLEAN",
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "FLOAT",
        "DOUBLE",
        "VARCHAR",
        "JSON",
        "BLOB",
        "DATE",
        "TIME",
        "TIMESTAMP",
        '"NULL"',
    }
)
#: Bytes per value that bound Arrow's own for a plain type (validity bit, offset or fixed width
#: of at most 16 bytes, per-batch rounding), to which a text or blob value adds its length.
_VALUE_BYTES = 24


def fetch_arrow(
    connection: duckdb.DuckDBPyConnection, sql: str, max_rows: int, max_bytes: int, params: Any = None
) -> tuple[pa.Table, str | None]:
    """(table, reason): the result of ``sql`` (its parameters bound from ``params``) read as
    Arrow batches under the caps; ``reason`` is ``"rows"`` or ``"bytes"`` when a cap cut it."""
    import pyarrow as pa

    relation = connection.sql(sql, params=params)
    if relation is None:  # a statement without a result
        return pa.table({}), None
    return _fetch_arrow(relation, max_rows, max_bytes)


def _fetch_arrow(relation: duckdb.DuckDBPyRelation, max_rows: int, max_bytes: int) -> tuple[pa.Table, str | None]:
    import pyarrow as pa

    reader = relation.to_arrow_reader(min(max(max_rows, 1), 10_000))
    batches: list[pa.RecordBatch] = []
    rows = size = 0
    reason: str | None = None
    for batch in reader:
        if rows + batch.num_rows > max_rows:
            batch, reason = batch.slice(0, max_rows - rows), "rows"
        if size + batch.nbytes > max_bytes:
            keep = batch.num_rows
            while keep and size + batch.slice(0, keep).nbytes > max_bytes:
                keep //= 2
            batch, reason = batch.slice(0, keep), "bytes"
        batches.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if reason is not None:
            break
    table = pa.Table.from_batches(batches, schema=reader.schema)
    return table, reason


def table_rows(table: pa.Table) -> list[tuple]:
    """The rows of ``table`` as tuples of Python values (``to_pylist``)."""
    if not table.num_columns:
        return []
    return list(zip(*(column.to_pylist() for column in table.columns)))


def plain_type(type_name: str) -> bool:
    """Whether DuckDB and Arrow give the same Python values for a column of this type."""
    return type_name in PLAIN_TYPES or (type_name.startswith("DECIMAL(") and type_name.endswith(")"))


def bytes_bound(chunk: list[tuple], sized: list[int]) -> int:
    """An upper bound of the Arrow bytes of ``chunk`` (rows of plain types; ``sized``: the
    positions of its text and blob columns)."""
    total = len(chunk) * len(chunk[0]) * _VALUE_BYTES if chunk else 0
    for i in sized:
        for row in chunk:
            value = row[i]
            if value is None:
                continue
            total += len(value) if type(value) is bytes or value.isascii() else len(value.encode("utf-8"))
    return total


def fetch_rows(
    connection: duckdb.DuckDBPyConnection,
    sql: str,
    max_rows: int,
    max_bytes: int,
    params: Any = None,
    *,
    plan_once: bool = False,
) -> tuple[list[str], list[tuple], str | None]:
    """(columns, rows, reason): what :func:`fetch_arrow` gives, as Python rows (module contract).

    The column types come from a relation of ``sql`` (bound, not run), then the statement runs
    again to stream its rows. ``plan_once``: run it at once and read the types from its result,
    planning it once, not twice; a result with a type outside :data:`PLAIN_TYPES` then runs again
    through Arrow (an aggregate would be computed twice), so it is for SQL whose columns are
    plain (a command's own, such as ``traces list``'s long statement)."""
    relation: duckdb.DuckDBPyRelation | None = None
    if plan_once:
        connection.execute(sql, params)  # streams: each fetchmany runs the query on for the next rows
        description = connection.description
        names = None if description is None else [str(d[1]) for d in description]  # as ``relation.types``
    else:
        relation = connection.sql(sql, params=params)
        names = None if relation is None else [str(t) for t in relation.types]
    if names is None or not all(plain_type(name) for name in names):
        if plan_once:
            connection.abort()  # the result started: the Arrow path runs it again
        if names is None:  # a statement without a result
            return [], [], None
        table, reason = _fetch_arrow(relation or connection.sql(sql, params=params), max_rows, max_bytes)
        return list(table.column_names), table_rows(table), reason
    sized = [i for i, name in enumerate(names) if name in ("VARCHAR", "JSON", "BLOB")]
    if not plan_once:
        connection.execute(sql, params)  # streams: each fetchmany runs the query on for the next rows
    try:
        columns = [str(d[0]) for d in connection.description or []]
        rows: list[tuple] = []
        size = 0
        reason = None
        while chunk := connection.fetchmany(min(max(max_rows, 1), 10_000)):
            size += bytes_bound(chunk, sized)
            if size > max_bytes:
                reason = "bytes"
                break
            rows.extend(chunk)
            if len(rows) > max_rows:
                del rows[max_rows:]
                reason = "rows"
                break
    finally:
        connection.abort()  # the rest of a cut result (nothing when it was read to its end)
    if reason == "bytes":  # the byte cap may cut it: where it does is Arrow's to say
        table, reason = _fetch_arrow(connection.sql(sql, params=params), max_rows, max_bytes)
        return list(table.column_names), table_rows(table), reason
    return columns, rows, reason
