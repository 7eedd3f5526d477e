"""Helpers for testing an agent you record (and for this project's integrations' tests).

* :class:`StoreReader`: read a test's DuckDB file through the views, after flushing what the
  agent recorded: ``rows(sql, *params)`` (dicts), ``one(sql, *params)`` (the single value).
* :func:`isolated_recording`: a context in which recording starts from a clean slate (no
  ``AGENT_RL_*`` variables but the autoload switch, a fresh plugin manager without entry points)
  and is shut down afterwards.
* :func:`offline_network`: a context in which a connection or name lookup off this machine
  fails with an ``AssertionError`` naming the address (loopback and Unix sockets still work), so
  a test proves it runs offline.
* :mod:`agent_rl_plugin.testing.llm_server`: a scripted OpenAI / Anthropic API server on
  127.0.0.1, for agents that call an LLM SDK.
* As a pytest plugin (``pytest_plugins = ["agent_rl_plugin.testing"]``) it provides the fixtures
  ``agent_rl_isolated`` (the above, in ``tmp_path`` as the working directory), ``agent_rl_db``
  (a path for the test's database), ``agent_rl_store`` (a :class:`StoreReader` on it) and
  ``agent_rl_offline`` (:func:`offline_network` for the test).

Example::

    def test_my_agent_calls_its_tool(agent_rl_isolated, agent_rl_db, agent_rl_store):
        arl.configure(db=str(agent_rl_db))
        MyTracedAgent().run("2 + 3")
        assert agent_rl_store.one("select count(*) from tool_calls") == 1
"""

from __future__ import annotations

import contextlib
import os
import socket
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


_LOOPBACK = ("127.", "::1", "localhost")


@contextlib.contextmanager
def offline_network() -> Iterator[None]:
    """Inside: ``socket.connect`` and ``socket.getaddrinfo`` to anything but loopback (or a Unix
    socket) raise ``AssertionError("... must run offline: ...")``. Restored on exit."""
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def offline_connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else str(address)
        if self.family == getattr(socket, "AF_UNIX", None) or str(host).startswith(_LOOPBACK):
            return connect(self, address)
        raise AssertionError(f"the test must run offline: a connection to {address!r} was attempted")

    def offline_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is None or str(host).startswith(_LOOPBACK):
            return getaddrinfo(host, *args, **kwargs)
        raise AssertionError(f"the test must run offline: a lookup of {host!r} was attempted")

    socket.socket.connect = offline_connect  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = offline_getaddrinfo
    try:
        yield
    finally:
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.getaddrinfo = getaddrinfo


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

    @pytest.fixture
    def agent_rl_offline() -> Iterator[None]:
        """:func:`offline_network` for the test."""
        with offline_network():
            yield


__all__ = ["KEEP_VARIABLES", "StoreReader", "isolated_recording", "offline_network"]
