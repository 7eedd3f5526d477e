"""The views stay usable on a large store (100k rollouts, about a million spans)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agent_rl_plugin.data.synthetic import synthesize_store


@pytest.mark.slow
def test_limit_over_rollouts_returns_on_a_large_store(tmp_path):
    """DuckDB 2.0 deadlocked on ``select ... from rollouts limit n`` with the first version of the
    view once a store held ~70k rollouts (migration 0006 fixed it). Run the query in a child
    process so a regression fails on the timeout instead of hanging the suite."""
    path = tmp_path / "large.duckdb"
    synthesize_store(str(path), 100_000)
    probe = textwrap.dedent(
        f"""
        import duckdb
        con = duckdb.connect({str(path)!r}, read_only=True)
        print(len(con.execute("select rollout_id from rollouts limit 5").fetchall()))
        print(con.execute("select count(*) from rollouts").fetchone()[0])
        """
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["5", "100000"]
