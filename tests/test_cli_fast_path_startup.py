"""What the fast path of ``agent-rl query`` / ``traces list`` leaves out at start-up, and what it
still does.

* A fresh ``query`` or ``traces list`` does not import the merge, lease, opening, reading or
  snapshot code of the store, nor ``logging`` or ``signal`` (none is needed when the spool holds
  no segment).
* It still does the housekeeping ``try_merge`` does before reading (leftovers of dead writers
  and stale holder notes removed), on the user-SQL path and on the own-SQL path alike.
* ``_needs_upgrade`` (one statement now) still says which stores need upgrading.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin.data.synthetic import synthesize_store
from agent_rl_plugin.store import user_sql
from agent_rl_plugin.store.migrations import MIGRATIONS, migrate
from agent_rl_plugin.store.spool import LEFTOVER_AGE_S, TEMP_PREFIX, spool_dir

LEFT_OUT = (
    "agent_rl_plugin.store.compaction",
    "agent_rl_plugin.store.lease",
    "agent_rl_plugin.store.opening",
    "agent_rl_plugin.store.reading",
    "agent_rl_plugin.store.snapshots",
    "logging",
    "signal",
)
REPORT = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
from agent_rl_plugin.cli.main import main
sys.argv = ["agent-rl", *sys.argv[1:]]
main()
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "s.duckdb"
    synthesize_store(path, rollouts=12, llm_calls=1, group_size=2)
    return path


@pytest.mark.parametrize("args", [["query", "select count(*) from spans"], ["traces", "list"]])
def test_a_short_command_leaves_the_merge_code_out(store: Path, args: list[str]) -> None:
    environment = dict(os.environ, COLUMNS="120")
    proc = subprocess.run(
        [sys.executable, "-c", REPORT, *args, "--db", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = set(json.loads([x for x in proc.stderr.splitlines() if x.startswith("MODULES ")][-1][8:]))
    assert "agent_rl_plugin.cli.fast_path" in modules and "typer" not in modules
    assert sorted(set(LEFT_OUT) & modules) == []


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


@pytest.mark.parametrize("own", [False, True])
def test_the_short_path_still_removes_leftovers_and_stale_notes(tmp_path: Path, own: bool) -> None:
    db = tmp_path / "s.duckdb"
    synthesize_store(db, rollouts=2, llm_calls=1, group_size=2)
    folder = Path(spool_dir(db))
    (folder / "holders").mkdir(parents=True, exist_ok=True)
    dead = _dead_pid()
    leftover = folder / f"{TEMP_PREFIX}0001-{dead}-00000001.spans.parquet"
    leftover.write_bytes(b"half written by a writer that died")
    old = time.time() - LEFTOVER_AGE_S - 60
    os.utime(leftover, (old, old))
    note = folder / "holders" / f"{dead}.json"
    note.write_text(json.dumps({"pid": dead, "what": "writing", "since": old}))
    run = user_sql.run_own_query_rows if own else user_sql.run_user_query_rows
    assert run(db, "select count(*) from rollouts").rows == [(2,)]
    assert not leftover.exists() and not note.exists()


def test_needs_upgrade_reads_the_tracking_table(tmp_path: Path) -> None:
    def needs(path: Path) -> bool:
        with duckdb.connect(str(path), read_only=True) as connection:
            return user_sql._needs_upgrade(connection)  # noqa: SLF001 - the check itself

    current, old, foreign = tmp_path / "c.duckdb", tmp_path / "o.duckdb", tmp_path / "f.duckdb"
    for path, migrations in ((current, MIGRATIONS), (old, MIGRATIONS[:-1])):
        with duckdb.connect(str(path)) as connection:
            migrate(connection, migrations)
    duckdb.connect(str(foreign)).close()  # no tracking table: not a store of this package
    assert (needs(current), needs(old), needs(foreign)) == (False, True, False)
