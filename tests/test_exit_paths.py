"""Every way a recording process can end stores every finished span, without a flush() call.

Each case runs a real agent script in a fresh interpreter and counts the rows in the file
afterwards: the exact number of calls that finished. DuckDB 2.0.1 refuses queries that scan
Python objects from a non-main thread once its own exit hook has run, and atexit runs hooks
last-in first-out, so each case also runs with duckdb imported before and after configure().
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]
CALLS = 5

PRELUDE = textwrap.dedent(
    """
    import os, sys
    if os.environ.get("IMPORT_DUCKDB_FIRST"):
        import duckdb
    import agent_rl_plugin as arl
    arl.configure(db=sys.argv[1])
    if not os.environ.get("IMPORT_DUCKDB_FIRST"):
        import duckdb  # after configure(): its exit hook runs before ours

    @arl.trace_agent
    def agent(q):
        return q.upper()
    """
)

ENDINGS = {
    "normal end": "for i in range(5): agent(f'q{i}')",
    "sys.exit(0)": "for i in range(5): agent(f'q{i}')\nsys.exit(0)",
    "sys.exit(3)": "for i in range(5): agent(f'q{i}')\nsys.exit(3)",
    "uncaught exception": "for i in range(5): agent(f'q{i}')\nraise RuntimeError('the agent crashed')",
    "exception raised through the agent": (
        "for i in range(4): agent(f'q{i}')\n"
        "@arl.trace_agent\n"
        "def failing(q):\n"
        "    raise ValueError(q)\n"
        "failing('boom')"
    ),
    "daemon thread still running": textwrap.dedent(
        """
        import threading
        done = threading.Event()
        def work():
            for i in range(5): agent(f't{i}')
            done.set()
            threading.Event().wait()  # never returns: the thread is still alive at exit
        threading.Thread(target=work, daemon=True).start()
        done.wait(30)
        """
    ),
    "non-daemon thread finishing at exit": textwrap.dedent(
        """
        import threading, time
        def work():
            time.sleep(0.3)  # still running when the main thread ends
            for i in range(5): agent(f't{i}')
        threading.Thread(target=work).start()
        """
    ),
    "asyncio loop closed at exit": textwrap.dedent(
        """
        import asyncio
        @arl.trace_agent
        async def async_agent(q):
            await asyncio.sleep(0.01)
            return q.upper()
        async def main():
            await asyncio.gather(*(async_agent(f'a{i}') for i in range(5)))
        asyncio.run(main())
        """
    ),
}
EXPECTED_STATUS = {"sys.exit(3)": 3, "uncaught exception": 1, "exception raised through the agent": 1}


def spans_in(db: Path) -> int:
    from agent_rl_plugin.store import open_reader

    connection = open_reader(db)
    try:
        return connection.execute("select count(*) from spans").fetchone()[0]
    finally:
        connection.close()


def raw_spans_in(db: Path) -> int:
    """Rows in the database file itself (not the spool): what a plain DuckDB client sees."""
    connection = duckdb.connect(str(db), read_only=True)
    try:
        return connection.execute("select count(*) from spans").fetchone()[0]
    finally:
        connection.close()


def run_script(tmp_path: Path, body: str, duckdb_first: bool) -> tuple[Path, subprocess.CompletedProcess]:
    db = tmp_path / "exit.duckdb"
    env = {**os.environ, "AGENT_RL_DB": ""}
    env.pop("IMPORT_DUCKDB_FIRST", None)
    if duckdb_first:
        env["IMPORT_DUCKDB_FIRST"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", PRELUDE + body, str(db)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )
    return db, result


@pytest.mark.parametrize("duckdb_first", [False, True], ids=["duckdb-after", "duckdb-first"])
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_finished_span_is_stored_at_exit(tmp_path, ending, duckdb_first):
    db, result = run_script(tmp_path, ENDINGS[ending], duckdb_first)
    assert result.returncode == EXPECTED_STATUS.get(ending, 0), result.stderr[-3000:]
    assert "InvalidInputException" not in result.stderr and "agent-rl:" not in result.stderr, result.stderr[-3000:]
    assert raw_spans_in(db) == CALLS  # merged into the file itself at exit, nothing left aside
    assert spans_in(db) == CALLS


def _run_until_ready(tmp_path: Path, body: str) -> tuple[Path, subprocess.Popen]:
    db = tmp_path / "signal.duckdb"
    script = PRELUDE + body
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(db)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "AGENT_RL_DB": ""},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == "ready", process.communicate()[1][-3000:]
    return db, process


WAIT_FOR_SIGNAL = textwrap.dedent(
    """
    import time
    for i in range(5): agent(f'q{i}')
    print("ready", flush=True)
    time.sleep(60)  # outside any span: the signal lands here
    """
)


@pytest.mark.parametrize(
    "signum, status",
    [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, -signal.SIGTERM)],
    ids=["SIGINT (KeyboardInterrupt)", "SIGTERM"],
)
def test_a_signal_stores_every_finished_span(tmp_path, signum, status):
    db, process = _run_until_ready(tmp_path, WAIT_FOR_SIGNAL)
    time.sleep(0.2)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    # An uncaught KeyboardInterrupt ends Python with the signal's status since 3.8 (or 1 earlier).
    assert process.returncode in (status, 1), stderr[-3000:]
    assert "InvalidInputException" not in stderr, stderr[-3000:]
    assert spans_in(db) == CALLS


def test_a_reader_holding_the_file_at_exit_loses_nothing(tmp_path):
    """The agent exits while another process reads the database: the merge cannot run, so the
    segments stay beside the file, and the next opener sees (and merges) them."""
    db = tmp_path / "exit.duckdb"
    _, first = run_script(tmp_path, "agent('first')\narl.flush()\n", False)
    assert first.returncode == 0, first.stderr
    reader = duckdb.connect(str(db), read_only=True)  # an open session in another terminal
    try:
        holder = subprocess.run(
            [sys.executable, "-c", PRELUDE + ENDINGS["normal end"], str(db)], cwd=tmp_path, capture_output=True,
            text=True, timeout=120, env={**os.environ, "AGENT_RL_DB": ""},
        )
        assert holder.returncode == 0, holder.stderr[-3000:]
        assert reader.execute("select count(*) from spans").fetchone()[0] == 1  # its own snapshot
    finally:
        reader.close()
    assert spans_in(db) == CALLS + 1
    assert raw_spans_in(db) == CALLS + 1  # the reader above merged them
