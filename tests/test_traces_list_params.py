"""``agent-rl traces list`` binds its filters as parameters and runs its own SQL unchecked.

* Hostile ``--task``/``--group``/``--status`` values (quotes, ``'; DROP``, NUL, ``$task``, very
  long) are plain values: the rollouts whose value equals them exactly are listed, the store is
  unchanged, and the statement run locally never holds their text (they go in ``params``).
* Undecodable bytes (lone surrogates) are refused before any SQL, as before.
* A running receiver gets the same statement with the values as SQL literals (its ``/query``
  takes text only, and checks it as user SQL).
* The unchecked path keeps the locked connection: no file access, no writes.
* :func:`~agent_rl_plugin.store.result_fetch.fetch_rows` binds ``params`` on its plain path
  and on its Arrow fallback alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from agent_rl_plugin.cli import fast_path, query_core, traces_core
from agent_rl_plugin.cli.common import Output, UserError
from agent_rl_plugin.data.synthetic import synthesize_store
from agent_rl_plugin.store.result_fetch import fetch_rows
from agent_rl_plugin.store.user_sql import UserSqlError, run_own_query_rows

HOSTILE = [
    "x'; DROP TABLE spans; --",
    "'",
    "a''b",
    "a\x00b",
    "$task",
    "? OR 1=1",
    "line\n    FROM spans\n    GROUP BY rollout_id\n",  # an anchor of the view's SQL
    "ü" + "z" * 200_000,  # longer than user SQL may be
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store whose first rollouts have the hostile values as task, group (and error status)."""
    path = tmp_path_factory.mktemp("params") / "s.duckdb"
    synthesize_store(path, rollouts=len(HOSTILE) + 6, llm_calls=1, group_size=2, n_tasks=3)
    with duckdb.connect(str(path)) as connection:
        ids = [r[0] for r in connection.execute("select rollout_id from rollouts order by rollout_id").fetchall()]
        for rollout_id, value in zip(ids, HOSTILE):
            connection.execute(
                "update spans set task_id = $v, group_id = $v where rollout_id = $r", {"v": value, "r": rollout_id}
            )
    return path, ids


