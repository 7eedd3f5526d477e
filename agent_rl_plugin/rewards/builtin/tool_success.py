"""``tool_success``: did the agent's tool calls work? One step reward per tool call."""

from __future__ import annotations

from typing import Any

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import check_number
from agent_rl_plugin.rewards.result import EvaluateResult, StepOutput
from agent_rl_plugin.rewards.rollout import Rollout, Step

#: Prefixes of a text result that reports a failure (``detect_error_results``).
ERROR_PREFIXES = ("error:", "exception:", "traceback (most recent call last)")


def is_empty(value: Any) -> bool:
    """``None``, a blank string, or an empty list/dict/tuple/set."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, dict, tuple, set)):
        return len(value) == 0
    return False


def error_in_result(value: Any) -> str | None:
    """Why a tool *result* reports a failure, or ``None``: a dict with a truthy ``error`` key or
    ``isError``/``is_error`` true (MCP style), or a text starting with ``Error:``,
    ``Exception:`` or ``Traceback (most recent call last)``."""
    if isinstance(value, dict):
        if value.get("error"):
            return f"result has error: {str(value['error'])[:120]}"
        if value.get("isError") is True or value.get("is_error") is True:
            return "result is marked isError"
    if isinstance(value, str) and value.lstrip().lower().startswith(ERROR_PREFIXES):
        return f"result reports an error: {value.strip()[:120]}"
    return None


class ToolSuccess(RewardPlugin):
    """Rewards each tool call: success +1, error or exception -1, empty result -0.5.

    A tool step is an **error** when its span failed (``status == "error"`` or an ``error`` is
    recorded, i.e. the tool raised) or, with ``detect_error_results`` (default), when its result
    reports a failure (a dict with a truthy ``error`` key or ``isError: true``; a text starting
    with ``Error:``, ``Exception:`` or ``Traceback (most recent call last)``). Otherwise it is
    **empty** when the result is ``None``, a blank string, ``[]`` or ``{}`` (note: rollouts
    recorded with ``capture_content=False`` have no results, so every call reads as empty), and
    a **success** otherwise. Each tool step gets a ``StepOutput`` at its step index; the episode
    score is the mean of the step rewards. Not applicable (``None``) without tool calls.

    Parameters: ``success_reward=1.0``, ``error_reward=-1.0``, ``empty_reward=-0.5``,
    ``detect_error_results=True``.
    """

    name = "tool_success"
    version = "1"
    weight = 1.0
    description = "Per tool call: +1 success, -1 error, -0.5 empty result; episode = mean."

    def __init__(
        self,
        success_reward: float = 1.0,
        error_reward: float = -1.0,
        empty_reward: float = -0.5,
        detect_error_results: bool = True,
        weight: float | None = None,
    ) -> None:
        for param, value in (
            ("success_reward", success_reward),
            ("error_reward", error_reward),
            ("empty_reward", empty_reward),
        ):
            check_number(self.name, param, value)
        if not isinstance(detect_error_results, bool):
            raise ValueError(f"{self.name}: parameter detect_error_results must be true or false")
        super().__init__(
            weight=weight,
            success_reward=float(success_reward),
            error_reward=float(error_reward),
            empty_reward=float(empty_reward),
            detect_error_results=detect_error_results,
        )

    def classify(self, step: Step) -> tuple[str, str]:
        """``("success" | "error" | "empty", reason)`` for one tool step."""
        if step.is_error or step.error:
            return "error", f"tool {step.name or '?'} failed: {(step.error or 'error status')[:120]}"
        if self.params["detect_error_results"]:
            why = error_in_result(step.result)
            if why:
                return "error", f"tool {step.name or '?'} {why}"
        if is_empty(step.result):
            return "empty", f"tool {step.name or '?'} returned an empty result"
        return "success", f"tool {step.name or '?'} succeeded"

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        calls = rollout.tool_calls
        if not calls:
            return None
        rewards = {
            "success": self.params["success_reward"],
            "error": self.params["error_reward"],
            "empty": self.params["empty_reward"],
        }
        counts = {"success": 0, "error": 0, "empty": 0}
        outputs = []
        for step in calls:
            outcome, why = self.classify(step)
            counts[outcome] += 1
            outputs.append(
                StepOutput(
                    step_index=step.index,
                    base_reward=rewards[outcome],
                    reason=why,
                    metrics={"outcome": outcome, "tool": step.name},
                )
            )
        mean = sum(o.base_reward for o in outputs) / len(outputs)
        return EvaluateResult(
            score=mean,
            reason=f"{len(calls)} tool calls: {counts['success']} succeeded, {counts['error']} failed, {counts['empty']} empty",
            metrics={
                "n_tool_calls": len(calls),
                "n_success": counts["success"],
                "n_error": counts["error"],
                "n_empty": counts["empty"],
            },
            step_outputs=outputs,
        )
