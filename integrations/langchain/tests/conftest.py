"""Fixtures: each test records into its own DuckDB file, in its own working directory, with a
fresh plugin manager and no global LangChain handler left behind."""

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
        if name.startswith(("AGENT_RL_", "LANGSMITH_", "LANGCHAIN_")) and name != "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD":
            monkeypatch.delenv(name)
    pm = plugins.new_plugin_manager(load_entry_points=False)
    plugins.set_plugin_manager(pm)
    yield
    from opentelemetry import trace

    from agent_rl_langchain import uninstrument_langchain
    from agent_rl_plugin import current_rollout

    # a run never leaves its span or rollout behind in the caller's context
    assert not trace.get_current_span().get_span_context().is_valid
    assert current_rollout() is None

    uninstrument_langchain()
    tracing.shutdown()
    plugins.set_plugin_manager(None)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent_rl.duckdb"


Store = StoreReader  # flushes, then reads the test's database through the views


@pytest.fixture
def store(db_path: Path) -> Store:
    return Store(db_path)


@pytest.fixture
def recording(db_path: Path) -> Path:
    """Recording configured into the test's database."""
    tracing.configure(db_path=str(db_path), export_delay_ms=50)
    return db_path
