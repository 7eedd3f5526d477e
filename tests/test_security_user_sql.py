"""User SQL cannot write, read host files or run unbounded (issue 14, items 1 and 2).

Each attack here worked on the code before the locked connection: a data-modifying CTE passed the
statement-type check and ran on a writable connection, and table functions read host files.
"""

from __future__ import annotations

import os
import stat
import time

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_rl_plugin.store.connection import is_read_only_sql
from agent_rl_plugin.store.user_sql import (
    QueryTimeout,
    SqlRefused,
    UserSqlError,
    check_condition,
    check_user_sql,
    open_locked,
    run_locked,
    run_user_query,
)

DML_CTES = [
    "with x as (delete from spans returning *) select * from x",
    "with x as (update rewards set value = 999 returning *) select * from x",
    "with x as (insert into rewards (name, value) values ('forged', 1e9) returning *) select * from x",
    "select * from (with x as (delete from spans returning *) select * from x)",
    "select 1 where 1 in (with x as (delete from spans returning 1) select * from x)",
    "with x as (delete from spans returning *) select 1 from x union all select 2",
    "explain analyze with x as (delete from spans returning *) select * from x",
    "with x as materialized (delete from spans returning *) select count(*) from x",
]


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store.duckdb"
    connection = duckdb.connect(str(path))
    connection.execute("create table spans (trace_id varchar, name varchar)")
    connection.execute("insert into spans select 't' || i, 'span ' || i from range(50) r(i)")
    connection.execute("create table rewards (name varchar, value double)")
    connection.execute("insert into rewards values ('correct', 1.0), ('correct', 0.0)")
    connection.execute("create view rollouts as select trace_id as rollout_id, name from spans")
    connection.close()
    return path


@pytest.fixture
def canary(tmp_path):
    path = tmp_path / "canary.txt"
    path.write_text("CANARY-7f3a9c\n")
    return path


def counts(path) -> tuple[int, int]:
    connection = duckdb.connect(str(path), read_only=True)
    try:
        return (connection.execute("select count(*) from spans").fetchone()[0],
                connection.execute("select count(*), sum(value) from rewards").fetchone())
    finally:
        connection.close()


@pytest.mark.parametrize("sql", DML_CTES)
def test_data_modifying_ctes_are_not_read_only(sql):
    assert is_read_only_sql(sql) is False
    with pytest.raises(SqlRefused):
        check_user_sql(sql)


@pytest.mark.parametrize("sql", [
    "select 1", "with x as (select 1 as a) select * from x", "select 'delete from spans' as text",
    "with recursive r(n) as (select 1 union all select n + 1 from r where n < 3) select * from r",
    "select * from range(3)", "describe spans", "show tables", "summarize spans", "explain select * from spans",
    "pragma table_info('spans')", "pivot spans on name in ('span 1') using count(*)",
])
def test_reading_sql_still_passes(sql):
    assert is_read_only_sql(sql) is True
    check_user_sql(sql)


@pytest.mark.parametrize("sql", [
    "select * from read_text('{canary}')", "select * from read_csv('{canary}')", "select * from glob('{dir}/*')",
    "select * from read_blob('{canary}')", "select * from read_json('{canary}')", "select * from '{canary}'",
    "select * from read_parquet('https://example.invalid/x.parquet')", "select * from query('select 1')",
    "select (select content from read_text('{canary}'))", "describe select * from read_text('{canary}')",
    "explain analyze select * from read_text('{canary}')", "select * from sniff_csv('{canary}')",
    "select * from spans where name in (select content from read_text('{canary}'))",
])
def test_file_reading_table_functions_are_refused(sql, canary):
    text = sql.format(canary=canary, dir=canary.parent)
    with pytest.raises(SqlRefused, match="may only read the database"):
        check_user_sql(text)


@pytest.mark.parametrize("sql", DML_CTES[:3] + ["select 1; delete from spans", "attach 'x.duckdb' as x"])
def test_run_user_query_changes_nothing(store, sql):
    before = counts(store)
    with pytest.raises(SqlRefused):
        run_user_query(store, sql)
    assert counts(store) == before


