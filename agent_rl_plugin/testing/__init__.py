"""Helpers for testing an agent you record (and for this project's integrations' tests).

* :class:`StoreReader`: read a test's DuckDB file through the views, after flushing what the
  agent recorded: ``rows(sql, *params)`` (dicts), ``one(sql, *params)`` (the single value).
* :func:`isolated_recording`: a context in which recording starts from a clean slate (no
  ``AGENT_RL_*`` variables but the autoload switch, a fresh plugin manager without entry points)
  and is shut down afterwards.
* As a pytest plugin (``pytest_plugins = ["agent_rl_plugin.testing"]``) it provides the fixtures
  ``agent_rl_isolated`` (the above, in ``tmp_path`` as the working directory), ``agent_rl_db``
  (a path for the test's database) and ``agent_rl_store`` (a :class:`StoreReader` on it).

Example::

    def test_my_agent_calls_its_tool(agent_rl_isolated, agent_rl_db, agent_rl_store):
        arl.configure(db=str(agent_rl_db))
        MyTracedAgent().run("2 + 3")
        assert agent_rl_store.one("select count(*) from tool_calls") == 1
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from agent_rl_plugin import plugins, tracing
from agent_rl_plugin.store.connection import open_reader

KEEP_VARIABLES = ("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD",)


class StoreReader:
    """Read-only queries over a store file; each query flushes the recorder first."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        """The rows of ``sql`` as dicts (column name -> value)."""
        if not tracing.flush():
            raise AssertionError("flush() timed out: spans were still being exported")
        connection = open_reader(os.fspath(self.path))
        try:
            cursor = connection.execute(sql, list(params))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
        finally:
            connection.close()

    def one(self, sql: str, *params: Any) -> Any:
        """The single value of a query returning one row of one column."""
        rows = self.rows(sql, *params)
        if len(rows) != 1 or len(rows[0]) != 1:
            raise AssertionError(f"expected one row of one column, got {rows!r}")
        return next(iter(rows[0].values()))


@contextlib.contextmanager
def isolated_recording(environ: Any = None) -> Iterator[None]:
    """Recording from a clean slate: ``AGENT_RL_*`` variables removed (but
    :data:`KEEP_VARIABLES`), a fresh plugin manager without entry points; afterwards recording
    is shut down and the global plugin manager reset. ``environ``: a ``pytest.MonkeyPatch`` to
    restore the variables with (else ``os.environ`` is restored by hand)."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("AGENT_RL_") and k not in KEEP_VARIABLES}
    for name in saved:
        if environ is not None:
            environ.delenv(name)
        else:
            del os.environ[name]
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        yield
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(None)
        if environ is None:
            os.environ.update(saved)


try:  # the pytest plugin part; importing this module never requires pytest
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def agent_rl_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
        """:func:`isolated_recording` with ``tmp_path`` as the working directory; yields it."""
        monkeypatch.chdir(tmp_path)
        with isolated_recording(monkeypatch):
            yield tmp_path

    @pytest.fixture
    def agent_rl_db(tmp_path: Path) -> Path:
        """Where the test's database goes: ``tmp_path / "agent_rl.duckdb"``."""
        return tmp_path / "agent_rl.duckdb"

    @pytest.fixture
    def agent_rl_store(agent_rl_db: Path) -> StoreReader:
        """A :class:`StoreReader` on :func:`agent_rl_db`."""
        return StoreReader(agent_rl_db)


__all__ = ["KEEP_VARIABLES", "StoreReader", "isolated_recording"]
