"""Episode-level advantages (GRPO, RLOO, Dr. GRPO): the pure functions of
:mod:`agent_rl_plugin.advantages.grpo`, re-exported under their old import path."""

from __future__ import annotations

from agent_rl_plugin.advantages.grpo import (
    SCALES,
    TRL_EPSILON,
    GroupSummary,
    dr_grpo_advantages,
    group_summary,
    grpo_advantages,
    rloo_advantages,
)

__all__ = [
    "SCALES",
    "TRL_EPSILON",
    "GroupSummary",
    "dr_grpo_advantages",
    "group_summary",
    "grpo_advantages",
    "rloo_advantages",
]
