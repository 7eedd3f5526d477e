"""``run_user_query_rows`` (what ``agent-rl query`` prints) gives exactly what ``run_user_query``
gives as ``columns``/``rows``/``reason``, without pyarrow where DuckDB's own fetch gives the same
values (issue 19, start-up of ``agent-rl query``).

Real DuckDB files and real queries: plain types (fetched by DuckDB), other types (through
Arrow), row and byte caps (where a cap cuts is Arrow's), statements without rows, scripts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin.data.synthetic import synthesize_store
from agent_rl_plugin.store import result_fetch
from agent_rl_plugin.store.result_fetch import PLAIN_TYPES, fetch_rows, plain_type
from agent_rl_plugin.store.user_sql import open_locked, run_user_query, run_user_query_rows


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rows") / "store.duckdb"
    synthesize_store(path, rollouts=30, llm_calls=2, group_size=3)
    return path


#: One value of each plain type, and of types whose Python values differ between the two fetches.
PLAIN_VALUES = {
    "BOOLEAN": "true",
    "TINYINT": "-3::TINYINT",
    "SMALLINT": "300::SMALLINT",
    "INTEGER": "7::INTEGER",
    "BIGINT": "9007199254740993::BIGINT",
    "UTINYINT": "250::UTINYINT",
    "USMALLINT": "65000::USMALLINT",
    "UINTEGER": "4000000000::UINTEGER",
    "UBIGINT": "18446744073709551615::UBIGINT",
    "FLOAT": "1.1::FLOAT",
    "DOUBLE": "'nan'::DOUBLE",
    "VARCHAR": "'héllo ✓'",
    "JSON": """'{"a": [1, 2]}'::JSON""",
    "BLOB": "'\\xAA\\x00'::BLOB",
    "DATE": "'2024-02-29'::DATE",
    "TIME": "'23:59:59.999999'::TIME",
    "TIMESTAMP": "'2024-01-02 03:04:05.123456'::TIMESTAMP",
    '"NULL"': "NULL",
}
OTHER_VALUES = [
    "170141183460469231731687303715884105727::HUGEINT",
    "'00000000-0000-0000-0000-000000000001'::UUID",
    "interval 3 day",
    "map([1], ['a'])",
    "'101'::BIT",
    "'2024-01-02 03:04:05.123456789'::TIMESTAMP_NS",
]
#: Left out too, though their values agree here: nested values are fetched through Arrow.
NESTED_VALUES = ["[1, 2]", "{'a': 1}"]


def test_plain_types_give_the_same_values_both_ways() -> None:
    """The premise of the DuckDB fetch: for every type of PLAIN_TYPES, DuckDB's Python value is
    Arrow's ``to_pylist`` value (value and type); for the types left out it is not."""
    assert set(PLAIN_VALUES) == PLAIN_TYPES
    connection = duckdb.connect()
    for name, expression in PLAIN_VALUES.items():
        relation = connection.sql(f"select {expression} as x, 1.25::DECIMAL(10, 3) as d")
        assert [str(t) for t in relation.types] == [name, "DECIMAL(10,3)"]
        native = relation.fetchall()[0]
        arrow = tuple(c[0] for c in relation.to_arrow_table().to_pydict().values())
        assert repr(native) == repr(arrow) and [type(v) for v in native] == [type(v) for v in arrow], name
    for expression in OTHER_VALUES:
        relation = connection.sql(f"select {expression} as x")
        assert not plain_type(str(relation.types[0])), expression
        native, arrow = relation.fetchall()[0][0], relation.to_arrow_table()["x"].to_pylist()[0]
        assert repr(native) != repr(arrow) or type(native) is not type(arrow), expression
    for expression in NESTED_VALUES:
        assert not plain_type(str(connection.sql(f"select {expression} as x").types[0])), expression


QUERIES = [
    "select count(*) from spans",
    "select * from spans order by trace_id, span_id",
    "select * from rollouts order by start_time desc limit 20",
    "select rollout_id, task_id, status, total_reward from rollouts order by rollout_id",
    "select * from rewards order by reward_id",
    "select 1 as a, 2 as a",
    "select * from spans where false",
    "show tables",
    "describe spans",
    "summarize select duration_ms from spans",
    "select 1 as a; select 2 as b",
    "select " + ", ".join(f"{e} as c{i}" for i, e in enumerate(PLAIN_VALUES.values())),
    "select " + ", ".join(f"{e} as c{i}" for i, e in enumerate(OTHER_VALUES + NESTED_VALUES)),
    "select uuid, i from (select ('00000000-0000-0000-0000-00000000000' || (i % 10))::UUID as uuid, i "
    "from range(25000) r(i)) order by i",
]


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize(
    "max_rows, max_bytes", [(100_000, 64 << 20), (7, 64 << 20), (1, 64 << 20), (100_000, 2_000), (100_000, 1)]
)
def test_rows_are_what_the_arrow_result_gives(store: Path, sql: str, max_rows: int, max_bytes: int) -> None:
    arrow = run_user_query(store, sql, max_rows=max_rows, max_bytes=max_bytes)
    rows = run_user_query_rows(store, sql, max_rows=max_rows, max_bytes=max_bytes)
    assert described(rows.columns, rows.rows) == described(arrow.columns, arrow.rows)  # NaN != NaN: compare reprs
    assert (rows.truncated, rows.reason) == (arrow.truncated, arrow.reason)


