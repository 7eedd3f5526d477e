"""agent_rl_plugin.testing: the helpers a user (and every integration) tests a recorded agent with."""

from __future__ import annotations

import os

import pytest

import agent_rl_plugin as arl
from agent_rl_plugin.testing import StoreReader, isolated_recording


def test_the_fixtures_record_an_agent_and_read_it_back(agent_rl_isolated, agent_rl_db, agent_rl_store):
    assert os.getcwd() == str(agent_rl_isolated)
    arl.configure(db=str(agent_rl_db), export_delay_ms=50)

    @arl.trace_tool(name="add")
    def add(a: int, b: int) -> int:
        return a + b

    @arl.trace_agent(name="calc")
    def calc(question: str) -> int:
        return add(2, 3)

    assert calc("2 + 3") == 5
    assert agent_rl_store.one("select count(*) from tool_calls") == 1
    assert agent_rl_store.rows("select tool_name, result from tool_calls") == [{"tool_name": "add", "result": "5"}]
    with pytest.raises(AssertionError, match="one row of one column"):
        agent_rl_store.one("select tool_name, result from tool_calls")


def test_isolated_recording_clears_agent_rl_variables_and_restores_them(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENT_RL_DB", str(tmp_path / "elsewhere.duckdb"))
    with isolated_recording():
        assert "AGENT_RL_DB" not in os.environ
    assert os.environ["AGENT_RL_DB"] == str(tmp_path / "elsewhere.duckdb")
    assert isinstance(StoreReader(tmp_path / "x.duckdb").path, os.PathLike)


def test_offline_network_blocks_connections_off_this_machine_and_not_loopback():
    import socket

    from agent_rl_plugin.testing import offline_network
    from agent_rl_plugin.testing.llm_server import ScriptedLLMServer

    with ScriptedLLMServer(["hi"]) as server, offline_network():
        port = int(server.base_url.rsplit(":", 1)[1])
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # loopback still works
        with pytest.raises(AssertionError, match="must run offline: a lookup of 'example.com'"):
            socket.getaddrinfo("example.com", 443)
        with pytest.raises(AssertionError, match="must run offline: a connection to"):
            socket.socket().connect(("10.255.255.1", 9))
    assert socket.socket.connect is socket.socket.__dict__["connect"]  # restored
