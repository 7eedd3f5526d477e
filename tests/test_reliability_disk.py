"""A database that cannot be written (a read-only location, a full disk): the agent is unaffected.

For each way the disk can refuse (a folder that cannot exist because its parent is a regular
file; a read-only file system; a file-size limit, EFBIG, the way a full disk looks to a process
with ``ulimit -f``; a full tmpfs, ENOSPC) an instrumented agent must

* return exactly what the same code returns untraced, with no exception reaching it;
* log one clear error naming the database and the cause (not one per span, no traceback);
* get ``True`` from ``arl.flush()`` rather than an exception (its documented contract: ``False``
  only when the timeout is reached; spans that could not be written are counted in
  ``exporter.stats["spans_dropped"]``);
* (file-size limit) record again by itself once there is room, and leave a file that opens.

``agent-rl serve --db`` on such a location prints one ``error:`` line and exits 1.

Running as root, ``chmod`` does not stop writes, so read-only is a path under a regular file
and, where this machine allows mounting (checked, skipped otherwise), a read-only bind mount;
a full disk is ``RLIMIT_FSIZE`` in a subprocess (SIGXFSZ ignored, so writes fail with EFBIG)
and, where mounting works, a 1 MiB tmpfs.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator

import duckdb
import pytest

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.store import open_reader

ROOT = Path(__file__).resolve().parents[1]

#: The agent, built with or without instrumentation; shared with the subprocess below.
AGENT_CODE = textwrap.dedent(
    """
    def build(tool_wrap, agent_wrap):
        @tool_wrap
        def tool(x):
            return {"square": x * x, "note": "z" * 3000}

        @agent_wrap
        def agent(i):
            found = [tool(i + k) for k in range(3)]
            return {"i": i, "sum": sum(f["square"] for f in found), "text": "w" * 4000 + str(i)}

        return agent


    def run(agent, first, count, traced):
        import agent_rl_plugin as arl
        results = []
        for i in range(first, first + count):
            if traced:
                with arl.rollout(task_id=f"t{i}", group_id="g"):
                    results.append(agent(i))
                    arl.record_llm_call("tiny", "q" * 2000, "a" * 2000, input_tokens=1, output_tokens=1)
                    arl.emit_reward(1.0, name="done")
            else:
                results.append(agent(i))
        return results
    """
)
namespace: dict[str, Any] = {}
exec(AGENT_CODE, namespace)  # noqa: S102 - our own code, shared verbatim with the subprocess
build: Callable[..., Any] = namespace["build"]
run: Callable[..., list] = namespace["run"]


def untraced(first: int, count: int) -> list:
    return run(build(lambda f: f, lambda f: f), first, count, traced=False)


def traced_agent() -> Any:
    return build(arl.trace_tool, arl.trace_agent)


def errors_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("agent_rl_plugin")]


def check_agent_unaffected(db: Path, caplog, cause: str, rollouts: int = 10, nothing_fits: bool = True) -> dict:
    """Record into ``db`` (which cannot take the data); returns the exporter's stats."""
    arl.configure(db=str(db), export_delay_ms=20)
    agent = traced_agent()
    half = rollouts // 2
    with caplog.at_level(logging.DEBUG, logger="agent_rl_plugin"):
        first = run(agent, 0, half, traced=True)  # no exception reaches the agent ...
        assert arl.flush(30) is True  # ... nor the caller of flush()
        second = run(agent, half, rollouts - half, traced=True)
        assert arl.flush(30) is True
    assert first + second == untraced(0, rollouts)  # exactly what it returns untraced
    stats = tracing.STATE.exporters["duckdb"].stats
    assert stats["spans_received"] == rollouts * 6  # rollout, agent, 3 tools, LLM call
    assert stats["spans_written"] + stats["spans_dropped"] == stats["spans_received"]
    if nothing_fits:
        assert stats["spans_written"] == 0 and stats["spans_dropped"] > 0
    errors = errors_logged(caplog)
    assert len(errors) == 1, errors  # one error, not one per span or batch
    assert str(db) in errors[0] and cause in errors[0], errors[0]
    assert "keeps running" in errors[0]
    assert not any(r.exc_info for r in caplog.records if r.levelno >= logging.ERROR)  # no traceback
    return stats


