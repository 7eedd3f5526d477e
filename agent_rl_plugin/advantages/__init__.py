"""Pure advantage math: GRPO, RLOO, Dr. GRPO and GiGPO, vectorised with numpy.

This layer reads no store and loads no plugin: it imports numpy and nothing else outside the
package's core. :mod:`agent_rl_plugin.rl` reads the inputs from DuckDB, writes advantage runs
and re-exports every name here.

* Episode level (one reward per rollout, relative to its group): :func:`grpo_advantages`
  (TRL 1.16's ``scale_rewards`` meaning), :func:`rloo_advantages`, :func:`dr_grpo_advantages`,
  :func:`group_summary`.
* Step level: :func:`gigpo_advantages` and :func:`compute_gigpo` (the parts too), over a steps
  table (pyarrow Table, pandas DataFrame, mapping of columns or list of dicts).
* Failed rollouts: :data:`FailedRollouts` (``exclude``, ``zero_reward``, ``keep``), the one
  policy for rollouts that ended in error, timeout or cancellation, used by advantages and
  datasets (:mod:`agent_rl_plugin.advantages.failed`).

The formulas and every rule for edge cases are in ``docs/advantages.md``.
"""

from __future__ import annotations

from agent_rl_plugin.advantages.failed import (
    DEFAULT_FAILED_ROLLOUTS,
    FAILED_ROLLOUT_POLICIES,
    FailedRollouts,
    FailedRolloutsError,
    check_failed_rollouts,
)
from agent_rl_plugin.advantages.gigpo import (
    BASELINES,
    MODES,
    REQUIRED_COLUMNS,
    GiGPOResult,
    compute_gigpo,
    discounted_returns,
    gigpo_advantages,
)
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
    "BASELINES",
    "DEFAULT_FAILED_ROLLOUTS",
    "FAILED_ROLLOUT_POLICIES",
    "FailedRollouts",
    "FailedRolloutsError",
    "check_failed_rollouts",
    "MODES",
    "REQUIRED_COLUMNS",
    "SCALES",
    "TRL_EPSILON",
    "GiGPOResult",
    "GroupSummary",
    "compute_gigpo",
    "discounted_returns",
    "dr_grpo_advantages",
    "gigpo_advantages",
    "group_summary",
    "grpo_advantages",
    "rloo_advantages",
]
