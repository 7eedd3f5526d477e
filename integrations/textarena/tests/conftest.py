"""Fixtures: the tests run offline (any connection off this machine fails the test), and each
test records into its own DuckDB file with a fresh plugin manager (agent_rl_plugin.testing's
agent_rl_offline and agent_rl_isolated)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")

from agent_rl_plugin.testing import StoreReader  # noqa: E402

pytest_plugins = ["agent_rl_plugin.testing"]


@pytest.fixture(autouse=True)
def _offline_and_isolated(agent_rl_offline: None, agent_rl_isolated: Path) -> Iterator[None]:
    """Offline (a connection off this machine fails the test) and from a clean slate."""
    yield


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent_rl.duckdb"


@pytest.fixture
def store(db_path: Path) -> StoreReader:
    return StoreReader(db_path)
