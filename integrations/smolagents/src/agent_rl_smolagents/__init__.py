"""agent-rl-smolagents: record smolagents agents with agent-rl-plugin.

::

    import agent_rl_smolagents as ars
    agent = ars.RLToolCallingAgent(tools=[...], model=model)     # or ars.instrument_agent(agent)
    agent.run("...")

``RLToolCallingAgent`` / ``RLCodeAgent`` / ``SmolagentsMixin`` and the instrument functions are
imported lazily (they import smolagents); :mod:`agent_rl_smolagents.plugin`, the entry point,
never imports smolagents. See docs/integrations/smolagents.md.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
SMOLAGENTS_VERSION_TESTED = "1.26.0"

__all__ = [
    "RLToolCallingAgent",
    "RLCodeAgent",
    "SmolagentsMixin",
    "instrument_agent",
    "instrument_model",
    "instrument_tool",
    "uninstrument_smolagents",
    "SMOLAGENTS_VERSION_TESTED",
]

_LAZY = {
    "RLToolCallingAgent": "agent_rl_smolagents.classes",
    "RLCodeAgent": "agent_rl_smolagents.classes",
    "SmolagentsMixin": "agent_rl_smolagents.classes",
    "instrument_agent": "agent_rl_smolagents.agents",
    "instrument_model": "agent_rl_smolagents.agents",
    "instrument_tool": "agent_rl_smolagents.agents",
    "uninstrument_smolagents": "agent_rl_smolagents.agents",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'agent_rl_smolagents' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
