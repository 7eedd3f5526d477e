"""Reward plugins: score stored rollouts into auditable rows of the ``rewards`` table.

Public API::

    from agent_rl_plugin.rewards import RewardPlugin, reward, EvaluateResult, StepOutput, Rollout

    @reward(name="short_answer", version="1")
    def short_answer(rollout: Rollout) -> float:
        return 1.0 if len(rollout.final_output or "") < 200 else 0.0

Scoring from Python, with a reward defined in the script itself::

    from agent_rl_plugin.rewards import register, score

    register(short_answer)                      # as if a plugin named "script" registered it
    report = score("agent_rl.duckdb", rewards=["short_answer"])
    assert report.ok, report.failures()

See ``docs/authoring-rewards.md`` and ``docs/scoring.md``.
"""

from typing import TYPE_CHECKING, Any

from agent_rl_plugin.rewards.base import FunctionReward, RewardPlugin, ScoringContext, reward
from agent_rl_plugin.rewards.registration import register, unregister
from agent_rl_plugin.rewards.registry import DuplicateRewardError, RewardRegistrationError
from agent_rl_plugin.rewards.result import EvaluateResult, RewardContractError, StepOutput, coerce_result
from agent_rl_plugin.rewards.rollout import Rollout, Step, load_rollouts

if TYPE_CHECKING:
    from agent_rl_plugin.rewards.runner import RewardStats, ScoreReport, ScoringError, UnknownRewardError, score

#: Scoring (DuckDB) is imported on first use: a recording agent registers the built-in rewards
#: without it.
_RUNNER_NAMES = {"RewardStats", "ScoreReport", "ScoringError", "UnknownRewardError", "score"}


def __getattr__(name: str) -> Any:
    if name in _RUNNER_NAMES:
        from agent_rl_plugin.rewards import runner

        value = getattr(runner, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DuplicateRewardError",
    "EvaluateResult",
    "FunctionReward",
    "RewardContractError",
    "RewardPlugin",
    "RewardRegistrationError",
    "RewardStats",
    "Rollout",
    "ScoreReport",
    "ScoringContext",
    "ScoringError",
    "Step",
    "StepOutput",
    "UnknownRewardError",
    "coerce_result",
    "load_rollouts",
    "register",
    "reward",
    "score",
    "unregister",
]
