"""The entry point, instrumenting existing agents, undoing it, and switching recording off."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

from smolagents import CodeAgent, ToolCallingAgent

import agent_rl_plugin as arl
import agent_rl_smolagents as ars
from agent_rl_plugin import plugins
from fakes import Lookup, ScriptedModel, code_script, divide, tool_calling_script


def test_entry_point_registered_and_loads_without_smolagents():
    (ep,) = [e for e in entry_points(group="agent_rl_plugin") if e.name == "smolagents"]
    assert ep.value == "agent_rl_smolagents.plugin"
    saved = {k: v for k, v in sys.modules.items() if k == "smolagents" or k.startswith(("smolagents.", "agent_rl_smolagents"))}
    try:
        for name in saved:
            del sys.modules[name]
        ep.load()
        assert "smolagents" not in sys.modules  # loading the plugin never imports the framework
    finally:
        sys.modules.update(saved)
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("smolagents") is not None and "smolagents" not in plugins.load_errors


def test_instrument_existing_agents_and_undo(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    lookup = Lookup()
    code = CodeAgent(tools=[divide, lookup], model=ScriptedModel(code_script()), verbosity_level=0)
    executor = code.python_executor
    ars.instrument_agent(code)
    ars.instrument_agent(code)  # idempotent
    assert code.run("What is 6/3?") == "6/3 = 2.0"
    assert store.rows("select count(*) as n from llm_calls")[0]["n"] == 2
    ars.uninstrument_smolagents(code)
    assert code.python_executor is executor
    for obj in (code, code.model, lookup, divide):
        assert "_agent_rl_smolagents" not in obj.__dict__
    assert "run" not in code.__dict__ and "generate" not in code.model.__dict__ and "forward" not in lookup.__dict__
    assert all(getattr(cb, "__name__", "") != "_on_step" for cbs in code.step_callbacks._callbacks.values() for cb in cbs)


def test_enable_rl_false_records_nothing(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50, enable_rl=False)
    agent = ars.RLToolCallingAgent(tools=[divide, Lookup()], model=ScriptedModel(tool_calling_script()), verbosity_level=0)
    assert agent.run("What is 6/3?") == "6/3 = 2.0"
    quiet = ars.RLToolCallingAgent(tools=[divide], model=ScriptedModel(tool_calling_script()), enable_rl=False)
    assert "run" not in quiet.__dict__
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    assert store.rows("select count(*) as n from spans")[0]["n"] == 0


def test_model_error_is_recorded_and_raised(db_path, store):
    arl.configure(db_path=str(db_path), export_delay_ms=50)
    agent = ars.RLToolCallingAgent(tools=[divide], model=ScriptedModel([]), verbosity_level=0)  # pop from empty list
    try:
        agent.run("hi")
    except Exception as exc:
        raised = type(exc).__name__
    assert raised == "AgentGenerationError"
    (call,) = store.rows("select status, error_type from llm_calls")
    assert call == {"status": "error", "error_type": "IndexError"}
    assert store.rows("select status from rollouts")[0]["status"] == "error"
