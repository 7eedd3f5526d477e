"""``coordination``: how well a multi-agent run coordinated (rounds, consensus, answer, tokens).

Rounds and consensus are defined in :mod:`agent_rl_plugin.rewards.coordination_metrics`
(``count_rounds``, ``last_round_votes`` and ``consensus`` stay importable from here)."""

from __future__ import annotations

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import check_number, references
from agent_rl_plugin.rewards.builtin.answer_quality import AnswerQuality
from agent_rl_plugin.rewards.coordination_metrics import consensus, count_rounds, last_round_votes
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout, Step

COORDINATION_EVENTS = frozenset(
    {sc.EVENT_TYPE_NEW_ANSWER, sc.EVENT_TYPE_VOTE, sc.EVENT_TYPE_RESTART, sc.EVENT_TYPE_FINAL_ANSWER}
)


def coordination_events(rollout: Rollout) -> list[Step]:
    """The rollout's new_answer / vote / restart / final_answer events, in step order."""
    return [s for s in rollout.events if s.event_type in COORDINATION_EVENTS]


def is_multi_agent(rollout: Rollout) -> bool:
    """Coordination events from two or more distinct agent ids, or ``metadata["multi_agent"]``
    (or the task's) truthy."""
    if rollout.metadata.get("multi_agent") or rollout.task_metadata.get("multi_agent"):
        return True
    return len({s.agent_id for s in coordination_events(rollout) if s.agent_id}) >= 2


class Coordination(RewardPlugin):
    """Scores a multi-agent run: efficiency + consensus + 2 x answer quality - token penalty.

    * **rounds** = max(event round) + 1 when events carry rounds, else restarts + 1;
      **efficiency** = ``round_bonus`` - ``round_penalty`` x (rounds - 1) (0.15 for one round,
      -0.1 for two, -0.85 for five).
    * **consensus**: a ``final_answer`` event exists and strictly more than half of the last
      round's votes (latest vote per agent; last round = highest vote round, or the votes after
      the last restart) target the agent that gave it: + ``consensus_reward`` (1.0), else
      ``no_consensus_reward`` (-0.5).
    * **quality** = ``quality_weight`` (2.0) x the ``answer_quality`` score of the final answer
      (with a reference when the rollout has one; default answer_quality parameters).
    * **token penalty** = min(``max_token_penalty``, ``token_penalty`` x (tokens / ``token_budget``
      - 1)) when the rollout's input + output tokens exceed ``token_budget``, else 0.

    score = efficiency + consensus + quality - token penalty. Calibrated on MassGen's examples,
    with its own answer-quality examples (high 0.8, low 0.2): 2 rounds, quality 0.8, consensus:
    -0.1 + 1 + 1.6 = 2.5; 5 rounds, quality 0.2, no consensus: -0.85 - 0.5 + 0.4 = -0.95.
    Not applicable (``None``) unless the rollout has
    coordination events (new_answer, vote, restart, final_answer) from two or more distinct
    agent ids, or ``metadata["multi_agent"]`` (or the task's) is truthy.

    Parameters: ``round_bonus=0.15``, ``round_penalty=0.25``, ``consensus_reward=1.0``, ``no_consensus_reward=-0.5``,
    ``quality_weight=2.0``, ``token_budget=50000`` (``None``: no penalty), ``token_penalty=0.5``,
    ``max_token_penalty=1.0``.
    """

    name = "coordination"
    version = "1"
    weight = 1.0
    description = "Multi-agent coordination: fewer rounds, consensus, 2x answer quality, token budget."

    def __init__(
        self,
        round_bonus: float = 0.15,
        round_penalty: float = 0.25,
        consensus_reward: float = 1.0,
        no_consensus_reward: float = -0.5,
        quality_weight: float = 2.0,
        token_budget: int | None = 50_000,
        token_penalty: float = 0.5,
        max_token_penalty: float = 1.0,
        weight: float | None = None,
    ) -> None:
        check_number(self.name, "round_bonus", round_bonus)
        check_number(self.name, "round_penalty", round_penalty, minimum=0)
        check_number(self.name, "consensus_reward", consensus_reward)
        check_number(self.name, "no_consensus_reward", no_consensus_reward)
        check_number(self.name, "quality_weight", quality_weight, minimum=0)
        check_number(self.name, "token_budget", token_budget, minimum=0, strict_minimum=True, allow_none=True)
        check_number(self.name, "token_penalty", token_penalty, minimum=0)
        check_number(self.name, "max_token_penalty", max_token_penalty, minimum=0)
        super().__init__(
            weight=weight,
            round_bonus=float(round_bonus),
            round_penalty=float(round_penalty),
            consensus_reward=float(consensus_reward),
            no_consensus_reward=float(no_consensus_reward),
            quality_weight=float(quality_weight),
            token_budget=None if token_budget is None else int(token_budget),
            token_penalty=float(token_penalty),
            max_token_penalty=float(max_token_penalty),
        )
        self._quality = AnswerQuality()

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        if not is_multi_agent(rollout):
            return None
        p = self.params
        events = coordination_events(rollout)
        rounds = count_rounds(events)
        efficiency = p["round_bonus"] - p["round_penalty"] * (rounds - 1)
        reached, facts = consensus(events)
        consensus_part = p["consensus_reward"] if reached else p["no_consensus_reward"]
        answer_quality = self._quality.evaluate_text(rollout.final_output, references(rollout))["score"]
        quality_part = p["quality_weight"] * answer_quality
        tokens = rollout.total_tokens
        budget = p["token_budget"]
        over = 0.0 if budget is None or tokens <= budget else tokens / budget - 1
        token_part = min(p["max_token_penalty"], p["token_penalty"] * over)
        total = efficiency + consensus_part + quality_part - token_part
        agents = sorted({s.agent_id for s in events if s.agent_id})
        return EvaluateResult(
            score=total,
            reason=(
                f"{rounds} round(s), consensus {'reached' if reached else 'not reached'}, "
                f"answer quality {answer_quality:.2f}, token penalty {token_part:.2f}"
            ),
            metrics={
                "rounds": rounds,
                "efficiency": efficiency,
                "consensus": reached,
                "consensus_part": consensus_part,
                "answer_quality": answer_quality,
                "quality_part": quality_part,
                "tokens": tokens,
                "token_penalty": token_part,
                "n_agents": len(agents),
                "n_events": len(events),
                **facts,
            },
        )


__all__ = [
    "COORDINATION_EVENTS",
    "Coordination",
    "consensus",
    "coordination_events",
    "count_rounds",
    "is_multi_agent",
    "last_round_votes",
]
