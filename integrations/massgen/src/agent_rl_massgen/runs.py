"""What one MassGen run saw, kept in memory so rewards can be emitted when it ends.

A run is one top-level ``chat()`` of a recorded orchestrator or agent (the *owner*). Nested
calls (the orchestrator's agents) add to the owner's :class:`RunLog`, found through the current
rollout (:func:`agent_rl_plugin.current_rollout`, which asyncio tasks inherit). Only runs whose
reward switches are on keep a log.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from agent_rl_massgen.config import RewardSwitches

logger = logging.getLogger(__name__)

__all__ = ["RunLog", "current_run", "start_run", "end_run"]


@dataclass
class RunLog:
    """Steps of one run (LLM turns, tool calls, coordination events) in the order seen."""

    switches: RewardSwitches
    steps: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    final_answer: str | None = None
    final_agent: str | None = None
    streamed_text: list[str] = field(default_factory=list)
    prompt: str | None = None

    def add_llm(self, model: str, output: str | None, input_tokens: int | None, output_tokens: int | None) -> None:
        self.steps.append(
            {"kind": "llm", "name": model, "output": output, "input_tokens": input_tokens, "output_tokens": output_tokens}
        )
        self.input_tokens += int(input_tokens or 0)
        self.output_tokens += int(output_tokens or 0)

    def add_tool(self, name: str, arguments: Any, result: Any, error: str | None) -> None:
        self.steps.append(
            {"kind": "tool", "name": name, "input": arguments, "output": result,
             "status": "error" if error else "ok", "error": error}
        )

    def add_event(self, event_type: str, fields: dict[str, Any]) -> None:
        self.steps.append({"kind": "event", "name": event_type, "output": fields})
        if event_type == "final_answer":
            self.final_answer = fields.get("content")
            self.final_agent = fields.get("agent_id")


_RUNS: dict[str, RunLog] = {}
_LOCK = threading.Lock()


def _rollout_id() -> str | None:
    from agent_rl_plugin.integration import current_rollout

    info = current_rollout()
    return info.rollout_id if info is not None else None


def current_run() -> RunLog | None:
    """The log of the run being recorded in the current rollout, if it keeps one."""
    rollout_id = _rollout_id()
    return _RUNS.get(rollout_id) if rollout_id is not None else None


def start_run(switches: RewardSwitches, prompt: str | None) -> str | None:
    """Start a log for the current rollout when it has none and a reward is switched on.

    Returns the key to give :func:`end_run` (``None``: this call does not own a log).
    """
    if not switches.any:
        return None
    rollout_id = _rollout_id()
    if rollout_id is None:
        return None
    with _LOCK:
        if rollout_id in _RUNS:
            return None
        _RUNS[rollout_id] = RunLog(switches=switches, prompt=prompt)
    return rollout_id


def end_run(key: str) -> RunLog | None:
    """Forget the log started by :func:`start_run` and return it."""
    with _LOCK:
        return _RUNS.pop(key, None)


def emit_run_rewards(log: RunLog) -> None:
    """Score ``log`` with the built-in reward plugins its switches name and emit the results.

    Runs inside the owner's span and rollout. Never raises (a failure is logged).
    """
    try:
        from agent_rl_plugin.integration import current_rollout, emit_reward
        from agent_rl_plugin.rewards import EvaluateResult, Rollout, Step
        from agent_rl_plugin.rewards.builtin import AnswerQuality, Coordination, ToolSuccess

        info = current_rollout()
        if info is None:
            return
        steps = [
            Step(
                index=i,
                kind=s["kind"],
                name=s.get("name"),
                input=s.get("input"),
                output=s.get("output"),
                status=s.get("status", "ok"),
                error=s.get("error"),
                input_tokens=s.get("input_tokens"),
                output_tokens=s.get("output_tokens"),
            )
            for i, s in enumerate(log.steps)
        ]
        final = log.final_answer if log.final_answer is not None else "".join(log.streamed_text) or None
        messages = [{"role": "user", "content": log.prompt}] if log.prompt else []
        rollout = Rollout(
            rollout_id=info.rollout_id,
            task_id=info.task_id,
            group_id=info.group_id,
            final_output=final,
            output=final,
            messages=messages,
            steps=steps,
            input_tokens=log.input_tokens,
            output_tokens=log.output_tokens,
            metadata=dict(info.metadata or {}),
        )
        plugins = []
        if log.switches.tool:
            plugins.append(ToolSuccess())
        if log.switches.answer_quality:
            plugins.append(AnswerQuality())
        if log.switches.coordination:
            plugins.append(Coordination())
        for plugin in plugins:
            result = plugin.score(rollout)
            if result is None:
                continue
            if not isinstance(result, EvaluateResult):
                result = EvaluateResult(score=float(result))
            if result.score is None:
                continue
            metrics = {k: v for k, v in (result.metrics or {}).items()}
            metrics["computed_by"] = f"agent_rl_massgen ({plugin.name} v{plugin.version})"
            emit_reward(result.score, name=plugin.name, reason=result.reason, metadata=metrics)
    except Exception:
        logger.warning("agent-rl-massgen: could not emit the run's rewards", exc_info=True)