def described(columns: list[str], rows: list[tuple]) -> tuple[list[str], str, list[list[type]]]:
    return columns, repr(rows), [[type(v) for v in row] for row in rows]


def test_a_big_result_over_the_byte_cap_is_cut_where_arrow_cuts_it(store: Path) -> None:
    sql = "select i, repeat('x', 100 + i % 50) as s from range(50000) r(i) order by i"
    arrow = run_user_query(store, sql, max_bytes=1_000_000, max_rows=40_000)
    rows = run_user_query_rows(store, sql, max_bytes=1_000_000, max_rows=40_000)
    assert arrow.reason == "bytes" and 0 < len(arrow.rows) < 40_000
    assert (rows.columns, rows.rows, rows.reason) == (arrow.columns, arrow.rows, arrow.reason)
    within = run_user_query_rows(store, sql, max_bytes=100_000_000, max_rows=40_000)  # fetched by DuckDB
    assert within.reason == "rows" and within.rows == run_user_query(store, sql, max_rows=40_000).rows


def test_the_byte_bound_is_above_arrow_bytes(store: Path) -> None:
    """The DuckDB fetch trusts that no byte cap can cut while its bound stays under it."""
    connection = open_locked(store)
    try:
        for sql in ("select * from spans", "select * from rollouts", "select * from rewards"):
            relation = connection.sql(sql)
            sized = [i for i, t in enumerate(relation.types) if str(t) in ("VARCHAR", "JSON", "BLOB")]
            chunk = relation.fetchall()
            assert result_fetch.bytes_bound(chunk, sized) >= relation.to_arrow_table().nbytes > 0, sql
    finally:
        connection.close()


def test_plain_results_are_fetched_without_arrow(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = result_fetch._fetch_arrow

    def spy(*args: object, **kwargs: object) -> object:
        calls.append("arrow")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(result_fetch, "_fetch_arrow", spy)
    connection = open_locked(store)
    try:
        assert fetch_rows(connection, "select count(*) from spans", 10, 1 << 20) == (["count_star()"], [(120,)], None)
        assert calls == []
        fetch_rows(connection, "select interval 1 day", 10, 1 << 20)
        assert calls == ["arrow"]
        assert fetch_rows(connection, "select 42", 10, 1 << 20)[1] == [(42,)]  # the connection is free again
    finally:
        connection.close()


def test_agent_rl_query_imports_no_arrow(store: Path) -> None:
    code = (
        "import sys; from agent_rl_plugin.store.user_sql import run_user_query_rows; "
        f"r = run_user_query_rows({str(store)!r}, 'select count(*) as n from spans'); "
        "print(r.rows, 'pyarrow' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["[(120,)]", "False", "False"]


def test_a_long_query_is_interrupted_on_the_duckdb_fetch_too(store: Path) -> None:
    from agent_rl_plugin.store.user_sql import QueryTimeout

    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="longer than 0.3 s"):
        run_user_query_rows(store, "select count(*) from range(10000000000) t(i) where i % 7 = 3", timeout_s=0.3)
    assert time.monotonic() - started < 3.0


# --- one DuckDB instance: the SQL is checked on the query's own connection --------------------


@pytest.fixture
def no_private_parser(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The private parsing instance refuses to start (and says it was asked)."""
    from agent_rl_plugin.store import connection as connection_module

    asked: list[str] = []

    def refuse() -> duckdb.DuckDBPyConnection:
        asked.append("private parser")
        raise AssertionError("the private parser was started")

    monkeypatch.setattr(connection_module, "_parsing_connection", refuse)
    return asked


def test_a_ready_store_checks_on_the_query_connection(store: Path, no_private_parser: list[str]) -> None:
    from agent_rl_plugin.store.user_sql import SqlRefused, UserSqlError

    assert run_user_query_rows(store, "select count(*) from spans").rows == [(120,)]
    assert run_user_query(store, "explain select * from spans").columns == ["explain_key", "explain_value"]
    with pytest.raises(SqlRefused, match="only read-only SQL"):
        run_user_query_rows(store, "with x as (delete from spans returning *) select * from x")
    with pytest.raises(SqlRefused, match="read_text"):
        run_user_query_rows(store, "select * from read_text('/etc/passwd')")
    with pytest.raises(UserSqlError, match="SQL error"):
        run_user_query_rows(store, "selec 1")
    assert no_private_parser == []
    with duckdb.connect(str(store)) as writer:  # every locked connection was closed, refused or not
        assert writer.execute("select count(*) from spans").fetchall() == [(120,)]


def test_a_store_that_cannot_open_at_once_is_checked_first(tmp_path: Path) -> None:
    """Refused SQL is refused at once when the file is missing or another process holds it
    (the usual way: the private parser first), as before."""
    from agent_rl_plugin.store.errors import StoreError
    from agent_rl_plugin.store.user_sql import SqlRefused

    with pytest.raises(SqlRefused):
        run_user_query_rows(tmp_path / "missing.duckdb", "delete from spans")
    with pytest.raises(StoreError):
        run_user_query_rows(tmp_path / "missing.duckdb", "select 1")
    db = tmp_path / "held.duckdb"
    synthesize_store(db, rollouts=2, llm_calls=1, group_size=2)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
         "time.sleep(60)", str(db)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(SqlRefused):
            run_user_query_rows(db, "drop table spans", wait_s=10)
        assert time.monotonic() - started < 3.0
    finally:
        holder.kill()
        holder.wait()
