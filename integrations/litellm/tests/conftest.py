"""Fixtures: offline (a connection off this machine fails the test; LiteLLM reads its bundled
model cost map), each test records into its own DuckDB file from a clean slate
(agent_rl_plugin.testing's fixtures)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

os.environ.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import pytest  # noqa: E402

pytest_plugins = ["agent_rl_plugin.testing"]


@pytest.fixture(autouse=True)
def _offline_and_isolated(agent_rl_offline: None, agent_rl_isolated: Path) -> Iterator[None]:
    yield


@pytest.fixture
def db_path(agent_rl_db: Path) -> str:
    return str(agent_rl_db)
