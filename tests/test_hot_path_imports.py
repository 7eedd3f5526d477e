"""Recording stays light: an agent that configures, runs one traced call and flushes imports no
command line (typer, click, rich, ``agent_rl_plugin.cli``) and no training or data stack."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_rl_plugin.store import open_reader

#: Never imported by recording alone.
HEAVY = ["typer", "click", "rich", "torch", "transformers", "trl", "peft", "matplotlib"]

AGENT = textwrap.dedent(
    """
    import json, sys
    import agent_rl_plugin as arl

    arl.configure(db=sys.argv[1])

    @arl.trace_agent
    def answer(question):
        return question.upper()

    answer("hi")
    arl.flush()
    print(json.dumps(sorted(sys.modules)))
    """
)


def run_agent(db: Path, **env: str) -> set[str]:
    """Run the agent above in a fresh interpreter; the names of the modules it ended up with."""
    done = subprocess.run(
        [sys.executable, "-c", AGENT, str(db)], capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", **env},  # no AGENT_RL_* settings of the caller
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory) -> tuple[Path, set[str]]:
    db = tmp_path_factory.mktemp("hot_path") / "t.duckdb"
    return db, run_agent(db)


def test_recording_imports_no_command_line_and_no_training_stack(agent_run):
    _, modules = agent_run
    assert [name for name in HEAVY if name in modules] == []
    assert sorted(m for m in modules if m.startswith("agent_rl_plugin.cli")) == []


def test_the_traced_call_is_in_the_file(agent_run):
    db, _ = agent_run
    connection = open_reader(db)
    try:
        names = [row[0] for row in connection.execute("select name from spans").fetchall()]
    finally:
        connection.close()
    assert names == ["invoke_agent answer"]


def test_recording_does_not_import_pandas(agent_run):
    # pyarrow.array imports pandas on first use; the store builds its Arrow columns without it
    # (agent_rl_plugin.store.arrow_columns).
    _, modules = agent_run
    assert "pandas" not in modules


def test_recording_does_not_import_pyarrow_compute(agent_run):
    # The spool writer only builds tables and writes Parquet; pyarrow.compute (~9 MB of peak RSS
    # in the startup row) is imported where rewards are filtered into a held database.
    _, modules = agent_run
    assert "pyarrow.compute" not in modules


def test_an_agent_whose_merges_run_in_the_merger_process_never_loads_duckdb(tmp_path):
    # DuckDB (16 MB of RSS to import, more to open a file) stays in the merger process: the agent
    # writes spool segments, the child merges them, at the flush and at exit.
    db = tmp_path / "t.duckdb"
    modules = run_agent(db, AGENT_RL_MERGER="process")
    assert sorted(m for m in modules if m == "duckdb" or m.startswith("duckdb.")) == []
    from agent_rl_plugin.store.spool import list_segments

    assert list_segments(db) == []  # merged by the child, not left to a reader
    connection = open_reader(db)
    try:
        assert connection.execute("select name from spans").fetchall() == [("invoke_agent answer",)]
    finally:
        connection.close()
