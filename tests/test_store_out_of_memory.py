"""A batch DuckDB has no memory for is written in halves, not dropped
(:func:`agent_rl_plugin.store.batch.insert_bisecting`; the writer first grows its memory limit,
see ``tests/test_store_writer_settings.py``). Every row finds room in some half, with DuckDB
2.0.0 (which keeps more of the indexes in memory) as with 2.0.1: a batch of spans that repeat
none and are stored nowhere is inserted as it is, and needs less memory than the anti-join."""

from __future__ import annotations

import duckdb
import pytest

from agent_rl_plugin.store.batch import insert_batch, insert_bisecting
from agent_rl_plugin.store.opening import open_write_connection
from tests.test_store_spool import count, recorded

def test_a_batch_duckdb_has_no_memory_for_is_written_in_halves(tmp_path):
    db = tmp_path / "runs.duckdb"
    connection, _ = open_write_connection(str(db))
    try:
        connection.execute("SET memory_limit = '12MB'")
        connection.execute("SET threads = 1")
        batch = recorded(6_000, rollout="big").spans
        with pytest.raises(duckdb.OutOfMemoryException):
            insert_batch(connection, batch)
        outcome = insert_bisecting(connection, batch)
        assert (outcome.written, outcome.dropped, outcome.first_error) == (6_000, 0, None)
    finally:
        connection.close()
    assert count(db) == outcome.written
