"""Reward plugins: score stored rollouts into auditable rows of the ``rewards`` table.

Public API::

    from agent_rl_plugin.rewards import RewardPlugin, reward, EvaluateResult, StepOutput, Rollout

    @reward(name="short_answer", version="1")
    def short_answer(rollout: Rollout) -> float:
        return 1.0 if len(rollout.final_output or "") < 200 else 0.0

See ``docs/authoring-rewards.md``.
"""

from agent_rl_plugin.rewards.base import FunctionReward, RewardPlugin, ScoringContext, reward
from agent_rl_plugin.rewards.result import EvaluateResult, RewardContractError, StepOutput, coerce_result
from agent_rl_plugin.rewards.rollout import Rollout, Step, load_rollouts

__all__ = [
    "EvaluateResult",
    "FunctionReward",
    "RewardContractError",
    "RewardPlugin",
    "ScoringContext",
    "Rollout",
    "Step",
    "StepOutput",
    "coerce_result",
    "load_rollouts",
    "reward",
]
