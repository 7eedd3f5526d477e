"""``RLConfig`` with the switches MassGen's RL design named.

:class:`RLConfig` is :class:`agent_rl_plugin.RLConfig` (database, OTLP, content capture,
redaction...) plus four switches, with the meanings below. Each can also be set from the
environment (``AGENT_RL_ENABLE_TOOL_REWARDS=1``, ``AGENT_RL_COLLECT_ONLY=1``, ...).

* ``enable_rl`` (core): master switch. ``False``: nothing is recorded and MassGen runs exactly as
  without the plugin (also per instance: ``RLOrchestrator(..., enable_rl=False)``).
* ``enable_tool_rewards``: at the end of each run, emit a ``tool_success`` reward (the built-in
  reward: +1 per successful tool call, -1 per error, -0.5 per empty result; the mean).
* ``enable_answer_quality_rewards``: emit an ``answer_quality`` reward of the final answer.
* ``enable_coordination_rewards``: emit a ``coordination`` reward (rounds, consensus, answer
  quality, tokens) for multi-agent runs.
* ``collect_only``: only collect traces: no reward is computed in-process, whatever the three
  switches above say (score later, over the stored runs, with ``agent-rl score``). Training is
  never started by recording in any case: it is a separate step (``agent-rl train``).

Emitted rewards are computed by the same built-in plugins ``agent-rl score`` runs, over what the
adapter saw during the run, and stored as ``source='emitted'`` rows named after the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from agent_rl_plugin.config import RLConfig as CoreRLConfig

__all__ = ["RLConfig", "RewardSwitches", "switches_for"]


class RLConfig(CoreRLConfig):
    """Core recording settings plus MassGen's reward switches (see the module docstring)."""

    enable_tool_rewards: bool = Field(
        False, description="Emit a tool_success reward at the end of each MassGen run."
    )
    enable_answer_quality_rewards: bool = Field(
        False, description="Emit an answer_quality reward of the final answer of each run."
    )
    enable_coordination_rewards: bool = Field(
        False, description="Emit a coordination reward for each multi-agent run."
    )
    collect_only: bool = Field(
        False,
        description="Only record traces: compute no reward in-process (use `agent-rl score` later).",
    )


@dataclass(frozen=True)
class RewardSwitches:
    """Which rewards a run emits when it ends."""

    tool: bool = False
    answer_quality: bool = False
    coordination: bool = False

    @property
    def any(self) -> bool:
        return self.tool or self.answer_quality or self.coordination


def switches_for(config: Any) -> RewardSwitches:
    """The reward switches in force for ``config`` (a core or MassGen ``RLConfig``, or ``None``).

    ``None`` or a core ``RLConfig`` (which has no such switches): the process-wide configuration
    if it is a MassGen ``RLConfig``, else the ``AGENT_RL_*`` environment.
    """
    if not isinstance(config, RLConfig):
        from agent_rl_plugin.integration import active_config

        current = active_config()
        if isinstance(current, RLConfig):
            config = current
        else:
            try:
                config = RLConfig.from_env()
            except Exception:
                return RewardSwitches()
    if config.collect_only or not config.enable_rl:
        return RewardSwitches()
    return RewardSwitches(
        tool=config.enable_tool_rewards,
        answer_quality=config.enable_answer_quality_rewards,
        coordination=config.enable_coordination_rewards,
    )
