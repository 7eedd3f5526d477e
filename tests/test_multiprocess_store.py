"""Many processes, one database file, no server: four recording agents, readers (Python and the
CLI) and a scorer share one file at the same time, and nothing is lost or refused.

DuckDB lets one process write a file and no other process read it meanwhile. Agents therefore
never hold it (they write spool segments beside it), and everyone else holds it briefly. This
test runs the everyday case for ``AGENT_RL_MP_SECONDS`` (default 20) seconds and checks:

* every span each agent finished is in the file at the end, exactly once;
* every reader query was answered (none raised), within the bounded wait, and saw a count
  that never went down;
* ``agent-rl query`` and ``agent-rl score`` runs meanwhile all succeeded;
* no lock error reached anybody's output.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb

from agent_rl_plugin.store import open_reader
from agent_rl_plugin.store.spool import list_segments

SECONDS = float(os.environ.get("AGENT_RL_MP_SECONDS", "20"))
AGENTS = 4

AGENT = textwrap.dedent(
    """
    import sys, time, json
    import agent_rl_plugin as arl

    db, seconds, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    arl.configure(db=db)

    @arl.trace_tool
    def lookup(key):
        return key[::-1]

    @arl.trace_agent(name=name)
    def agent(i):
        return lookup(f"{name}-{i}") + lookup("x")

    spans = 0
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        with arl.rollout(task_id=f"{name}-t{i % 5}", group_id=f"g{i % 3}"):
            agent(i)
            arl.emit_reward(1.0 if i % 2 else 0.0, name="parity")
        spans += 4  # rollout, agent, two tools
        i += 1
        time.sleep(0.002)
    print(json.dumps({"spans": spans, "rollouts": i}), flush=True)
    """
)


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent_rl_plugin", *args, "--db", str(db)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "AGENT_RL_DB": ""},
    )


def test_four_agents_readers_and_a_scorer_share_one_file(tmp_path):
    db = tmp_path / "shared.duckdb"
    env = {**os.environ, "AGENT_RL_DB": ""}
    agents = [
        subprocess.Popen([sys.executable, "-c", AGENT, str(db), str(SECONDS), f"agent{k}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for k in range(AGENTS)
    ]
    waits: list[float] = []
    counts: list[int] = []
    cli_runs: list[subprocess.CompletedProcess] = []
    try:
        deadline = time.monotonic() + SECONDS
        turn = 0
        while time.monotonic() < deadline:
            if turn % 4 == 3:  # the CLI in another terminal: a query, then a scoring run
                cli_runs.append(_cli("query", "select count(*) as n from spans", "--json", db=db))
                cli_runs.append(_cli("score", "--reward", "efficiency", "--workers", "0", "--json", db=db))
            else:
                started = time.monotonic()
                try:
                    connection = open_reader(db)  # a Python reader (a notebook)
                except Exception as exc:  # an open before the first agent created anything
                    assert "no database" in str(exc) and not counts, exc
                    time.sleep(0.2)
                    continue
                try:
                    counts.append(connection.execute("select count(*) from spans").fetchone()[0])
                    connection.execute("select count(*) from rollouts").fetchone()
                finally:
                    connection.close()
                waits.append(time.monotonic() - started)
            turn += 1
            time.sleep(0.1)
        outputs = [a.communicate(timeout=120) for a in agents]
    finally:
        for process in agents:
            if process.poll() is None:
                process.kill()
    for process, (out, err) in zip(agents, outputs):
        assert process.returncode == 0, err[-3000:]
        assert "lock" not in err.lower() and "agent-rl:" not in err, err[-3000:]
    expected = sum(json.loads(out.strip().splitlines()[-1])["spans"] for out, _ in outputs)
    for run in cli_runs:
        assert run.returncode == 0, (run.args, run.stdout[-2000:], run.stderr[-3000:])
        assert "lock" not in run.stderr.lower(), run.stderr[-3000:]
    assert counts == sorted(counts) and counts, counts  # every query answered, never going back
    assert max(waits) < 5.0, max(waits)

    connection = open_reader(db)
    try:
        total, distinct = connection.execute("select count(*), count(distinct (trace_id, span_id)) from spans").fetchone()
        rewards = connection.execute("select count(*) from rewards where name = 'parity'").fetchone()[0]
    finally:
        connection.close()
    assert total == distinct == expected  # every span, exactly once
    assert rewards == expected // 4
    assert not list_segments(db)  # all merged into the file
    plain = duckdb.connect(str(db), read_only=True)
    try:
        assert plain.execute("select count(*) from spans").fetchone()[0] == expected
    finally:
        plain.close()
    waits.sort()
    print(f"\nspans {expected}; reader opens {len(waits)}: p50 {statistics.median(waits) * 1000:.0f} ms, "
          f"p95 {waits[int(len(waits) * 0.95) - 1] * 1000:.0f} ms, max {waits[-1] * 1000:.0f} ms; "
          f"CLI runs {len(cli_runs)}")


SHORT_AGENT = textwrap.dedent(
    """
    import sys
    import agent_rl_plugin as arl
    arl.configure(db=sys.argv[1])

    @arl.trace_agent
    def agent(q):
        return q.upper()

    for i in range(int(sys.argv[2])):
        agent(f"q{i}")
    """
)


def test_agents_recording_into_a_file_a_receiver_holds_lose_nothing(tmp_path):
    """`agent-rl serve` holds its file for good: agents on its host that record into the same
    file spool their segments as always, and the receiver merges them, idle or not."""
    from agent_rl_plugin.receiver import find_receiver

    db = tmp_path / "served.duckdb"
    env = {**os.environ, "AGENT_RL_DB": "", "AGENT_RL_SERVE_TOKEN": ""}
    serve = subprocess.Popen(
        [sys.executable, "-m", "agent_rl_plugin", "serve", "--db", str(db), "--port", "0", "--no-token"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while find_receiver(db) is None:
            assert serve.poll() is None, serve.communicate()
            assert time.monotonic() < deadline, "agent-rl serve did not start"
            time.sleep(0.05)
        for n in (7, 5):
            agent = subprocess.run([sys.executable, "-c", SHORT_AGENT, str(db), str(n)], capture_output=True,
                                   text=True, timeout=120, env=env)
            assert agent.returncode == 0, agent.stderr[-3000:]
        deadline = time.monotonic() + 30
        while list_segments(db):  # the receiver merges them within about a second, with no traffic
            assert time.monotonic() < deadline, "the receiver did not merge the agents' segments"
            time.sleep(0.1)
    finally:
        serve.terminate()
        _, err = serve.communicate(timeout=60)
    assert serve.returncode == 0, err[-3000:]
    plain = duckdb.connect(str(db), read_only=True)
    try:
        assert plain.execute("select count(*) from spans").fetchone()[0] == 12
    finally:
        plain.close()
