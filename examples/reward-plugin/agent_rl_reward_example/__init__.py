"""Two example rewards for agent-rl, registered through the ``agent_rl_register_rewards`` hook.

* ``example_tool_success`` (pointwise): every tool call is a step reward, 1.0 when it succeeded
  and 0.0 when it raised; the episode reward is the share of successful calls.
* ``example_brevity_rank`` (batch): ranks the rollouts of a group (same ``group_id``) by total
  tokens, fewest first: the best gets 1.0, the worst 0.0, the others evenly in between (ties
  share the better rank).

Settings come from ``agent-rl score --config FILE.toml``::

    [rewards.example_tool_success]
    weight = 0.5
    [rewards.example_brevity_rank]
    weight = 2.0
"""

from __future__ import annotations

from typing import Sequence

from agent_rl_plugin import hookimpl
from agent_rl_plugin.rewards import EvaluateResult, Rollout, RewardPlugin, StepOutput, reward

__version__ = "0.3.0"


@reward(name="example_tool_success", version="1")
def tool_success(rollout: Rollout) -> EvaluateResult | None:
    """Share of tool calls that succeeded; one step reward per tool call."""
    calls = rollout.tool_calls
    if not calls:
        return None  # not applicable: no row is written
    steps = [
        StepOutput(
            step_index=call.index,
            base_reward=0.0 if call.is_error else 1.0,
            reason=f"{call.name} failed: {call.error}" if call.is_error else f"{call.name} succeeded",
        )
        for call in calls
    ]
    ok = sum(s.base_reward for s in steps)
    return EvaluateResult(
        score=ok / len(steps),
        reason=f"{int(ok)} of {len(steps)} tool calls succeeded",
        metrics={"tool_calls": len(steps), "tool_errors": len(steps) - int(ok)},
        step_outputs=steps,
    )


class BrevityRank(RewardPlugin):
    """Ranks a group's rollouts by total tokens: fewest 1.0, most 0.0."""

    name = "example_brevity_rank"
    version = "1"
    mode = "batch"
    source = "code"

    def score_batch(self, rollouts: Sequence[Rollout]) -> list[EvaluateResult]:
        tokens = [r.total_tokens for r in rollouts]
        last = max(1, len(rollouts) - 1)
        results = []
        for mine in tokens:
            rank = sum(other < mine for other in tokens)  # ties share the better rank
            results.append(
                EvaluateResult(
                    score=1.0 - rank / last,
                    reason=f"rank {rank + 1} of {len(rollouts)} by total tokens ({mine})",
                    metrics={"rank": rank + 1, "group_size": len(rollouts), "total_tokens": mine},
                )
            )
        return results


@hookimpl
def agent_rl_register_rewards(register, config):
    """Register both rewards; a class is built with its [rewards.NAME] settings."""
    register(tool_success)
    register(BrevityRank)
