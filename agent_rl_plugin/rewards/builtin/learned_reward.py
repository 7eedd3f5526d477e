"""``learned_reward``: a logistic regression fitted on human labels, scoring the other rollouts."""

from __future__ import annotations

import hashlib
import math
from typing import Any, Sequence

import numpy as np

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.rewards.base import RewardPlugin, ScoringContext
from agent_rl_plugin.rewards.builtin._util import check_number
from agent_rl_plugin.rewards.builtin.answer_quality import quality
from agent_rl_plugin.rewards.builtin.tool_success import ToolSuccess
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

#: The ``where`` condition ``prepare`` loads training rollouts with.
LABELLED_WHERE = "rollout_id in (select rollout_id from labels where step_index is null and label in ('good','bad'))"
#: Feature names, in the model's column order (see :func:`features`).
FEATURES = (
    "n_steps",
    "n_llm_calls",
    "n_tool_calls",
    "tool_error_rate",
    "tool_empty_rate",
    "log_tokens",
    "log_duration_s",
    "log_answer_chars",
    "emitted_reward_mean",
    "answer_structure",
    "answer_depth",
    "status_error",
)
_TOOLS = ToolSuccess()


class NotEnoughLabels(AgentRLError, ValueError):
    """Too few labelled rollouts, or only one class, to fit the model."""


def features(rollout: Rollout) -> list[float]:
    """The feature vector of a rollout, in :data:`FEATURES` order."""
    calls = rollout.tool_calls
    outcomes = [_TOOLS.classify(step)[0] for step in calls]
    answer = rollout.final_output or ""
    parts = quality(answer)
    emitted = list(rollout.emitted_rewards.values())
    return [
        float(len(rollout.steps)),
        float(len(rollout.llm_calls)),
        float(len(calls)),
        outcomes.count("error") / len(calls) if calls else 0.0,
        outcomes.count("empty") / len(calls) if calls else 0.0,
        math.log1p(rollout.total_tokens),
        math.log1p(max(0.0, (rollout.duration_ms or 0.0) / 1000.0)),
        math.log1p(len(answer)),
        float(np.mean(emitted)) if emitted else 0.0,
        float(parts["structure"]),
        float(parts["depth"]),
        1.0 if rollout.status == "error" else 0.0,
    ]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, max_iter: int = 100) -> np.ndarray:
    """Weights (intercept first) of an L2-regularised logistic regression by Newton's method.

    Minimises sum(log-loss) + l2 / 2 * ||w||^2 (the intercept is not penalised). Deterministic.
    """
    design = np.hstack([np.ones((x.shape[0], 1)), x])
    penalty = np.full(design.shape[1], l2)
    penalty[0] = 0.0
    w = np.zeros(design.shape[1])
    for _ in range(max_iter):
        p = _sigmoid(design @ w)
        gradient = design.T @ (p - y) + penalty * w
        hessian = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return w


