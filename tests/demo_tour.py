"""One ``agent-rl demo --tour --json`` run per test session, shared by the tests that read it.

The tour records 16 rollouts, scores them, computes advantages and trains three tiny adapters:
about a minute. Tests that only read its store share one run (:func:`demo_tour`, a session
fixture registered in ``conftest.py``); a test that changes a store copies it first
(:meth:`DemoTour.copy`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def agent_rl_script() -> str:
    """The ``agent-rl`` console script of this environment."""
    return shutil.which("agent-rl") or str(Path(sys.executable).parent / "agent-rl")


@dataclass(frozen=True)
class DemoTour:
    """The run: its store (read it, do not change it), its ``--json`` summary, its wall time."""

    db: Path
    summary: dict[str, Any]
    seconds: float

    def copy(self, to: Path) -> Path:
        """A private copy of the store (and its write-ahead log, if any) at ``to``."""
        shutil.copy(self.db, to)
        wal = self.db.with_name(self.db.name + ".wal")
        if wal.exists():
            shutil.copy(wal, to.with_name(to.name + ".wal"))
        return to


@pytest.fixture(scope="session")
def demo_tour(tmp_path_factory: pytest.TempPathFactory) -> DemoTour:
    """``agent-rl demo --tour --db DB --json`` from the console script, run once."""
    folder = tmp_path_factory.mktemp("demo_tour")
    db = folder / "demo.duckdb"
    env = {**os.environ, "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"}
    started = time.perf_counter()
    result = subprocess.run(
        [agent_rl_script(), "demo", "--tour", "--db", str(db), "--json"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-3000:]
    return DemoTour(db=db, summary=json.loads(result.stdout), seconds=seconds)
