"""Fixtures: each test records into its own DuckDB file with a fresh plugin manager holding the
built-ins and this package's plugin, and leaves pydantic-ai's class-wide instrumentation default
as it found it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")

from pydantic_ai import Agent  # noqa: E402

import agent_rl_pydantic_ai.plugin as plugin_module  # noqa: E402
from agent_rl_plugin import plugins, tracing  # noqa: E402
from agent_rl_plugin.testing import StoreReader  # noqa: E402
from agent_rl_pydantic_ai import instrumentation  # noqa: E402


def plugin_manager(load_entry_points: bool = False):
    pm = plugins.new_plugin_manager(load_entry_points=load_entry_points)
    if pm.get_plugin("pydantic_ai") is None:
        pm.register(plugin_module, name="pydantic_ai")
    return pm


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("AGENT_RL_") and name != "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD":
            monkeypatch.delenv(name)
    plugins.set_plugin_manager(plugin_manager())
    Agent.instrument_all(False)
    instrumentation.disable()
    yield
    tracing.shutdown()
    plugins.set_plugin_manager(None)
    instrumentation.disable()
    Agent.instrument_all(False)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent_rl.duckdb"


Store = StoreReader  # flushes, then reads the test's database through the views


@pytest.fixture
def store(db_path: Path) -> Store:
    return Store(db_path)