def serve_fails_clearly(db: Path, cause: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent_rl_plugin.cli.main", "serve", "--db", str(db), "--port", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env={**os.environ, "AGENT_RL_SERVE_TOKEN": ""},
    )
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert str(db) in errors[0] and cause in errors[0], errors[0]
    assert "Traceback" not in result.stderr
    assert not Path(str(db) + ".serve.json").exists()


# --- read-only location ---------------------------------------------------------------------------
@pytest.fixture
def under_a_file(tmp_path: Path) -> Path:
    """A database path whose parent folder cannot exist: its would-be parent is a regular file."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file")
    return blocker / "runs" / "agent.duckdb"


def test_folder_that_cannot_be_created_agent_unaffected(plugin_manager, under_a_file, caplog):
    stats = check_agent_unaffected(under_a_file, caplog, "Not a directory")
    assert "cannot create the folder" in stats["last_error"]
    assert not under_a_file.parent.exists()


def test_serve_on_a_folder_that_cannot_be_created_fails_in_one_line(under_a_file):
    serve_fails_clearly(under_a_file, "Not a directory")


def mount(*args: str) -> bool:
    try:
        return subprocess.run(["mount", *args], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder on a read-only bind mount (skipped where this machine cannot mount)."""
    source, target = tmp_path / "source", tmp_path / "read-only"
    source.mkdir()
    target.mkdir()
    if not mount("--bind", str(source), str(target)):
        pytest.skip("cannot bind-mount here (needs root with CAP_SYS_ADMIN)")
    try:
        if not mount("-o", "remount,bind,ro", str(target)):
            pytest.skip("cannot remount read-only here")
        with pytest.raises(OSError):
            (target / "probe").write_text("x")
        yield target
    finally:
        tracing.shutdown()  # close what the test opened under the mount before unmounting
        unmount(target)


def test_read_only_file_system_agent_unaffected(plugin_manager, read_only_folder, caplog):
    stats = check_agent_unaffected(read_only_folder / "agent.duckdb", caplog, "read-only (EROFS)")
    assert "Read-only file system" in stats["last_error"]


def test_serve_on_a_read_only_file_system_fails_in_one_line(read_only_folder):
    serve_fails_clearly(read_only_folder / "served.duckdb", "Read-only file system")


# --- full disk ------------------------------------------------------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (skipped where this machine cannot mount)."""
    target = tmp_path / "small"
    target.mkdir()
    if not mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(target)):
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        yield target
    finally:
        tracing.shutdown()
        unmount(target)


@pytest.mark.parametrize("merger", ["thread", "process"])
def test_full_tmpfs_agent_unaffected(plugin_manager, small_tmpfs, caplog, monkeypatch, merger):
    # What fits is kept (in the database, or as spool segments beside it when only the
    # database's own growth no longer fits); what does not is dropped and counted. The same
    # whether the agent merges itself or its merger process does (which hands its error back).
    monkeypatch.setenv("AGENT_RL_MERGER", merger)
    stats = check_agent_unaffected(small_tmpfs / "agent.duckdb", caplog, "the disk is full (ENOSPC)",
                                   rollouts=100, nothing_fits=False)
    assert "No space left on device" in stats["last_error"]
    kept = tracing.STATE.exporters["duckdb"].stats["spans_written"]
    tracing.shutdown()
    connection = open_reader(small_tmpfs / "agent.duckdb")  # the database plus the spool
    try:
        assert connection.execute("select count(*) from spans").fetchone()[0] == kept
    finally:
        connection.close()


