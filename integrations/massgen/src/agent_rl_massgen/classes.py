"""Ready-made recorded MassGen classes (importing this module imports MassGen)."""

from __future__ import annotations

from massgen.chat_agent import ConfigurableAgent, SingleAgent
from massgen.orchestrator import Orchestrator

from agent_rl_massgen.agents import MassGenAgentMixin, MassGenOrchestratorMixin

__all__ = ["RLSingleAgent", "RLConfigurableAgent", "RLOrchestrator"]


class RLSingleAgent(MassGenAgentMixin, SingleAgent):
    """``massgen.chat_agent.SingleAgent``, recorded. Extra keyword arguments: ``enable_rl``,
    ``rl_config`` (an :class:`agent_rl_massgen.RLConfig`)."""


class RLConfigurableAgent(MassGenAgentMixin, ConfigurableAgent):
    """``massgen.chat_agent.ConfigurableAgent``, recorded."""


class RLOrchestrator(MassGenOrchestratorMixin, Orchestrator):
    """``massgen.orchestrator.Orchestrator``, recorded, with its agents and coordination events."""
