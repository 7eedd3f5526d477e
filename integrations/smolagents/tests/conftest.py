"""Fixtures: each test records into its own DuckDB file with a fresh plugin manager."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")

from agent_rl_plugin import plugins, tracing  # noqa: E402
from agent_rl_plugin.testing import StoreReader  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("AGENT_RL_") and name != "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD":
            monkeypatch.delenv(name)
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    yield
    tracing.shutdown()
    plugins.set_plugin_manager(None)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent_rl.duckdb"


Store = StoreReader  # flushes, then reads the test's database through the views


@pytest.fixture
def store(db_path: Path) -> Store:
    return Store(db_path)
