"""Advantages for RL from stored, scored rollouts: GRPO, RLOO, Dr. GRPO and GiGPO (vectorised).

This layer reads the inputs from the store (DuckDB) and writes advantage runs; the math is the
pure :mod:`agent_rl_plugin.advantages` package, whose functions are re-exported here.

* Episode level (one reward per rollout, relative to its group): :func:`grpo_advantages`
  (TRL 1.16's ``scale_rewards`` meaning), :func:`rloo_advantages`, :func:`dr_grpo_advantages`.
* Step level: :func:`gigpo_advantages` (and :func:`compute_gigpo` for the parts), over a steps
  table built from the store by :func:`steps_for_gigpo`, with state keys from the
  ``agent_rl_state_key`` hook (default: :func:`default_state_key`).
* :func:`compute_advantages` writes a run into the ``advantages`` table
  (``agent-rl advantages compute``); :func:`episode_rewards` is its input for the episode
  methods, read from the ``episode_rewards`` view. All three select rollouts by ``where`` (SQL
  over the ``rollouts`` view), ``rollout_ids`` and ``rollout_run_id`` (a ``run_rollouts`` run),
  combined by AND.

The names backed by the store (DuckDB, pyarrow) are imported on first access: the built-in
plugin :mod:`agent_rl_plugin.rl.state_keys` is loaded when recording starts, and importing it
(which imports this package) must stay light. The formulas and every rule for edge cases are
in ``docs/advantages.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_rl_plugin.lazy import lazy_exports
from agent_rl_plugin.rl.state_keys import default_state_key, observation_key

#: Names imported on first access (their modules import duckdb and pyarrow; the advantage
#: functions are not needed by the state-key plugin that every ``configure()`` registers).
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "GiGPOResult",
            "GroupSummary",
            "compute_gigpo",
            "discounted_returns",
            "dr_grpo_advantages",
            "gigpo_advantages",
            "group_summary",
            "grpo_advantages",
            "rloo_advantages",
        ),
        "agent_rl_plugin.advantages",
    ),
    "METHODS": "agent_rl_plugin.rl.runs",
    "AdvantageRun": "agent_rl_plugin.rl.runs",
    "compute_advantages": "agent_rl_plugin.rl.runs",
    "AdvantageInputError": "agent_rl_plugin.rl.store",
    "episode_rewards": "agent_rl_plugin.rl.store",
    "steps_for_gigpo": "agent_rl_plugin.rl.store",
    "table_report": "agent_rl_plugin.rl.store",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


if TYPE_CHECKING:  # pragma: no cover - static names for type checkers and IDEs
    from agent_rl_plugin.advantages import (
        GiGPOResult,
        GroupSummary,
        compute_gigpo,
        discounted_returns,
        dr_grpo_advantages,
        gigpo_advantages,
        group_summary,
        grpo_advantages,
        rloo_advantages,
    )
    from agent_rl_plugin.rl.runs import METHODS, AdvantageRun, compute_advantages
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
