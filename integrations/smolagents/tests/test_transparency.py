"""Recording never changes what smolagents does: the same script with and without the
integration gives the same final answer, the same memory (observations, errors) and the model is
sent the same messages."""

from __future__ import annotations

from smolagents import CodeAgent, ToolCallingAgent

import agent_rl_plugin as arl
import agent_rl_smolagents as ars
from fakes import Lookup, ScriptedModel, code_script, tool_calling_script

VOLATILE = {"timing", "start_time", "end_time", "duration"}


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _run(agent_class, script, record: bool):
    from fakes import divide

    model = ScriptedModel(script)
    agent = agent_class(tools=[divide, Lookup()], model=model, verbosity_level=0)
    if record:
        ars.instrument_agent(agent)
    output = agent.run("What is 6/3?")
    memory = _plain([step.dict() for step in agent.memory.steps])
    if record:
        ars.uninstrument_smolagents(agent)
    return output, memory, model.received


def test_tool_calling_agent_identical(db_path, store):
    plain = _run(ToolCallingAgent, tool_calling_script(), record=False)
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    recorded = _run(ToolCallingAgent, tool_calling_script(), record=True)
    assert recorded[0] == plain[0] == "6/3 = 2.0"
    assert recorded[1] == plain[1]
    assert recorded[2] == plain[2]
    assert store.rows("select count(*) as n from tool_calls")[0]["n"] == 4


def test_code_agent_identical(db_path, store):
    plain = _run(CodeAgent, code_script(), record=False)
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    recorded = _run(CodeAgent, code_script(), record=True)
    assert recorded[0] == plain[0] == "6/3 = 2.0"
    assert recorded[1] == plain[1]
    assert recorded[2] == plain[2]
    assert store.rows("select count(*) as n from tool_calls")[0]["n"] == 6


def test_streamed_steps_identical(db_path, store):
    def steps(record):
        from fakes import divide

        agent = ToolCallingAgent(tools=[divide, Lookup()], model=ScriptedModel(tool_calling_script()), verbosity_level=0)
        if record:
            ars.instrument_agent(agent)
        items = list(agent.run("What is 6/3?", stream=True))
        # Parallel tool calls complete in thread order (with or without recording), so only the
        # steps themselves are compared, with the final answer.
        kinds = [type(s).__name__ for s in items if type(s).__name__ in ("ActionStep", "FinalAnswerStep")]
        return kinds, items[-1].output

    plain = steps(False)
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    assert steps(True) == plain == (plain[0], "6/3 = 2.0")