def test_the_locked_connection_itself_refuses_files_writes_and_settings(store, canary):
    """The second wall: with the statement check bypassed, the connection still refuses."""
    connection = open_locked(store)
    try:
        for sql in (f"select * from read_text('{canary}')", f"select * from glob('{canary.parent}/*')",
                    "with x as (delete from spans returning *) select * from x",
                    "set enable_external_access = true", "set lock_configuration = false",
                    "install httpfs", "load httpfs", f"attach '{canary.parent}/other.duckdb' as o",
                    "select * from 'https://example.invalid/x.parquet'",
                    "select * from read_json('https://example.invalid/x.json')",
                    f"copy spans to '{canary.parent}/out.csv'"):
            with pytest.raises(duckdb.Error):
                connection.execute(sql).fetchall()
        settings_now = dict(connection.execute(
            "select name, value from duckdb_settings() where name in ('enable_external_access', "
            "'autoinstall_known_extensions', 'autoload_known_extensions', 'lock_configuration')").fetchall())
        assert settings_now == {"enable_external_access": "false", "autoinstall_known_extensions": "false",
                                "autoload_known_extensions": "false", "lock_configuration": "true"}
    finally:
        connection.close()
    assert not (canary.parent / "out.csv").exists() and not (canary.parent / "other.duckdb").exists()
    assert counts(store)[0] == 50


def test_timeout_interrupts_a_long_query(store):
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="longer than 0.3 s"):
        run_user_query(store, "select count(*) from range(10000000000) t(i) where i % 7 = 3", timeout_s=0.3)
    assert time.monotonic() - started < 3.0


def test_cancel_interrupts_a_running_query(store):
    connection = open_locked(store)
    deadline = time.monotonic() + 0.2
    try:
        with pytest.raises(UserSqlError, match="cancelled"):
            run_locked(connection, "select count(*) from range(10000000000) t(i) where i % 7 = 3",
                       timeout_s=30, cancel=lambda: time.monotonic() > deadline)
    finally:
        connection.close()


def test_row_and_byte_caps_truncate_and_say_so(store):
    result = run_user_query(store, "select * from range(1000) r(i)", max_rows=10)
    assert result.table.num_rows == 10 and result.truncated and result.reason == "rows"
    result = run_user_query(store, "select repeat('x', 1000) as s from range(1000)", max_bytes=20_000)
    assert result.truncated and result.reason == "bytes" and 0 < result.table.nbytes <= 20_000
    full = run_user_query(store, "select * from spans")
    assert full.table.num_rows == 50 and not full.truncated


def test_memory_limit_applies(store):
    with pytest.raises(UserSqlError):
        run_user_query(store, "select list(i) from range(200000000) r(i)", memory_limit="64MB", timeout_s=20)


def test_conditions_spliced_into_internal_queries_are_checked():
    template = "SELECT rollout_id FROM rollouts WHERE ({where})"
    assert "status = 'ok'" in check_condition("status = 'ok'", template)
    for where in ("1=1) or (select count(*) from read_text('/etc/passwd')) > 0 or (1=1",
                  "rollout_id in (with x as (delete from spans returning trace_id) select * from x)",
                  "1=1); delete from spans; select (1"):
        with pytest.raises(SqlRefused):
            check_condition(where, template)


def test_in_process_holder_gets_a_private_copy(store):
    holder = duckdb.connect(str(store))  # this process holds the file read-write
    try:
        result = run_user_query(store, "select count(*) from spans")
        assert result.rows == [(50,)]
    finally:
        holder.close()


# --- fuzz -----------------------------------------------------------------------------------
FILES = ["read_text('{canary}')", "read_csv('{canary}')", "read_csv_auto('{canary}')", "glob('{dir}/*')",
         "read_parquet('{canary}')", "read_json('{canary}')", "read_blob('{canary}')", "'{canary}'",
         "query('select * from read_text(''{canary}'')')"]
WRITES = ["delete from spans returning *", "update rewards set value = 999 returning *",
          "insert into rewards (name, value) values ('x', 1) returning *",
          "insert into spans select * from spans returning *"]
STATEMENTS = ["attach '{dir}/x.duckdb' as x", "copy spans to '{dir}/x.csv'", "pragma enable_profiling",
              "set enable_external_access = true", "drop table spans", "install httpfs", "load httpfs"]


def _grammar() -> st.SearchStrategy[str]:
    table = st.one_of(st.sampled_from(["spans", "rewards", "rollouts"]), st.sampled_from(FILES))
    leaf = st.builds(lambda t: f"select * from {t}", table)
    cte = st.builds(lambda w, alias: f"with {alias} as ({w}) select * from {alias}", st.sampled_from(WRITES),
                    st.sampled_from(["x", "y"]))

    def nest(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda q: f"select * from ({q})", inner),
            st.builds(lambda q: f"select 1 where exists ({q})", inner),
            st.builds(lambda a, b: f"{a} union all {b}", inner, inner),
            st.builds(lambda q: f"explain analyze {q}", inner),
            st.builds(lambda q: f"describe {q}", inner),
        )

    query = st.recursive(st.one_of(leaf, cte), nest, max_leaves=4)
    return st.one_of(query, st.sampled_from(STATEMENTS),
                     st.builds(lambda a, b: f"{a}; {b}", query, st.sampled_from(STATEMENTS)))


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(template=_grammar())
def test_fuzzed_queries_never_write_or_read_files(store, canary, template):
    sql = template.format(canary=canary, dir=canary.parent)
    before = counts(store)
    try:
        result = run_user_query(store, sql, timeout_s=5)
    except UserSqlError:
        result = None
    if result is not None:
        assert "CANARY-7f3a9c" not in repr(result.rows)
    assert counts(store) == before
    assert not {"x.duckdb", "x.csv"} & set(os.listdir(canary.parent))


