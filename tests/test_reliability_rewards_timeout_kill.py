"""A reward plugin that hangs is really killed at its timeout (``rewards/workers.py``).

The hung plugin starts a subprocess (in its worker's process group) and keeps writing to a file.
After the pool returns: the item is a ``"timed out after 1 s"`` row, the run took a bounded
time, the worker process and the plugin's subprocess are gone, and the file stops growing. A
kill that is a no-op (or one that spares the process group) fails this test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_rl_plugin.rewards import Rollout, reward
from agent_rl_plugin.rewards.runner import score
from agent_rl_plugin.rewards.workers import WorkerPool, WorkItem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    """The pids still alive after waiting up to ``seconds`` (orphans need a moment to be reaped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [pid for pid in pids if _alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _hanging_reward(workdir: Path):
    @reward(name="t_hang_and_work")
    def hang(rollout):
        (workdir / "worker.pid").write_text(str(os.getpid()))
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        (workdir / "child.pid").write_text(str(child.pid))
        with open(workdir / "ticks", "a") as ticks:
            while True:  # a side effect that only a dead process stops
                ticks.write("x")
                ticks.flush()
                time.sleep(0.02)

    return hang


def _read_pids(workdir: Path) -> list[int]:
    return [int((workdir / name).read_text()) for name in ("worker.pid", "child.pid") if (workdir / name).exists()]


def _cleanup(pids: list[int]) -> None:
    for pid in pids:  # only when the test failed: do not leak what we started
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_hung_plugin_its_subprocess_and_side_effects_are_killed_at_the_timeout(tmp_path):
    hang = _hanging_reward(tmp_path)
    outcomes = []
    started = time.monotonic()
    pool = WorkerPool(1, {"t_hang_and_work": hang}, [Rollout(rollout_id="r1")], timeout_s=1.0)
    try:
        pool.run([WorkItem(0, "t_hang_and_work", (0,))], lambda item, result: outcomes.extend(result))
        elapsed = time.monotonic() - started
        pids = _read_pids(tmp_path)
        assert len(pids) == 2, "the plugin did not start"
        assert [(o.status, o.error) for o in outcomes] == [("error", "timed out after 1 s")]
        assert elapsed < 5.0, f"the pool took {elapsed:.1f} s to give up on a 1 s timeout"
        assert _gone_within(pids, 3.0) == [], "the hung worker or its subprocess is still running"
        size = (tmp_path / "ticks").stat().st_size
        time.sleep(0.3)
        assert (tmp_path / "ticks").stat().st_size == size, "the killed plugin is still writing"
    finally:
        _cleanup(_read_pids(tmp_path))


def test_through_score_the_row_says_timeout_and_nothing_is_left(db_path, plugin_manager, tmp_path):
    from score_support import only_these_rewards, record_demo, rows

    record_demo(tasks=1, group_size=1)
    only_these_rewards(plugin_manager, _hanging_reward(tmp_path))
    started = time.monotonic()
    try:
        report = score(str(db_path), workers=1, timeout_s=1.0)
        elapsed = time.monotonic() - started
        assert report.rewards["t_hang_and_work"].errors == 1
        assert [r["error"] for r in rows(db_path, "select error from rewards where name = 't_hang_and_work'")] == [
            "timed out after 1 s"
        ]
        assert elapsed < 8.0, f"scoring took {elapsed:.1f} s with a 1 s timeout"
        assert _gone_within(_read_pids(tmp_path), 3.0) == []
    finally:
        _cleanup(_read_pids(tmp_path))