class LearnedReward(RewardPlugin):
    """Predicted probability that a human would label the rollout good (0..1).

    A logistic regression (numpy: standardised features, L2 penalty ``l2`` on the weights,
    Newton's method from zero weights, so deterministic) over these features of a rollout:
    number of steps, LLM calls and tool calls; tool error rate and empty-result rate (as
    ``tool_success`` classifies calls; 0 without calls); log(1 + total tokens); log(1 + duration
    in seconds); log(1 + answer characters); mean of the rewards the agent emitted (0 if none);
    the ``answer_quality`` structure and depth parts of the final answer (no reference); 1 if
    the rollout's status is error. Features are standardised with the training mean and
    standard deviation (a constant feature is left centred).

    In ``agent-rl score``, :meth:`prepare` fits the model on the rollouts whose latest label is
    good (1) or bad (0) (``context.load_rollouts(where="rollout_id in (select rollout_id from
    labels where label in ('good','bad'))")``); without a database, call :meth:`fit`. Every
    rollout scored gets the predicted probability (labelled ones too: ``metrics["labelled"]``
    tells them apart). With fewer than ``min_labels`` labelled rollouts or a single class, every
    rollout gets an error result saying how many more labels are needed. The fitted weights are
    part of :meth:`fingerprint`, so new labels lead to new scores.

    Parameters: ``min_labels=8``, ``l2=1.0``.
    """

    uses_labels = True  # its metrics mark the labelled rollouts
    run_by_default = False  # needs labels first: `agent-rl score --plugin learned_reward`
    name = "learned_reward"
    version = "1"
    weight = 1.0
    description = "Logistic regression on human labels: predicted probability of a good label."

    def __init__(self, min_labels: int = 8, l2: float = 1.0, weight: float | None = None) -> None:
        check_number(self.name, "min_labels", min_labels, minimum=2)
        check_number(self.name, "l2", l2, minimum=0, strict_minimum=True)
        super().__init__(weight=weight, min_labels=int(min_labels), l2=float(l2))
        self._weights: np.ndarray | None = None
        self._mean: np.ndarray | None = None
        self._std: np.ndarray | None = None
        self.n_train = 0
        self.why_unfitted = self._needs_more(0, 0, 0)

    def _needs_more(self, n: int, good: int, bad: int) -> str:
        return (
            f"learned_reward needs at least {self.params['min_labels']} labelled rollouts of both classes; "
            f"label more with `agent-rl label` (found {n}: {good} good, {bad} bad)"
        )

    @property
    def fitted(self) -> bool:
        return self._weights is not None

    def fit(self, rollouts: Sequence[Rollout], labels: Sequence[float | bool]) -> LearnedReward:
        """Fit on ``rollouts`` with ``labels`` (1/True = good, 0/False = bad); returns ``self``.

        Raises :class:`NotEnoughLabels` with fewer than ``min_labels`` rollouts or one class,
        ``ValueError`` when the lengths differ or a label is not 0/1."""
        if len(rollouts) != len(labels):
            raise ValueError(f"learned_reward.fit: {len(rollouts)} rollouts but {len(labels)} labels")
        y = np.array([float(v) for v in labels], dtype=float)
        if not np.all(np.isin(y, (0.0, 1.0))):
            raise ValueError("learned_reward.fit: labels must be 1/True (good) or 0/False (bad)")
        good = int(y.sum())
        bad = len(y) - good
        if len(y) < self.params["min_labels"] or good == 0 or bad == 0:
            self._weights = None
            self.why_unfitted = self._needs_more(len(y), good, bad)
            raise NotEnoughLabels(self.why_unfitted)
        x = np.array([features(r) for r in rollouts], dtype=float)
        self._mean = x.mean(axis=0)
        std = x.std(axis=0)
        self._std = np.where(std > 1e-12, std, 1.0)
        self._weights = fit_logistic((x - self._mean) / self._std, y, self.params["l2"])
        self.n_train = len(y)
        self.why_unfitted = ""
        return self

    def predict_proba(self, rollouts: Sequence[Rollout]) -> np.ndarray:
        """Predicted probability of a good label for each rollout (needs a fitted model)."""
        if self._weights is None:
            raise NotEnoughLabels(self.why_unfitted)
        x = (
            np.array([features(r) for r in rollouts], dtype=float).reshape(len(rollouts), len(FEATURES)) - self._mean
        ) / self._std
        return _sigmoid(self._weights[0] + x @ self._weights[1:])

    def coefficients(self) -> dict[str, float]:
        """Standardised weight per feature (and the intercept), for inspection."""
        if self._weights is None:
            return {}
        return {"intercept": float(self._weights[0]), **{n: float(w) for n, w in zip(FEATURES, self._weights[1:])}}

    def prepare(self, context: ScoringContext) -> None:
        rollouts = [
            r
            for r in context.load_rollouts(where=LABELLED_WHERE)
            if r.label in ("good", "bad") and r.label_value is not None
        ]
        try:
            self.fit(rollouts, [1.0 if (r.label_value or 0.0) >= 0.5 else 0.0 for r in rollouts])
        except NotEnoughLabels:
            pass  # why_unfitted says why; score() reports it on every rollout

    def fingerprint(self) -> str:
        base = super().fingerprint()
        if self._weights is None:
            return base
        model = hashlib.sha256(np.concatenate([self._weights, self._mean, self._std]).round(12).tobytes()).hexdigest()
        return hashlib.sha256(f"{base}:{model}".encode()).hexdigest()[:16]

    def score(self, rollout: Rollout) -> EvaluateResult:
        if self._weights is None:
            return EvaluateResult(error=self.why_unfitted)
        probability = float(self.predict_proba([rollout])[0])
        values: dict[str, Any] = dict(zip(FEATURES, features(rollout)))
        return EvaluateResult(
            score=probability,
            reason=f"predicted probability of a good label {probability:.2f} (fitted on {self.n_train} labelled rollouts)",
            metrics={
                "probability": probability,
                "n_train": self.n_train,
                "labelled": rollout.label in ("good", "bad"),
                **values,
            },
        )
