"""Running the example agent in groups of rollouts, recorded with one mixin line.

:class:`TracedCalculatorAgent` is the whole integration: ``RLAgentMixin`` mixed into the
existing :class:`~agent_rl_plugin.demo.calculator.CalculatorAgent`, naming its tool methods.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable

from agent_rl_plugin.demo.calculator import CalculatorAgent, ScriptedModel, Task, final_answer
from agent_rl_plugin.instrumentation import RLAgentMixin, current_rollout, emit_reward, record_event, rollout


class TracedCalculatorAgent(RLAgentMixin, CalculatorAgent):
    """The existing agent, recorded: its ``chat`` runs and its two tools become spans."""

    rl_tool_methods = ("lookup", "calculate")


@dataclass
class RolloutResult:
    rollout_id: str
    task_id: str
    group_id: str
    answer: float | None
    expected: float
    correct: bool


async def run_one(task: Task, seed: int, group_id: str) -> RolloutResult:
    """One rollout of ``task``: stream the agent's answer, then reward it against the truth."""
    metadata = {"question": task.question, "ground_truth": task.answer, "seed": seed}
    async with rollout(task_id=task.task_id, group_id=group_id, metadata=metadata):
        agent = TracedCalculatorAgent(task, ScriptedModel(seed))
        text = ""
        async for chunk in agent.chat([{"role": "user", "content": task.question}]):
            if chunk.type == "content":
                text += chunk.content
        answer = final_answer(text)
        record_event("final_answer", agent_id=agent.agent_id, content=text.strip())
        correct = answer is not None and abs(answer - task.answer) < 1e-6
        emit_reward(1.0 if correct else 0.0, name="correct", reason=f"answered {answer}, expected {task.answer}")
        info = current_rollout()
        assert info is not None
        return RolloutResult(info.rollout_id, task.task_id, group_id, answer, task.answer, correct)


async def run_groups(
    tasks: list[Task],
    group_size: int,
    seed: int = 0,
    on_done: Callable[[RolloutResult], None] | None = None,
    concurrency: int = 16,
) -> list[RolloutResult]:
    """``group_size`` rollouts of every task, concurrently; one GRPO group per task."""
    limit = asyncio.Semaphore(concurrency)

    async def guarded(task: Task, index: int) -> RolloutResult:
        async with limit:
            result = await run_one(task, seed * 10_000 + hash_index(task.task_id, index), f"{task.task_id}/g{seed}")
        if on_done is not None:
            on_done(result)
        return result

    jobs = [guarded(task, i) for task in tasks for i in range(group_size)]
    return list(await asyncio.gather(*jobs))


def hash_index(task_id: str, index: int) -> int:
    """A stable per-rollout seed (Python's hash() of str changes between processes)."""
    return sum(ord(c) * 31**i for i, c in enumerate(task_id)) % 9_973 * 100 + index
