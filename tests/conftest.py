"""Shared fixtures: a fresh plugin manager and runtime per test, and two ways to see spans.

* ``span_exporter``: configure recording with no database and an in-memory exporter; call
  ``arl.flush()`` then ``span_exporter.get_finished_spans()``.
* ``db_path``: configure recording into a DuckDB file under ``tmp_path``; call ``arl.flush()``
  before reading it.

Both build a new plugin manager (no entry points, so an installed plugin cannot leak in) and
shut the runtime down afterwards, so no test sees another's exporters.
"""

from __future__ import annotations

# The fixtures users get for testing their own recorded agents (agent_rl_isolated, agent_rl_db,
# agent_rl_store); registered before anything imports the module so pytest can rewrite it.
# ci_skip_policy (tests/ci_skip_policy.py): with AGENT_RL_FAIL_ON_SKIP=1 (CI) a skip that is not
# allow-listed fails the run.
pytest_plugins = ["agent_rl_plugin.testing", "ci_skip_policy", "demo_tour"]

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_rl_plugin import plugins, tracing
from agent_rl_plugin.hookspecs import hookimpl

os.environ.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")
# Receivers started by tests announce their port entries here, not in the user's cache folder.
if "AGENT_RL_RUNTIME_DIR" not in os.environ:
    os.environ["AGENT_RL_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="agent-rl-test-runtime-")
    atexit.register(shutil.rmtree, os.environ["AGENT_RL_RUNTIME_DIR"], True)


# Spool merges of writers made in this process run in this process (the fallback mode): a merger
# child for every test that records would cost the suite minutes. Subprocesses (the README, exit
# paths, several agents on one file) get the default, a merger child; its own tests ask for it.
from agent_rl_plugin.store import spool_writer as _spool_writer  # noqa: E402

_spool_writer.DEFAULT_MERGER_MODE = "thread"

# The command line makes its rich consoles on first use (a piped `agent-rl query` never imports
# rich's console). One made first inside a test that changed COLUMNS would keep that width for
# every test after it, so both are made now, with this process's own environment.
from agent_rl_plugin.cli import common as _cli_common  # noqa: E402

_cli_common.console, _cli_common.err_console  # noqa: B018


class MemoryExporterPlugin:
    """A test plugin that registers one in-memory exporter."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter

    @hookimpl
    def agent_rl_register_exporters(self, register, config):  # noqa: ANN001 - hook signature
        register("memory", self.exporter)


@pytest.fixture
def plugin_manager() -> Iterator:
    """A fresh process-wide plugin manager with the built-ins and no entry points."""
    pm = plugins.new_plugin_manager(load_entry_points=False)
    plugins.set_plugin_manager(pm)
    yield pm
    tracing.shutdown()
    plugins.set_plugin_manager(None)


@pytest.fixture
def span_exporter(plugin_manager) -> InMemorySpanExporter:
    """Recording configured with an in-memory exporter and no database file."""
    exporter = InMemorySpanExporter()
    plugin_manager.register(MemoryExporterPlugin(exporter), name="memory-exporter")
    tracing.configure(db_path=None, export_delay_ms=50)
    return exporter


@pytest.fixture
def db_path(plugin_manager, tmp_path: Path) -> Path:
    """Recording configured into ``tmp_path / "agent_rl.duckdb"``."""
    path = tmp_path / "agent_rl.duckdb"
    tracing.configure(db_path=str(path), export_delay_ms=50)
    return path
