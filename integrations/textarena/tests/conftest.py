"""Fixtures: the tests run offline (any connection off this machine fails the test), and each
test records into its own DuckDB file with a fresh plugin manager."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")

from agent_rl_plugin import plugins, tracing  # noqa: E402
from agent_rl_plugin.testing import StoreReader  # noqa: E402

_LOOPBACK = ("127.", "::1", "localhost")
_connect = socket.socket.connect


def _offline_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else str(address)
    if self.family == socket.AF_UNIX or str(host).startswith(_LOOPBACK):
        return _connect(self, address)
    raise AssertionError(f"the textarena tests must run offline: a connection to {address!r} was attempted")


_getaddrinfo = socket.getaddrinfo


def _offline_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is None or str(host).startswith(_LOOPBACK):
        return _getaddrinfo(host, *args, **kwargs)
    raise AssertionError(f"the textarena tests must run offline: a lookup of {host!r} was attempted")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _offline_connect)
    monkeypatch.setattr(socket, "getaddrinfo", _offline_getaddrinfo)


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


@pytest.fixture
def store(db_path: Path) -> StoreReader:
    return StoreReader(db_path)
