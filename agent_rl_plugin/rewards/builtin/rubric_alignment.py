"""``rubric_alignment``: minus the distance between a generated rubric's and a ground-truth
rubric's scores of the same output (manager-agent-gym's reward for rubric generation)."""

from __future__ import annotations

import math
from typing import Any, Callable

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import callable_name, check_choice
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

DISTANCES = ("squared", "absolute", "euclidean")
RubricFn = Callable[[Rollout], Any]


def _as_vector(value: Any, what: str) -> list[float]:
    """A rubric score (a number or a list of per-criterion numbers) as a list of floats."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ValueError(f"rubric_alignment: {what} rubric score is an empty list")
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
            raise ValueError(
                f"rubric_alignment: {what} rubric score must be a finite number (or a list of them), got {item!r}"
            )
        out.append(float(item))
    return out


class RubricAlignment(RewardPlugin):
    """Reward = minus the distance between two rubric scores of the same output.

    The two scores are a **generated** rubric's (written by the agent being trained, e.g. a
    manager agent decomposing a preference into a rubric) and a **ground-truth** rubric's, both
    applied to the same task output. They come from the callables ``generated_rubric(rollout)``
    and ``ground_truth_rubric(rollout)`` when given (each returns a number, a list of
    per-criterion numbers, or ``None``), else from ``metadata["rubric_scores"]`` (then the
    task's ``task_metadata["rubric_scores"]``) = ``{"generated": x, "ground_truth": y}``.

    With d = generated - ground_truth (element-wise for lists of equal length):
    ``distance="squared"`` (default) gives -sum(d^2) (for numbers: -(x - y)^2, the
    -||S_syn - S_gt||^2 of the design); ``"absolute"`` gives -sum(|d|) (-|x - y|, the L1 variant);
    ``"euclidean"`` gives -sqrt(sum(d^2)). 0 is perfect agreement. Not applicable (``None``)
    when either score is missing. Both scores and the difference are in ``metrics``.

    Parameters: ``distance="squared"``, ``generated_rubric=None``, ``ground_truth_rubric=None``
    (callables; only their names go into the parameters), ``metadata_key="rubric_scores"``.
    """

    name = "rubric_alignment"
    version = "1"
    weight = 1.0
    description = "Minus the (squared) difference between a generated and a ground-truth rubric score."

    def __init__(
        self,
        distance: str = "squared",
        generated_rubric: RubricFn | None = None,
        ground_truth_rubric: RubricFn | None = None,
        metadata_key: str = "rubric_scores",
        weight: float | None = None,
    ) -> None:
        check_choice(self.name, "distance", distance, DISTANCES)
        for param, fn in (("generated_rubric", generated_rubric), ("ground_truth_rubric", ground_truth_rubric)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{self.name}: parameter {param} must be a callable rollout -> float")
        self._generated = generated_rubric
        self._ground_truth = ground_truth_rubric
        super().__init__(
            weight=weight,
            distance=distance,
            generated_rubric=callable_name(generated_rubric),
            ground_truth_rubric=callable_name(ground_truth_rubric),
            metadata_key=metadata_key,
        )

    def _from_metadata(self, rollout: Rollout, which: str) -> Any:
        for source in (rollout.metadata, rollout.task_metadata):
            scores = source.get(self.params["metadata_key"])
            if isinstance(scores, dict) and scores.get(which) is not None:
                return scores[which]
        return None

    def scores(self, rollout: Rollout) -> tuple[Any, Any]:
        """``(generated, ground_truth)`` rubric scores, either possibly ``None``."""
        generated = self._generated(rollout) if self._generated else self._from_metadata(rollout, "generated")
        truth = self._ground_truth(rollout) if self._ground_truth else self._from_metadata(rollout, "ground_truth")
        return generated, truth

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        generated, truth = self.scores(rollout)
        if generated is None or truth is None:
            return None
        g, t = _as_vector(generated, "generated"), _as_vector(truth, "ground-truth")
        if len(g) != len(t):
            raise ValueError(
                f"rubric_alignment: generated ({len(g)}) and ground-truth ({len(t)}) rubric scores differ in length"
            )
        diffs = [a - b for a, b in zip(g, t)]
        distance = self.params["distance"]
        if distance == "squared":
            value = -sum(d * d for d in diffs)
        elif distance == "absolute":
            value = -sum(abs(d) for d in diffs)
        else:
            value = -math.sqrt(sum(d * d for d in diffs))
        scalar = len(diffs) == 1
        return EvaluateResult(
            score=value,
            reason=f"generated {generated}, ground truth {truth}: {distance} distance {-value:.4g}",
            metrics={
                "generated": g[0] if scalar else g,
                "ground_truth": t[0] if scalar else t,
                "difference": diffs[0] if scalar else diffs,
                "distance": distance,
            },
        )