#: argv: db path. Records, flushes, then caps file sizes below the database's (RLIMIT_FSIZE,
#: SIGXFSZ ignored: writes past it fail with EFBIG), records more, lifts the cap, records more.
#: Prints one JSON line with the results and counters.
DISK_FULL_AGENT = AGENT_CODE + textwrap.dedent(
    """
    import json, os, resource, signal, sys
    import agent_rl_plugin as arl
    from agent_rl_plugin import tracing

    db = sys.argv[1]
    arl.configure(db=db, export_delay_ms=20)
    agent = build(arl.trace_tool, arl.trace_agent)
    exporter = tracing.STATE.exporters["duckdb"]
    out = {"before": run(agent, 0, 5, True), "flush_before": arl.flush(30)}
    written_before = exporter.stats["spans_written"]

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # Files may not grow past 256 KiB: the database (already bigger) and its log cannot take
    # the rollouts below; small spool segments can.
    cap = 256 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, resource.RLIM_INFINITY))
    try:
        out["during"] = run(agent, 5, 40, True)
        out["flush_during"] = arl.flush(30)
    except BaseException as exc:
        out["raised"] = repr(exc)
    full = exporter.stats
    from agent_rl_plugin.store.spool import list_segments
    out["unmerged_during"] = len(list_segments(db))

    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    recovered_from = full["spans_written"]
    out["after"] = run(agent, 45, 5, True)
    out["flush_after"] = arl.flush(30)
    out["unmerged_after"] = len(list_segments(db))
    after = exporter.stats
    out.update(written_before=written_before, full_stats=full, after_stats=after,
               written_after_room=after["spans_written"] - recovered_from)
    arl.shutdown()
    print(json.dumps(out), flush=True)
    """
)


def test_file_size_limit_agent_unaffected_one_error_and_recovers(tmp_path):
    db = tmp_path / "capped.duckdb"
    result = subprocess.run(
        [sys.executable, "-c", DISK_FULL_AGENT, str(db)],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
        # RLIMIT_FSIZE limits one process, not the disk: a merger process started before the
        # limit would not see it, one started during it would keep it after. The full tmpfs test
        # covers the merger process on a disk that is really full.
        env={**os.environ, "AGENT_RL_DB": "", "AGENT_RL_MERGER": "thread"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert "raised" not in out
    assert out["before"] + out["during"] + out["after"] == untraced(0, 50)
    assert out["flush_before"] is out["flush_during"] is out["flush_after"] is True
    spans_per_rollout = 6  # rollout, agent, 3 tools, LLM call
    assert out["written_before"] == 5 * spans_per_rollout
    full, after = out["full_stats"], out["after_stats"]
    # The database could not grow, but the small spool segments could: nothing was dropped,
    # the spans waited beside the file ...
    assert full["spans_dropped"] == 0 and full["spans_written"] == 45 * spans_per_rollout
    assert out["unmerged_during"] > 0
    # ... and were merged by themselves once there was room.
    assert out["written_after_room"] == 5 * spans_per_rollout and after["spans_dropped"] == 0
    assert out["unmerged_after"] == 0

    # One clear error line (Python's last-resort handler prints it to stderr), no traceback.
    logged = [line for line in result.stderr.splitlines() if "agent-rl:" in line]
    assert len(logged) == 1, result.stderr[-3000:]
    assert f"cannot write {db}: the file size limit was reached (EFBIG" in logged[0]
    assert "File too large" in logged[0] and "fix:" in logged[0]
    assert "Traceback" not in result.stderr

    # The file opens afterwards, read-only and read-write, with every span.
    expected = after["spans_written"]
    assert expected == 50 * spans_per_rollout
    for read_only in (True, False):
        connection = duckdb.connect(str(db), read_only=read_only)
        try:
            assert connection.execute("select count(*) from spans").fetchone()[0] == expected
        finally:
            connection.close()
