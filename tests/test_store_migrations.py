"""Append-only migrations: blank database, re-running, upgrading an older schema, frozen SQL."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin.store import (
    MIGRATIONS,
    MIGRATIONS_TABLE,
    TABLE_NAMES,
    VIEW_NAMES,
    applied_migrations,
    ensure_schema,
    list_migrations,
    migrate,
    pending_migrations,
)
from agent_rl_plugin.store.migrations import Migration

#: sha256 (first 16 hex) of each released migration's SQL. A released migration must never
#: change: append a new one instead, then add its hash here.
FROZEN = {
    "0001_spans": "0849fa69a7518ee1",
    "0002_rewards": "a3aaea626125b5b2",
    "0003_views_v1": "52a1b9f697ae7637",
    "0004_tasks_labels": "fc40bb0aefc9c3fa",
    "0005_advantages": "f7d221ef5959ae6d",
    "0006_rollouts_v2": "0e4c6a59b4c48296",
    "0007_training_runs": "5dd76de863c64036",
    "0008_segment_ledger": "0f46fb89025fdb96",
    "0009_episode_rewards": "3bcd3ebf9637caf1",
    "0010_loop_rounds": "a3ed2aeb1ae4053a",
    "0011_reward_weights": "0c8b78ecc0c26861",
    "0012_lookup_indexes": "cd470fd9be3007be",
    "0013_label_details": "2084ec0a6cf650c9",
}


def objects(connection: duckdb.DuckDBPyConnection) -> tuple[set[str], set[str]]:
    tables = {r[0] for r in connection.execute("select table_name from duckdb_tables()").fetchall()}
    views = {r[0] for r in connection.execute("select view_name from duckdb_views() where not internal").fetchall()}
    return tables, views


def test_names_are_unique_and_ordered():
    names = list_migrations()
    assert len(names) == len(set(names))
    assert names == sorted(names)  # the numeric prefix keeps the order readable


def test_released_migrations_are_frozen():
    actual = {m.name: hashlib.sha256(m.apply.encode()).hexdigest()[:16] for m in MIGRATIONS if isinstance(m.apply, str)}
    changed = {name: actual.get(name) for name, digest in FROZEN.items() if actual.get(name) != digest}
    assert not changed, (
        f"released migrations were edited or removed: {changed}. Restore them and append a new "
        "migration instead (CREATE OR REPLACE VIEW for a view change)."
    )
    new = set(actual) - set(FROZEN)
    assert not new, f"record the hashes of the new migrations in FROZEN: { {n: actual[n] for n in new} }"


def test_blank_database_gets_everything_and_rerun_is_a_no_op(tmp_path: Path):
    connection = duckdb.connect(str(tmp_path / "blank.duckdb"))
    assert pending_migrations(connection) == list_migrations()
    assert migrate(connection) == list_migrations()
    tables, views = objects(connection)
    assert set(TABLE_NAMES) | {MIGRATIONS_TABLE} <= tables
    assert set(VIEW_NAMES) <= views
    recorded = connection.execute(f"select name, applied_at from {MIGRATIONS_TABLE}").fetchall()
    assert sorted(name for name, _ in recorded) == list_migrations()
    assert all(applied_at is not None for _, applied_at in recorded)
    assert migrate(connection) == []
    assert pending_migrations(connection) == []
    assert len(connection.execute(f"select * from {MIGRATIONS_TABLE}").fetchall()) == len(MIGRATIONS)
    connection.close()


@pytest.mark.parametrize("n", range(1, len(MIGRATIONS)))
def test_database_made_by_first_n_migrations_upgrades(tmp_path: Path, n: int):
    path = tmp_path / f"first{n}.duckdb"
    connection = duckdb.connect(str(path))
    assert migrate(connection, MIGRATIONS[:n]) == list_migrations()[:n]
    if n >= 1:
        connection.execute(
            "insert into spans (trace_id, span_id, name, status_code, is_rollout_root) values ('t', 's', 'old', 'UNSET', false)"
        )
    connection.close()
    assert ensure_schema(path) == list_migrations()[n:]
    connection = duckdb.connect(str(path), read_only=True)
    assert applied_migrations(connection) == list_migrations()
    assert connection.execute("select name from spans").fetchall() == [("old",)]  # data kept
    for view in VIEW_NAMES:
        connection.execute(f"select * from {view}").fetchall()
    connection.close()


def test_failing_migration_is_rolled_back_and_earlier_ones_stay():
    connection = duckdb.connect()
    broken = Migration(
        "9999_broken", "fails halfway", "CREATE TABLE half_done (a INTEGER); SELECT * FROM missing_table"
    )
    with pytest.raises(duckdb.Error):
        migrate(connection, [*MIGRATIONS[:1], broken])
    assert applied_migrations(connection) == [MIGRATIONS[0].name]
    tables, _ = objects(connection)
    assert "half_done" not in tables


def test_unknown_newer_migrations_are_left_alone():
    connection = duckdb.connect()
    migrate(connection)
    connection.execute(f"insert into {MIGRATIONS_TABLE} values ('9000_from_the_future', now()::TIMESTAMP)")
    assert migrate(connection) == []
    assert "9000_from_the_future" in applied_migrations(connection)


def test_function_migrations_run():
    connection = duckdb.connect()
    seen = []

    def create(conn: duckdb.DuckDBPyConnection) -> None:
        seen.append(True)
        conn.execute("CREATE TABLE made_by_function (x INTEGER)")

    assert migrate(connection, [Migration("0001_fn", "by a function", create)]) == ["0001_fn"]
    assert migrate(connection, [Migration("0001_fn", "by a function", create)]) == []
    assert seen == [True]