def test_copies_and_folders_are_private(store):
    from agent_rl_plugin.store.user_sql import copy_database

    holder = duckdb.connect(str(store))
    try:
        dest = copy_database(holder.cursor(), str(store) + ".copy", close=True)
    finally:
        holder.close()
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600


# --- the command line ------------------------------------------------------------------------
@pytest.mark.parametrize("sql", [DML_CTES[0], DML_CTES[1], "select * from read_text('{canary}')",
                                 "select * from glob('{dir}/*')"])
def test_agent_rl_query_refuses_the_attacks(store, canary, capsys, sql):
    from test_cli import agent_rl

    before = counts(store)
    code, out, err = agent_rl(capsys, "query", "--db", str(store), sql.format(canary=canary, dir=canary.parent))
    assert code == 1 and "only reads" in err and "CANARY" not in out + err
    assert counts(store) == before


def test_agent_rl_query_caps_rows_and_says_so(store, capsys):
    from test_cli import agent_rl

    code, out, err = agent_rl(capsys, "query", "--db", str(store), "--format", "csv", "--max-rows", "3",
                              "select * from range(100) r(i)")
    assert code == 0 and out.splitlines() == ["i", "0", "1", "2"] and "truncated" in err


def test_agent_rl_query_through_a_receiver_with_its_made_up_token(plugin_manager, tmp_path, monkeypatch):
    from agent_rl_plugin.cli.query import run_query_result
    from agent_rl_plugin.receiver import Receiver

    monkeypatch.delenv("AGENT_RL_SERVE_TOKEN", raising=False)
    with Receiver(tmp_path / "r.duckdb", port=0) as receiver:
        assert receiver.token_generated
        assert run_query_result(receiver.db, "select count(*) from spans") == (["count_star()"], [(0,)], None)
        from agent_rl_plugin.cli.common import UserError

        with pytest.raises(UserError, match="only read"):
            run_query_result(receiver.db, DML_CTES[0])


ATTACK_WHERES = [
    "1=1) or (select count(*) from read_text('/etc/passwd')) > 0 or (1=1",
    "rollout_id in (with x as (delete from spans returning trace_id) select * from x)",
    "exists (select * from glob('/root/*'))",
]


@pytest.mark.parametrize("where", ATTACK_WHERES)
def test_where_options_of_every_command_refuse_the_attacks(where):
    from agent_rl_plugin.data.report import DatasetError
    from agent_rl_plugin.data.sql import select_rollouts
    from agent_rl_plugin.report.queries import ReportError, select
    from agent_rl_plugin.rewards.runner import ScoringError, check_where
    from agent_rl_plugin.store.parquet import ParquetExportError, select_sql

    connection = duckdb.connect()
    connection.execute("create table spans (trace_id varchar)")
    connection.execute("insert into spans values ('t1')")  # a match: only the refusal raises
    connection.execute("create view rollouts as select trace_id as rollout_id, trace_id as task_id, "
                       "trace_id as group_id, now() as start_time, 'ok' as status from spans")
    try:
        with pytest.raises(DatasetError):
            select_rollouts(connection, where=where)
        with pytest.raises(DatasetError):
            select_rollouts(connection, sql=f"select rollout_id from rollouts where {where}")
        with pytest.raises(ReportError):
            select(connection, where)
    finally:
        connection.close()
    with pytest.raises(ScoringError):
        check_where(where)
    with pytest.raises(ParquetExportError):
        select_sql(where)


def test_sql_too_big_to_plan_quickly_is_refused_before_it_runs(tmp_path):
    """DuckDB's time limit interrupts execution, not planning: 30,000 UNION ALLs planned for
    minutes. Such SQL is refused up front, on every user-SQL surface (they share the check)."""
    from agent_rl_plugin.store.sql_errors import MAX_SET_OPERATIONS, SqlRefused
    from agent_rl_plugin.store.user_sql import check_user_sql

    check_user_sql("select 1 " + "union all select 1 " * MAX_SET_OPERATIONS)  # at the limit: fine
    with pytest.raises(SqlRefused, match="UNION"):
        check_user_sql("select 1 " + "union all select 1 " * (MAX_SET_OPERATIONS + 1))
    with pytest.raises(SqlRefused, match="characters long"):
        check_user_sql("select 1 as x where 1 in (" + "1, " * 400_000 + "1)")
