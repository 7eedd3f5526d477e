"""Recording never changes what pydantic-ai does: the same scripted run with and without the
integration gives the same output, the same messages, and the model is sent the same things."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.test import TestModel

import agent_rl_plugin as arl
from agent_rl_pydantic_ai import instrumentation
from scripts import calculator_agent, calculator_script, crashing_agent

#: Fields that differ between any two runs, recorded or not (clock, fresh ids).
VOLATILE = {"timestamp", "run_id", "conversation_id"}


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _messages(messages) -> list:
    return _plain(ModelMessagesTypeAdapter.dump_python(messages, mode="json"))


def _run_calculator():
    model, seen = calculator_script()
    result = calculator_agent(model).run_sync("What is 6/3?")
    return result.output, _messages(result.all_messages()), [_messages(m) for m in seen], result.usage


def test_same_output_messages_and_model_inputs(db_path, store):
    assert instrumentation.installed() is None and Agent._instrument_default is False
    plain = _run_calculator()
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    assert instrumentation.installed() is not None
    recorded = _run_calculator()
    assert recorded[0] == plain[0] == "6/3 = 2"
    assert recorded[1] == plain[1]
    assert recorded[2] == plain[2]  # the model was asked exactly the same things
    assert recorded[3] == plain[3]  # and the usage pydantic-ai reports is the same
    assert store.rows("select count(*) as n from llm_calls")[0]["n"] == 3  # and it was recorded


def test_same_stream_and_same_exception(db_path, store):
    def stream():
        agent = Agent(TestModel(custom_output_text="one two three"), name="s")

        async def go():
            async with agent.run_stream("hi") as run:
                return [c async for c in run.stream_text(delta=True)]

        return asyncio.run(go())

    def crash():
        try:
            crashing_agent().run_sync("go")
        except Exception as exc:  # noqa: BLE001 - compared below
            return type(exc), str(exc)

    plain = (stream(), crash())
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    assert (stream(), crash()) == plain == (plain[0], (ValueError, "kaput: test"))
    assert store.rows("select count(*) as n from rollouts")[0]["n"] == 2
