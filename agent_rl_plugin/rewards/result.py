"""What a reward returns: :class:`EvaluateResult` with optional per-step :class:`StepOutput`.

The shape is reward-kit's: an episode ``score`` with a ``reason`` and ``metrics``, plus
``step_outputs`` carrying a ``base_reward`` for individual steps (``step_index`` is the 0-based
index of the ``steps`` view). :func:`coerce_result` turns whatever a plugin returned into a
validated :class:`EvaluateResult`, or raises :class:`RewardContractError` naming the plugin.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_rl_plugin.errors import AgentRLError


class RewardContractError(AgentRLError, ValueError):
    """A reward plugin returned something outside its contract (NaN, a string, a bad object)."""


def _finite(value: float | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value}")
    return float(value)


class StepOutput(BaseModel):
    """A reward for one step of a rollout (index into the ``steps`` view, from 0)."""

    model_config = ConfigDict(extra="forbid")

    step_index: int = Field(..., ge=0, description="0-based step_index of the steps view.")
    base_reward: float = Field(..., description="The step's reward (finite).")
    reason: str | None = Field(None, description="Why this step got this reward.")
    metrics: dict[str, Any] = Field(default_factory=dict, description="Extra numbers or facts.")

    @field_validator("base_reward", mode="before")
    @classmethod
    def _check_reward(cls, value: Any) -> Any:
        return _finite(value, "base_reward")


class EvaluateResult(BaseModel):
    """A reward plugin's verdict on one rollout.

    ``score`` is the episode reward (finite); ``None`` together with ``error`` records a failure,
    ``None`` alone means "not applicable" (no row is written). ``step_outputs`` add step rewards.
    """

    model_config = ConfigDict(extra="forbid")

    score: float | None = Field(None, description="Episode reward (finite), or None.")
    reason: str | None = Field(None, description="Why, in a sentence.")
    metrics: dict[str, Any] = Field(default_factory=dict, description="The parts of the score, extra facts.")
    step_outputs: list[StepOutput] = Field(default_factory=list, description="Per-step rewards.")
    error: str | None = Field(None, description="Set when scoring failed.")

    @field_validator("score", mode="before")
    @classmethod
    def _check_score(cls, value: Any) -> Any:
        return _finite(value, "score")

    @property
    def applicable(self) -> bool:
        """False when the plugin declined to score (no score, no steps, no error)."""
        return self.score is not None or bool(self.step_outputs) or self.error is not None


def coerce_result(value: Any, plugin_name: str) -> EvaluateResult:
    """``value`` (a number, ``None``, a dict or an :class:`EvaluateResult`) as a checked result.

    Raises :class:`RewardContractError` naming ``plugin_name`` for NaN/infinite numbers, booleans,
    strings and objects of other types.
    """
    try:
        if value is None:
            return EvaluateResult()
        if isinstance(value, EvaluateResult):
            return EvaluateResult.model_validate(value.model_dump())  # re-run the validators
        if isinstance(value, dict):
            return EvaluateResult.model_validate(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number or EvaluateResult, got {type(value).__name__} {value!r:.80}")
        return EvaluateResult(score=value)
    except (ValueError, ValidationError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise RewardContractError(f"reward {plugin_name!r} returned an invalid result: {detail}") from None
