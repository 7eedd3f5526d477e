"""agent-rl-massgen: record MassGen agents and orchestrators with agent-rl-plugin.

::

    import agent_rl_massgen as arm
    from massgen.chat_agent import SingleAgent

    agents = {"a": SingleAgent(backend=backend_a, agent_id="a"), "b": ...}
    orchestrator = arm.RLOrchestrator(agents=agents, rl_config=arm.RLConfig(db_path="runs.duckdb"))
    async for chunk in orchestrator.chat([{"role": "user", "content": "..."}]):
        ...

``RLSingleAgent`` / ``RLConfigurableAgent`` / ``RLOrchestrator`` are imported lazily (they
import MassGen); :mod:`agent_rl_massgen.plugin`, the entry point, never imports MassGen.
See docs/integrations/massgen.md.
"""

from __future__ import annotations

from typing import Any

from agent_rl_massgen.config import RLConfig

__version__ = "0.1.0"
MASSGEN_VERSION_TESTED = "0.1.97"

__all__ = [
    "RLConfig",
    "RLSingleAgent",
    "RLConfigurableAgent",
    "RLOrchestrator",
    "MassGenAgentMixin",
    "MassGenOrchestratorMixin",
    "instrument_agent",
    "instrument_orchestrator",
    "uninstrument_massgen",
    "MASSGEN_VERSION_TESTED",
]

_LAZY = {
    "RLSingleAgent": "agent_rl_massgen.classes",
    "RLConfigurableAgent": "agent_rl_massgen.classes",
    "RLOrchestrator": "agent_rl_massgen.classes",
    "MassGenAgentMixin": "agent_rl_massgen.agents",
    "MassGenOrchestratorMixin": "agent_rl_massgen.agents",
    "instrument_agent": "agent_rl_massgen.agents",
    "instrument_orchestrator": "agent_rl_massgen.agents",
    "uninstrument_massgen": "agent_rl_massgen.agents",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'agent_rl_massgen' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
