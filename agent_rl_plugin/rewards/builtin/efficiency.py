"""``efficiency``: tokens, calls and time spent against budgets (0..1)."""

from __future__ import annotations

from typing import Any

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import check_number
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

#: part name -> budget parameter (also the metadata key a task or rollout may set).
BUDGETS = {"tokens": "token_budget", "calls": "call_budget", "time": "time_budget_s"}


def part(budget: float, actual: float) -> float:
    """min(1, budget / actual); 1.0 when nothing was spent."""
    return 1.0 if actual <= 0 else min(1.0, budget / actual)


class Efficiency(RewardPlugin):
    """Scores resource use against budgets: each part = min(1, budget / actual), score = mean.

    Parts: **tokens** (input + output tokens vs ``token_budget``), **calls** (LLM calls + tool
    calls vs ``call_budget``) and **time** (``duration_ms`` / 1000 vs ``time_budget_s``). A part
    whose actual value is 0 scores 1.0. Each budget comes from the parameter, else from the
    rollout's ``metadata`` under the same key (``token_budget``, ``call_budget``,
    ``time_budget_s``), else from the task's metadata; a part without a budget (or, for time,
    without a recorded duration) is left out. Score = mean of the parts present; not applicable
    (``None``) when no part has a budget. Each part, the actual values and the budgets used are
    in ``metrics``.

    Parameters: ``token_budget=None``, ``call_budget=None``, ``time_budget_s=None`` (each > 0).
    """

    name = "efficiency"
    version = "1"
    weight = 0.5
    description = "Tokens, calls and duration against budgets: mean of min(1, budget/actual)."

    def __init__(
        self,
        token_budget: float | None = None,
        call_budget: float | None = None,
        time_budget_s: float | None = None,
        weight: float | None = None,
    ) -> None:
        budgets = {"token_budget": token_budget, "call_budget": call_budget, "time_budget_s": time_budget_s}
        for param, value in budgets.items():
            check_number(self.name, param, value, minimum=0, strict_minimum=True, allow_none=True)
        super().__init__(weight=weight, **budgets)

    def budget(self, rollout: Rollout, param: str) -> float | None:
        """The budget for ``param``: this reward's parameter, else rollout or task metadata."""
        for value in (self.params[param], rollout.metadata.get(param), rollout.task_metadata.get(param)):
            if value is not None:
                return check_number(self.name, f"{param} (metadata)", value, minimum=0, strict_minimum=True)
        return None

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        actual: dict[str, float | None] = {
            "tokens": float(rollout.total_tokens),
            "calls": float(len(rollout.llm_calls) + len(rollout.tool_calls)),
            "time": None if rollout.duration_ms is None else rollout.duration_ms / 1000.0,
        }
        metrics: dict[str, Any] = {"tokens": actual["tokens"], "calls": actual["calls"], "time_s": actual["time"]}
        parts: dict[str, float] = {}
        for key, param in BUDGETS.items():
            budget = self.budget(rollout, param)
            metrics[param] = budget
            used = actual[key]
            if budget is not None and used is not None:
                parts[key] = part(budget, used)
                metrics[f"{key}_part"] = parts[key]
        if not parts:
            return None
        score = sum(parts.values()) / len(parts)
        reason = ", ".join(f"{key} {value:.2f}" for key, value in parts.items())
        return EvaluateResult(score=score, reason=f"mean of {reason}", metrics=metrics)
