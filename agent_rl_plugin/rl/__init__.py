"""Advantages for RL from stored, scored rollouts: GRPO, RLOO, Dr. GRPO and GiGPO (vectorised).

* Episode level (one reward per rollout, relative to its group): :func:`grpo_advantages`
  (TRL 1.16's ``scale_rewards`` meaning), :func:`rloo_advantages`, :func:`dr_grpo_advantages`.
* Step level: :func:`gigpo_advantages` (and :func:`compute_gigpo` for the parts), over a steps
  table built from the store by :func:`steps_for_gigpo`, with state keys from the
  ``agent_rl_state_key`` hook (default: :func:`default_state_key`).
* :func:`compute_advantages` writes a run into the ``advantages`` table
  (``agent-rl advantages compute``).

The formulas and every rule for edge cases are in ``docs/advantages.md``.
"""

from __future__ import annotations

from agent_rl_plugin.rl.gigpo import GiGPOResult, compute_gigpo, discounted_returns, gigpo_advantages
from agent_rl_plugin.rl.grpo import GroupSummary, dr_grpo_advantages, group_summary, grpo_advantages, rloo_advantages
from agent_rl_plugin.rl.runs import METHODS, AdvantageRun, compute_advantages
from agent_rl_plugin.rl.state_keys import default_state_key, observation_key
from agent_rl_plugin.rl.store import AdvantageInputError, episode_rewards, steps_for_gigpo, table_report

__all__ = [
    "METHODS",
    "AdvantageInputError",
    "AdvantageRun",
    "GiGPOResult",
    "GroupSummary",
    "compute_advantages",
    "compute_gigpo",
    "default_state_key",
    "discounted_returns",
    "dr_grpo_advantages",
    "episode_rewards",
    "gigpo_advantages",
    "group_summary",
    "grpo_advantages",
    "observation_key",
    "rloo_advantages",
    "steps_for_gigpo",
    "table_report",
]
