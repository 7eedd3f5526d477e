"""Fuzzing ``agent-rl query`` input (hypothesis): whatever the text, the command answers with rows
or one clear error, never crashes, and never changes the database or writes a file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_rl_plugin.cli.common import UserError
from agent_rl_plugin.cli.query import run_query

FRAGMENTS = [
    "select", "SELECT", "*", "from", "rollouts", "spans", "rewards", "where", "1=1", ";", "--", "/*", "*/",
    "insert into rewards values (1)", "delete from spans", "drop table spans", "drop view rollouts",
    "update spans set name = 'x'", "create table t as select 1", "attach 'x.duckdb' as x", "detach x",
    "copy spans to 'out.csv'", "export database 'dump'", "pragma table_info('spans')", "pragma enable_profiling",
    "set threads = 1", "install httpfs", "load httpfs", "call pragma_version()", "checkpoint", "vacuum",
    "begin", "commit", "with x as (select 1) select * from x", "explain", "explain analyze", "describe spans",
    "show tables", "summarize spans", "values (1)", "from spans", "(", ")", "'", "\"", ",", "limit 1",
    "select nextval('s')", "create sequence s", "select * from read_csv('x')", "union all", "returning *",
    "\x00", "é", "\n", "   ",
]

QUERIES = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), min_size=0, max_size=8).map(" ".join),
    st.text(max_size=80),
)


def _fingerprint(path: Path) -> tuple:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "select table_name, table_type from information_schema.tables order by table_name"
        ).fetchall()
        counts = tuple(
            con.execute(f'select count(*) from "{name}"').fetchone()[0] for name, kind in tables if kind == "BASE TABLE"
        )
        sequences = con.execute("select count(*) from duckdb_sequences()").fetchone()[0]
    finally:
        con.close()
    return tuple(tables), counts, sequences


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from agent_rl_plugin.data.synthetic import synthesize_store

    path = tmp_path_factory.mktemp("fuzz") / "store.duckdb"
    synthesize_store(path, rollouts=20)
    return path


def test_query_input_never_crashes_or_writes(store, monkeypatch):
    directory = store.parent
    monkeypatch.chdir(directory)  # relative paths in COPY/EXPORT/ATTACH would land here
    before_files = sorted(p.name for p in directory.iterdir())
    before = _fingerprint(store)
    digest = hashlib.sha256(store.read_bytes()).hexdigest()

    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(sql=QUERIES)
    def example(sql: str) -> None:
        try:
            columns, rows = run_query(str(store), sql)
        except UserError as exc:
            assert str(exc).strip(), "an error must say what went wrong"
            return
        assert isinstance(columns, list) and isinstance(rows, list)

    example()
    assert sorted(p.name for p in directory.iterdir()) == before_files
    assert _fingerprint(store) == before
    assert hashlib.sha256(store.read_bytes()).hexdigest() == digest
