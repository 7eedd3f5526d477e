"""One helper for every "append these Arrow rows atomically" write outside the span path.

:func:`arrow_transaction` registers Arrow tables under names the SQL can read, runs the block in
one DuckDB transaction (commit when it ends normally, rollback on any exception, which then
propagates) and unregisters the tables whatever happens. Tasks, reward rows and advantages are
written through it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Mapping

import duckdb
import pyarrow as pa


@contextmanager
def arrow_transaction(
    connection: duckdb.DuckDBPyConnection, tables: Mapping[str, pa.Table]
) -> Iterator[duckdb.DuckDBPyConnection]:
    """``with arrow_transaction(con, {"_new_rows": table}) as con: con.execute("INSERT ... FROM _new_rows")``."""
    for name, table in tables.items():
        connection.register(name, table)
    try:
        connection.execute("BEGIN TRANSACTION")
        try:
            yield connection
            connection.execute("COMMIT")
        except BaseException:
            try:
                connection.execute("ROLLBACK")
            except duckdb.Error:  # a failed COMMIT already ended it: keep the first error
                pass
            raise
    finally:
        for name in tables:
            connection.unregister(name)
