"""Red team of issue 19's CLI fast path, pyarrow allocator option and writer settings.

* the fast path prints what the typer app prints where typer reads an environment variable the
  fast path did not (``TYPER_USE_RICH``) and where stdout is closed (``agent-rl --help >&-``);
* a reader's relation that outlives its cursor (``open_reader(db).sql(q)``, then ``.df()``)
  runs with DuckDB's defaults, not the writer's 64 MB limit and single thread;
* the allocator option never stays in the environment (two threads, an error in the block).
"""

from __future__ import annotations

import gc
import json
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin import arrow_memory
from agent_rl_plugin.store.writer import ExportStats, StoreWriter
from tests.test_store_spool import recorded

ROOT = Path(__file__).resolve().parents[1]
CLEAR = ("AGENT_RL_DB", "AGENT_RL_DB_PATH", "FORCE_COLOR", "NO_COLOR", "PY_COLORS", "TERMINAL_WIDTH", "GITHUB_ACTIONS")


def agent_rl(shell_args: str, fast: bool, **env: str) -> tuple[int, bytes, bytes]:
    """``agent-rl`` in a fresh process through a shell (so redirections such as ``>&-`` apply)."""
    environ = {k: v for k, v in os.environ.items() if k not in CLEAR}
    environ.update(COLUMNS="100", AGENT_RL_CLI_FAST="1" if fast else "0", AGENT_RL_DISABLE_PLUGIN_AUTOLOAD="1")
    environ.update(env)
    script = f'"{sys.executable}" -c "from agent_rl_plugin.cli.main import main; main()" {shell_args}'
    done = subprocess.run(["bash", "-c", script], env=environ, capture_output=True, timeout=120, cwd=ROOT)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("value", ["0", "false", "off", "N"])
def test_root_help_follows_typer_use_rich(value: str) -> None:
    """``TYPER_USE_RICH=0``: typer prints click's plain help; the fast path must not draw panels."""
    fast = agent_rl("--help", True, TYPER_USE_RICH=value)
    typer_app = agent_rl("--help", False, TYPER_USE_RICH=value)
    assert fast == typer_app
    assert b"Usage: agent-rl [OPTIONS] COMMAND [ARGS]..." in fast[1] and b"\xe2\x95\xad" not in fast[1]


def test_root_help_with_stdout_closed() -> None:
    """``agent-rl --help >&-``: typer exits 0 quietly; the fast path must not crash on the
    missing ``sys.stdout``."""
    fast = agent_rl("--help >&-", True)
    typer_app = agent_rl("--help >&-", False)
    assert typer_app[0] == 0 and b"Traceback" not in typer_app[2]
    assert fast == typer_app


def write(writer: StoreWriter, rollout: str) -> None:
    assert writer.submit(recorded(3, rollout=rollout))
    assert writer.flush(30.0)


SETTINGS = "select current_setting('memory_limit') as m, current_setting('threads') as t"


def test_a_relation_that_outlives_its_reader_cursor_is_not_capped(tmp_path: Path) -> None:
    """Held (DuckDB 2.0 relations keep their cursor object alive): ``writer.reader_cursor(...).sql(q)``
    keeps the relation and drops the cursor object (the
    usual ``open_reader(db).sql(q).df()``): the relation still runs on the instance, so the
    writer must not set its 64 MB limit and one thread under it."""
    db = tmp_path / "runs.duckdb"
    problems: list[BaseException] = []
    writer = StoreWriter(str(db), stats=ExportStats(), report=lambda kind, exc: problems.append(exc), linger_s=0.0)
    try:
        write(writer, "r1")
        cursor = writer.reader_cursor(30.0)
        assert cursor is not None
        defaults = cursor.execute(SETTINGS).fetchall()[0]
        relation = cursor.sql(SETTINGS)
        del cursor
        gc.collect()
        write(writer, "r2")  # the writer's next write: its cursor is garbage, the relation is not
        assert relation.fetchall() == [defaults]
        del relation
        gc.collect()
        write(writer, "r3")  # now nothing reads: the limits come back
        with duckdb.connect(str(db)) as view:
            assert view.execute(SETTINGS).fetchall() == [("244.1 MiB", 1)]
    finally:
        writer.close()
    assert problems == [] and writer.stats.snapshot()["spans_written"] == 9


def test_two_threads_and_an_error_leave_no_allocator_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """Held: the option never stays in ``os.environ`` (a second thread sees the first one's
    value as a user choice and leaves it alone; an error in the block still restores)."""
    monkeypatch.delenv(arrow_memory.ARENA_EAGER_COMMIT, raising=False)
    monkeypatch.delenv(arrow_memory.ARROW_POOL, raising=False)
    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)  # as in a process still to load it
    inside = threading.Barrier(2)
    seen: list[str | None] = []

    def block() -> None:
        with arrow_memory.lean_arrow_allocator():
            seen.append(os.environ.get(arrow_memory.ARENA_EAGER_COMMIT))
            inside.wait(10)
            inside.wait(10)

    threads = [threading.Thread(target=block) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert seen == ["0", "0"]
    assert arrow_memory.ARENA_EAGER_COMMIT not in os.environ
    with pytest.raises(RuntimeError), arrow_memory.lean_arrow_allocator():
        assert os.environ[arrow_memory.ARENA_EAGER_COMMIT] == "0"
        raise RuntimeError("exporter setup failed")
    assert arrow_memory.ARENA_EAGER_COMMIT not in os.environ


HOSTILE = [
    "x' or 1=1 --",
    "'||(select string_agg(content, '') from read_text('/etc/passwd'))||'",
    "\\' or true) --",
    "\u2019 or 1=1 --",
    "    FROM spans\n    GROUP BY rollout_id\n",
]


def test_traces_list_filters_stay_literals(tmp_path: Path) -> None:
    """Held: ``--task/--group/--status`` values that try to leave their SQL literal match no
    rollout and read no file, on the fast path as on typer's (same output, exit 0)."""
    from agent_rl_plugin.data.synthetic import synthesize_store

    db = tmp_path / "store.duckdb"
    synthesize_store(db, rollouts=6, llm_calls=1, group_size=2)
    for value in HOSTILE:
        for option in ("--task", "--group", "--status"):
            args = f"traces list --db {db} --json {option} {shlex.quote(value)}"
            fast = agent_rl(args, True)
            assert fast == agent_rl(args, False)
            assert fast[0] == 0 and json.loads(fast[1]) == []


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    ("shell_args", "message"),
    [
        ("query $'select \\xff' --db {db}", b"error: the query is not UTF-8 text (character 8"),
        ("traces list --task $'\\xff' --db {db}", b"error: --task is not UTF-8 text"),
        ("traces list --group $'g\\xfe' --db {db}", b"error: --group is not UTF-8 text"),
    ],
)
def test_undecodable_command_line_bytes_get_a_clear_error(tmp_path: Path, fast: bool, shell_args: str, message: bytes):
    from agent_rl_plugin.data.synthetic import synthesize_store

    db = tmp_path / "store.duckdb"
    synthesize_store(db, rollouts=4, llm_calls=1, group_size=2, n_tasks=2)
    code, out, err = agent_rl(shell_args.format(db=shlex.quote(str(db))), fast)
    assert code == 1 and out == b"" and err.startswith(message) and b"Traceback" not in err, err
