"""``human_label``: the latest human label of a rollout as a reward (good 1.0, bad 0.0)."""

from __future__ import annotations

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout


class HumanLabel(RewardPlugin):
    """Score = the rollout's latest human label value (``agent-rl label``): good 1.0, bad 0.0.

    Uses ``rollout.label_value`` (the ``value`` of the latest ``labels`` row). Not applicable
    (``None``) when the rollout is unlabelled, its latest label is ``skip``, or the label has no
    value. ``metrics`` hold the ``label``. No parameters.
    """

    name = "human_label"
    version = "1"
    weight = 1.0
    source = "human"
    uses_labels = True
    description = "The latest human label: good 1.0, bad 0.0; unlabelled or skip: not applicable."

    def __init__(self, weight: float | None = None) -> None:
        super().__init__(weight=weight)

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        if rollout.label is None or rollout.label == "skip" or rollout.label_value is None:
            return None
        return EvaluateResult(
            score=float(rollout.label_value),
            reason=f"labelled {rollout.label} by a human",
            metrics={"label": rollout.label},
        )
