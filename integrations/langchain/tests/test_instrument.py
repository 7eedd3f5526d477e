"""``instrument_langchain()``: every run of the process is recorded without passing callbacks,
in threads too, never twice, and ``uninstrument_langchain()`` stops it."""

from __future__ import annotations

import threading

from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser

from agent_rl_langchain import AgentRLCallbackHandler, instrument_langchain, uninstrument_langchain
from agent_rl_langchain.instrument import global_handler
from fakes import ScriptedChatModel


def chain(answer="ok"):
    return ScriptedChatModel(script=[AIMessage(content=answer)]) | StrOutputParser()


def test_instrument_records_without_callbacks(recording, store):
    handler = instrument_langchain(record_chains=False)
    assert global_handler() is handler
    assert chain().invoke("hi") == "ok"
    results = []
    threads = [threading.Thread(target=lambda: results.append(chain().invoke("hi"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * 3
    assert store.one("select count(*) from rollouts") == 4
    uninstrument_langchain()
    chain().invoke("hi")
    assert store.one("select count(*) from rollouts") == 4


def test_explicit_handler_is_not_doubled(recording, store):
    instrument_langchain()
    chain().invoke("hi", config={"callbacks": [AgentRLCallbackHandler()]})
    assert store.one("select count(*) from llm_calls") == 1
    assert store.one("select count(*) from rollouts") == 1


def test_instrument_with_config(db_path, store):
    from agent_rl_plugin import RLConfig

    instrument_langchain(RLConfig(db_path=str(db_path), export_delay_ms=50))
    chain().invoke("hi")
    assert store.one("select count(*) from llm_calls") == 1
