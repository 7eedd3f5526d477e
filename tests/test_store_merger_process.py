"""The merger process: an agent that records a lot merges its spool in a child process.

Examples of the guarantees in :mod:`agent_rl_plugin.store.merger_process` and of
:class:`~agent_rl_plugin.store.spool_writer.SpoolWriter`'s use of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agent_rl_plugin.store.lease as lease
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.store.merger_process import LeaseLimits, MergerProcess, merge_leases
from agent_rl_plugin.store.spool import list_segments, write_segment
from agent_rl_plugin.store.spool_writer import SpoolWriter
from agent_rl_plugin.store.writer import ExportStats
from tests.test_store_spool import count, recorded

LIMITS = LeaseLimits(max_leases=8, max_segments=64, max_rows=8_192, merge_threads=1)


#: A script's lines that record one call into the database named by its first argument (``sys``
#: imported before them).
ONE_CALL_AGENT = (
    "import agent_rl_plugin as arl\n"
    "arl.configure(db=sys.argv[1])\n"
    "@arl.trace_agent\n"
    "def answer(q):\n"
    "    return q.upper()\n"
    "answer('hi')\n"
)


def refuse_merging_here(monkeypatch) -> list[str]:
    """Make a merge in this process fail loudly (the child imports its own, untouched)."""
    calls: list[str] = []

    def here(path, **kwargs):  # noqa: ANN001, ANN003
        calls.append(path)
        raise AssertionError("merged in the agent's process")

    monkeypatch.setattr(lease, "try_merge", here)
    return calls


def record(exporter: DuckDBSpanExporter, spans: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for i in range(spans):
        with tracer.start_as_current_span(f"step {i}", attributes={"agent_rl.rollout.id": f"r{i % 3}"}):
            pass


def test_a_recording_agent_hands_its_merges_to_a_child_and_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_RL_MERGER", "process")
    here = refuse_merging_here(monkeypatch)
    db = tmp_path / "runs.duckdb"
    exporter = DuckDBSpanExporter(db, normalizers=[])
    record(exporter, 50)
    assert exporter.force_flush()
    exporter.shutdown()  # the close merge: through the child, which then ends
    writer = exporter._writer
    assert here == [] and writer._merger_process is not None and writer._merger_process.started == 1
    assert writer.merges >= 1 and writer.merger_peak_rss_mb and writer.merger_peak_rss_mb > 10
    assert list_segments(db) == [] and count(db) == 50
    assert writer._merger_process._child is None  # stopped at close
    assert exporter.stats["spans_written"] == 50 and exporter.stats["spans_dropped"] == 0


def test_the_first_merge_with_segments_waiting_starts_the_child_even_a_flush(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_RL_MERGER", "auto")  # the default (the suite's own process merges itself)
    db = tmp_path / "runs.duckdb"
    writer = SpoolWriter(str(db), stats=ExportStats(), report=lambda kind, exc: None)
    writer._merge(0.0)  # a background merge with nothing waiting: no child for nothing
    assert writer._merger_process is None
    here = refuse_merging_here(monkeypatch)
    write_segment(db, recorded(3).spans)
    writer._housekeeping(force=True, closing=False)  # a flush in the agent's first second: the child merges it
    assert here == [] and writer._merger_process.started == 1 and count(db) == 3
    write_segment(db, recorded(4, rollout="r2").spans)
    writer._merge(0.0)  # and every merge after it
    assert here == [] and writer._merger_process.started == 1 and count(db) == 7
    writer.close()


def test_a_short_script_never_loads_duckdb_and_its_spans_are_stored_at_exit(tmp_path):
    """The README's shape: configure, one call, a plain exit (no flush). The exit's merge is the
    child's: DuckDB never enters the agent's process, and the span is in the file after it."""
    db = tmp_path / "runs.duckdb"
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('duckdb' in sys.modules, flush=True))\n"  # runs last: after the store's close
        + ONE_CALL_AGENT
    )
    env = {k: v for k, v in os.environ.items() if k != "AGENT_RL_MERGER"}
    out = subprocess.run([sys.executable, "-c", script, str(db)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert count(db) == 1 and list_segments(db) == []


def test_a_dead_or_hung_child_is_replaced_and_nothing_is_lost(tmp_path, monkeypatch):
    db = tmp_path / "runs.duckdb"
    merger = MergerProcess(str(db))
    write_segment(db, recorded(2).spans)
    assert merger.merge(wait_s=0.0, limits=LIMITS).results[0]["spans"] == 2
    merger._child.kill()
    merger._child.wait()
    write_segment(db, recorded(5, rollout="r2").spans)
    outcome = merger.merge(wait_s=0.0, limits=LIMITS)  # a new child takes over
    assert merger.started == 2 and outcome.results[0]["spans"] == 5 and count(db) == 7
    merger.reply_timeout_s = 0.0  # a child that does not answer in time is stopped
    write_segment(db, recorded(1, rollout="r3").spans)
    child = merger._child
    assert merger.merge(wait_s=0.0, limits=LIMITS) is None and child.poll() is not None
    merger.reply_timeout_s = 60.0
    assert merger.merge(wait_s=0.0, limits=LIMITS) is not None and merger.started == 3
    assert list_segments(db) == [] and count(db) == 8
    merger.close()


def test_without_a_child_the_agent_merges_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_RL_MERGER", "process")
    monkeypatch.setattr(sys, "executable", "")  # embedded Python: no interpreter to start
    db = tmp_path / "runs.duckdb"
    writer = SpoolWriter(str(db), stats=ExportStats(), report=lambda kind, exc: None)
    write_segment(db, recorded(3).spans)
    writer._merge(0.0)
    assert count(db) == 3 and list_segments(db) == []
    writer.close()


def test_a_failure_in_the_child_is_reported_with_its_cause(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_RL_MERGER", "process")
    db = tmp_path / "runs.duckdb"
    db.write_bytes(b"not a database" * 100)
    write_segment(db, recorded(2).spans)
    reported: list[tuple[str, BaseException]] = []
    writer = SpoolWriter(str(db), stats=ExportStats(), report=lambda kind, exc: reported.append((kind, exc)))
    writer._merge(0.0)
    assert [kind for kind, _ in reported] == ["merge"]
    assert str(db) in str(reported[0][1]) and writer._merger_process.started == 1
    assert len(list_segments(db)) == 1  # kept for a later merge
    writer.close()


def test_the_child_ignores_ctrl_c_and_ends_when_its_input_closes(tmp_path):
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(2).spans)
    merger = MergerProcess(str(db))
    assert merger.merge(wait_s=0.0, limits=LIMITS) is not None
    child = merger._child
    os.kill(child.pid, signal.SIGINT)  # what Ctrl+C in the agent's terminal sends its group
    time.sleep(0.3)
    assert child.poll() is None
    write_segment(db, recorded(1, rollout="r2").spans)
    assert merger.merge(wait_s=0.0, limits=LIMITS).results[0]["spans"] == 1
    merger.close(timeout_s=30)
    assert child.returncode == 0 and count(db) == 3


def test_the_child_outlives_a_killed_agent_only_to_finish_and_leave(tmp_path):
    db = tmp_path / "runs.duckdb"
    script = (
        "import sys, time\n"
        "from agent_rl_plugin.store.merger_process import LeaseLimits, MergerProcess\n"
        "m = MergerProcess(sys.argv[1]); m.merge(wait_s=0.0, limits=LeaseLimits(1, 1, 1, 1))\n"
        "print(m._child.pid, flush=True); time.sleep(60)\n"
    )
    agent = subprocess.Popen([sys.executable, "-c", script, str(db)], stdout=subprocess.PIPE, text=True)
    child_pid = int(agent.stdout.readline())
    agent.kill()
    agent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{child_pid}").exists():
        if Path(f"/proc/{child_pid}/stat").read_text().split()[2] == "Z":
            break  # ended, not yet reaped by its (dead) parent's reaper
        time.sleep(0.05)
    gone = not Path(f"/proc/{child_pid}").exists() or Path(f"/proc/{child_pid}/stat").read_text().split()[2] == "Z"
    assert gone


def test_merge_leases_reports_an_interrupt_as_deferred(tmp_path, monkeypatch):
    db = tmp_path / "runs.duckdb"

    def interrupted(*args, **kwargs):  # noqa: ANN002, ANN003
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(lease, "try_merge", interrupted)
    outcome = merge_leases(str(db), wait_s=0.0, limits=LIMITS)
    assert outcome.interrupted and outcome.error is None and outcome.failure(str(db)) is None


def test_a_full_disk_in_the_child_keeps_its_errno(tmp_path, monkeypatch):
    import errno

    def full(*args, **kwargs):  # noqa: ANN002, ANN003
        raise OSError(errno.ENOSPC, "write failed")  # only the errno says why

    monkeypatch.setattr(lease, "try_merge", full)
    outcome = merge_leases(str(tmp_path / "x.duckdb"), wait_s=0.0, limits=LIMITS)
    from agent_rl_plugin.store.errors import storage_problem

    failure = outcome.failure(str(tmp_path / "x.duckdb"))
    assert failure is not None and storage_problem(failure) is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_agent_starts_its_own_child(tmp_path):
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(2).spans)
    merger = MergerProcess(str(db))
    merger.merge(wait_s=0.0, limits=LIMITS)
    parent_child = merger._child.pid
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process
        try:
            write_segment(db, recorded(1, rollout="forked").spans)
            outcome = merger.merge(wait_s=5.0, limits=LIMITS)
            ok = outcome is not None and merger._child.pid != parent_child and merger.started == 2
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert merger._child.pid == parent_child and merger._child.poll() is None  # ours is untouched
    merger.close()
    assert count(db) == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_fork_that_outlives_the_agent_does_not_keep_its_merger_alive(tmp_path):
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(2).spans)
    merger = MergerProcess(str(db))
    merger.merge(wait_s=0.0, limits=LIMITS)
    child = merger._child
    pid = os.fork()
    if pid == 0:  # pragma: no cover - a worker forked by the agent, still busy
        time.sleep(20)
        os._exit(0)
    try:
        merger.close(timeout_s=10)  # the agent is done: its merger ends with it (not killed)
        assert child.returncode == 0
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_merger_that_never_answers_is_given_up_after_a_few_tries(tmp_path, monkeypatch):
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(2).spans)
    monkeypatch.setattr(sys, "executable", "/bin/true")  # starts, and ends without a word
    merger = MergerProcess(str(db))
    assert [merger.merge(wait_s=0.0, limits=LIMITS) for _ in range(6)] == [None] * 6
    assert merger.started == 3  # then no process start per merge: the agent merges itself