def _listed(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert fast_path.run(["traces", "list", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _span_count(path: Path) -> int:
    with duckdb.connect(str(path), read_only=True) as connection:
        return connection.execute("select count(*) from spans").fetchone()[0]


@pytest.mark.parametrize("index", range(len(HOSTILE)))
@pytest.mark.parametrize("flag", ["--task", "--group"])
def test_hostile_filter_values_are_plain_values(
    store: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], index: int, flag: str
) -> None:
    path, ids = store
    before = _span_count(path)
    rows = _listed(capsys, "--db", str(path), flag, HOSTILE[index], "-n", "50")
    assert [r["rollout_id"] for r in rows] == [ids[index]]
    assert rows[0]["task_id" if flag == "--task" else "group_id"] == HOSTILE[index]
    assert _span_count(path) == before


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_status_matches_nothing(
    store: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], value: str
) -> None:
    path, _ = store
    assert _listed(capsys, "--db", str(path), "--status", value) == []
    assert len(_listed(capsys, "--db", str(path), "--status", "ok", "-n", "100")) > 0


@pytest.mark.parametrize("flag", ["task", "group", "status"])
def test_undecodable_bytes_are_refused_before_any_sql(
    store: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    monkeypatch.setattr(traces_core, "run_own_query", lambda *a: pytest.fail("ran SQL"))
    given = {"task": None, "group": None, "status": None, flag: "caf\udce9"}
    with pytest.raises(UserError, match=f"--{flag} is not UTF-8 text"):
        traces_core.list_traces_command(str(store[0]), 20, given["task"], given["group"], given["status"], Output())


def test_the_statement_never_holds_the_values(store: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, dict[str, str], str]] = []

    def capture(
        path: str, sql: str, params: dict[str, str], remote_sql: str, overlay_sql: str | None = None
    ) -> tuple[list[str], list[tuple]]:
        seen.append((sql, params, remote_sql))
        assert overlay_sql is not None
        seen.append((overlay_sql, params, remote_sql))  # the statement for a spool overlay: bound the same way
        return list(dict(traces_core.LIST_TABLE_COLUMNS)), []

    monkeypatch.setattr(traces_core, "run_own_query", capture)
    value = "x'; DROP TABLE spans; --"
    for limit in (20, traces_core.NEWEST_MAX + 1):
        traces_core.list_traces_command(str(store[0]), limit, value, value + "g", value + "s", Output("json"))
        traces_core.list_traces_command(str(store[0]), limit, value, value + "g", None, Output("json"))
    for sql, params, remote_sql in seen:
        assert "DROP" not in sql and "$task" in sql and "$group" in sql
        assert params["task"] == value and params["group"] == value + "g"
        assert ("$status" in sql) == ("status" in params)
        assert "'x''; DROP TABLE spans; --'" in remote_sql and "$task" not in remote_sql


def test_a_running_receiver_gets_the_literal_statement(
    store: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[str] = []

    def receiver(path: str, sql: str) -> tuple[list[str], list[tuple], str | None]:
        asked.append(sql)
        return [name for name, _ in traces_core.LIST_TABLE_COLUMNS], [], None

    monkeypatch.setattr(query_core, "_through_receiver", receiver)
    monkeypatch.setattr("agent_rl_plugin.store.user_sql.run_own_query_rows", lambda *a, **k: pytest.fail("ran locally"))
    assert _listed(capsys, "--db", str(store[0]), "--task", "it's") == []
    assert len(asked) == 1 and "task_id = 'it''s'" in asked[0] and "$task" not in asked[0]


@pytest.mark.parametrize(
    "sql",
    [
        "select * from read_text('/etc/passwd')",
        "select * from '/etc/passwd'",
        "create table t as select 1",
        "set enable_external_access = true",
    ],
)
def test_own_sql_still_runs_on_the_locked_connection(store: tuple[Path, list[str]], sql: str) -> None:
    with pytest.raises(UserSqlError):
        run_own_query_rows(store[0], sql)


def test_own_sql_binds_params(store: tuple[Path, list[str]]) -> None:
    result = run_own_query_rows(store[0], "select $a as a, count(*) as n from spans where task_id = $a", {"a": "'"})
    assert result.columns == ["a", "n"] and result.rows == [("'", 2)]


@pytest.mark.parametrize("plan_once", [False, True])
@pytest.mark.parametrize("sql", ["select $a as a, $b as b", "select $a as a, $b::hugeint as b"])
def test_fetch_rows_binds_params_on_both_paths(sql: str, plan_once: bool) -> None:
    with duckdb.connect(":memory:") as connection:
        columns, rows, reason = fetch_rows(connection, sql, 10, 1 << 20, {"a": "x'y", "b": 7}, plan_once=plan_once)
    assert columns == ["a", "b"] and rows == [("x'y", 7)] and reason is None


@pytest.mark.parametrize("plan_once", [False, True])
def test_fetch_rows_runs_a_plain_result_once_and_user_sql_always_once(plan_once: bool) -> None:
    """User SQL (the default) runs once whatever its types; ``plan_once`` (the package's own SQL)
    runs a plain result once and a non-plain one (a HUGEINT sum) twice: it is for plain columns."""
    calls: list[int] = []

    def tick(x: int) -> int:
        calls.append(x)
        return x

    with duckdb.connect(":memory:") as connection:
        connection.create_function("tick", tick)
        counted = []
        for sql in ("select count(tick(range)) as n from range(10)", "select sum(tick(range)) as s from range(10)"):
            calls.clear()
            columns, rows, _ = fetch_rows(connection, sql, 10, 1 << 20, plan_once=plan_once)
            counted.append(len(calls))
    assert rows == [(45,)] and columns == ["s"]
    assert counted == ([10, 20] if plan_once else [10, 10])


def test_an_earliest_root_without_task_is_the_views(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rollout with two root spans takes its task and group from the earliest, NULLs included
    (as the ``rollouts`` view does): it no longer matches ``--task`` nor takes a place in the cut."""
    path = tmp_path / "roots.duckdb"
    synthesize_store(path, rollouts=8, llm_calls=1, group_size=2, n_tasks=2)
    with duckdb.connect(str(path)) as connection:
        newest, task = connection.execute(
            "select rollout_id, task_id from rollouts order by start_time desc"
        ).fetchone()
        connection.execute(
            "insert into spans select * replace ('f' || span_id as span_id, start_unix_nano - 1000 as start_unix_nano,"
            " start_time - interval 1 microsecond as start_time, NULL as task_id, NULL as group_id)"
            " from spans where rollout_id = $r and is_rollout_root",
            {"r": newest},
        )
        expected = connection.execute(
            "select rollout_id from rollouts where task_id = $t order by start_time desc limit 2", {"t": task}
        ).fetchall()
    assert newest not in [r[0] for r in expected] and len(expected) == 2
    for limit in (1, 2):
        listed = _listed(capsys, "--db", str(path), "--task", task, "-n", str(limit))
        assert [r["rollout_id"] for r in listed] == [r[0] for r in expected[:limit]]
