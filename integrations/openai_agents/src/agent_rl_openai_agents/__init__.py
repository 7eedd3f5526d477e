"""agent-rl-openai-agents: record OpenAI Agents SDK runs with agent-rl-plugin.

::

    import agent_rl_plugin as arl
    import agent_rl_openai_agents as arl_oa
    from agents import Agent, Runner

    arl.configure(db_path="agents.duckdb")
    arl_oa.instrument()                                  # the SDK's traces -> rollouts
    agent = Agent(name="calc", model=arl_oa.instrument_model(my_model))
    print(Runner.run_sync(agent, "What is 2 + 3?").final_output)

``RLTracingProcessor``, ``instrument``, ``instrument_model``... are imported lazily (they import
the SDK); :mod:`agent_rl_openai_agents.plugin`, the entry point, never imports it.
See docs/integrations/openai-agents.md.
"""

from __future__ import annotations

from typing import Any

from agent_rl_openai_agents.convert import rollout_id_for

__version__ = "0.1.0"
OPENAI_AGENTS_VERSION_TESTED = "0.24.0"

__all__ = [
    "RLTracingProcessor",
    "instrument",
    "uninstrument",
    "installed_processor",
    "RLModel",
    "instrument_model",
    "instrument_agent",
    "rollout_id_for",
    "OPENAI_AGENTS_VERSION_TESTED",
]

_LAZY = {
    "RLTracingProcessor": "agent_rl_openai_agents.processor",
    "instrument": "agent_rl_openai_agents.processor",
    "uninstrument": "agent_rl_openai_agents.processor",
    "installed_processor": "agent_rl_openai_agents.processor",
    "RLModel": "agent_rl_openai_agents.model",
    "instrument_model": "agent_rl_openai_agents.model",
    "instrument_agent": "agent_rl_openai_agents.model",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'agent_rl_openai_agents' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
