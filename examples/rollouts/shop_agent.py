"""An example agent for ``agent-rl rollouts run``: the demo's shopping calculator.

Run it from this folder::

    agent-rl rollouts run shop_agent:run --tasks tasks.jsonl --group-size 4 --db shop.duckdb
    agent-rl score --db shop.duckdb

``run(task)`` receives the task dict (task_id, prompt, ground_truth, metadata, sample_index,
seed). It rebuilds the demo task from ``metadata["quantities"]``, streams the traced demo agent's
answer (its LLM turns and tool calls become steps of the rollout) and returns the text; the
``task_completion``/``answer_quality`` rewards later compare it with the ground truth.
``run_sync`` is the same agent behind a plain function (it runs in a thread).
"""

from __future__ import annotations

import asyncio

from agent_rl_plugin.demo.calculator import ScriptedModel, Task
from agent_rl_plugin.demo.run import TracedCalculatorAgent


async def run(task: dict) -> str:
    quantities = tuple((item, int(n)) for item, n in task["metadata"]["quantities"])
    seed = task["seed"] if task["seed"] is not None else task["sample_index"]
    agent = TracedCalculatorAgent(Task(task["task_id"], quantities), ScriptedModel(seed))
    text = ""
    async for chunk in agent.chat([{"role": "user", "content": task["prompt"]}]):
        if chunk.type == "content":
            text += chunk.content
    return text.strip()


def run_sync(task: dict) -> str:
    return asyncio.run(run(task))
