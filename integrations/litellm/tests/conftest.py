"""Fixtures: offline (a connection off this machine fails the test; LiteLLM reads its bundled
model cost map), each test records into its own DuckDB file with a fresh plugin manager."""

from __future__ import annotations

import os
import socket
from typing import Any, Iterator

os.environ.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import pytest  # noqa: E402

from agent_rl_plugin import plugins, tracing  # noqa: E402

_LOOPBACK = ("127.", "::1", "localhost")
_connect = socket.socket.connect
_getaddrinfo = socket.getaddrinfo


def _offline_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else str(address)
    if self.family == socket.AF_UNIX or str(host).startswith(_LOOPBACK):
        return _connect(self, address)
    raise AssertionError(f"the litellm tests must run offline: a connection to {address!r} was attempted")


def _offline_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is None or str(host).startswith(_LOOPBACK):
        return _getaddrinfo(host, *args, **kwargs)
    raise AssertionError(f"the litellm tests must run offline: a lookup of {host!r} was attempted")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _offline_connect)
    monkeypatch.setattr(socket, "getaddrinfo", _offline_getaddrinfo)


@pytest.fixture
def db_path(tmp_path) -> Iterator[str]:
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    yield str(tmp_path / "runs.duckdb")
    tracing.shutdown()
    plugins.set_plugin_manager(None)
