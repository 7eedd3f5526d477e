"""The entry point, the plugin's hooks, and instrumenting existing MassGen objects."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from importlib.metadata import entry_points

from massgen.chat_agent import SingleAgent
from massgen.orchestrator import Orchestrator

import agent_rl_massgen as arm
from agent_rl_plugin import configure, plugins
from fakes import ScriptedBackend, two_agent_scripts


def test_entry_point_registered_and_loads_without_massgen():
    (ep,) = [e for e in entry_points(group="agent_rl_plugin") if e.name == "massgen"]
    assert ep.value == "agent_rl_massgen.plugin"
    saved = {k: v for k, v in sys.modules.items() if k == "massgen" or k.startswith(("massgen.", "agent_rl_massgen"))}
    try:
        for name in saved:
            del sys.modules[name]
        ep.load()
        assert "massgen" not in sys.modules  # loading the plugin never imports the framework
    finally:
        sys.modules.update(saved)
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("massgen") is not None
    assert "massgen" not in plugins.load_errors


def test_state_key_hook_for_massgen_steps():
    plugin = importlib.import_module("agent_rl_massgen.plugin")
    messages = [{"role": "system", "content": "s"},
                {"role": "user", "content": "<ORIGINAL MESSAGE> q <END OF ORIGINAL MESSAGE>\n<CURRENT ANSWERS from the agents>..."}]
    key = plugin.agent_rl_state_key({"input": json.dumps(messages)})
    assert key is not None and key.startswith("massgen:")
    assert plugin.agent_rl_state_key({"input": json.dumps([{"role": "user", "content": "plain"}])}) is None


def test_instrument_existing_orchestrator_and_undo(db_path, store):
    configure(db_path=str(db_path), export_delay_ms=50)
    agents = {name: SingleAgent(backend=ScriptedBackend(script), agent_id=name) for name, script in two_agent_scripts().items()}
    orchestrator = Orchestrator(agents=agents)
    tracker = orchestrator.coordination_tracker
    backend = agents["agent_a"].backend
    arm.instrument_orchestrator(orchestrator)
    arm.instrument_orchestrator(orchestrator)  # idempotent

    async def go():
        return [c async for c in orchestrator.chat([{"role": "user", "content": "What is 2+2?"}])]

    asyncio.run(go())
    assert store.rows("select count(*) as n from rollouts")[0]["n"] == 1
    assert store.rows("select count(*) as n from llm_calls")[0]["n"] == 6
    assert store.rows("select count(*) as n from events where event_type = 'final_answer'")[0]["n"] == 1
    arm.uninstrument_massgen(orchestrator)
    for obj in (orchestrator, agents["agent_a"], agents["agent_b"]):
        assert "chat" not in obj.__dict__
    assert "_add_event" not in tracker.__dict__
    assert "stream_with_tools" not in backend.__dict__
