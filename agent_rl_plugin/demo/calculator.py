"""A small, stochastic, tool-using shopping-calculator agent with ground-truth answers.

It stands for "an agent you already have": :class:`CalculatorAgent` knows nothing about
tracing. Its ``chat(messages)`` is an async generator of :class:`StreamChunk` (as MassGen agents
stream), it decides each turn with a scripted fake model (:class:`ScriptedModel`, seeded, so
groups of rollouts of one task differ), looks prices up with its ``lookup`` tool and computes with
its ``calculate`` tool, which raises on a malformed expression. Each model turn is reported with
:func:`agent_rl_plugin.record_llm_call`, the one line an agent needs to show its LLM calls.

Every task revisits the same observations (the looked-up prices), so step groups for GiGPO are
non-trivial, and the ground truth lets rewards be checked.
"""

from __future__ import annotations

import ast
import asyncio
import operator
import random
from dataclasses import dataclass, field
from typing import AsyncIterator

from agent_rl_plugin.instrumentation import record_llm_call

PRICES: dict[str, float] = {"notebook": 4.0, "pen": 1.5, "apple": 0.5, "coffee": 3.25, "stamp": 1.2}

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


@dataclass
class StreamChunk:
    """One streamed piece of the agent's answer (``type`` is content, tool_calls or done)."""

    type: str
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class Task:
    """A shopping question: buy ``quantities`` of items; the answer is the total price."""

    task_id: str
    quantities: tuple[tuple[str, int], ...]

    @property
    def question(self) -> str:
        items = " and ".join(f"{n} {item}{'s' if n > 1 else ''}" for item, n in self.quantities)
        return f"How much do {items} cost in total?"

    @property
    def answer(self) -> float:
        return round(sum(PRICES[item] * n for item, n in self.quantities), 2)


def demo_tasks(count: int = 4) -> list[Task]:
    """``count`` fixed tasks (the same on every run)."""
    combos = [
        (("notebook", 3), ("pen", 2)),
        (("apple", 6), ("coffee", 1)),
        (("stamp", 5), ("pen", 1)),
        (("coffee", 2), ("notebook", 1)),
        (("apple", 4), ("stamp", 2)),
        (("pen", 3), ("coffee", 3)),
    ]
    return [Task(f"shop-{i}", combos[i % len(combos)]) for i in range(count)]


def safe_eval(expression: str) -> float:
    """Evaluate + - * / over numbers; raises ValueError on anything else."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(f"unsupported expression: {expression!r}")

    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"malformed expression: {expression!r}") from exc
    return walk(tree)


class ScriptedModel:
    """A fake LLM: plays the right move with probability ``skill``, a plausible mistake otherwise."""

    name = "scripted-shopper-1"

    def __init__(self, seed: int, skill: float = 0.75) -> None:
        self.rng = random.Random(seed)
        self.skill = skill

    def good(self) -> bool:
        return self.rng.random() < self.skill

    def expression(self, task: Task, prices: dict[str, float]) -> str:
        terms = [f"{n} * {prices.get(item, 0)}" for item, n in task.quantities]
        if self.good():
            return " + ".join(terms)
        mistake = self.rng.choice(["drop", "syntax", "swap"])
        if mistake == "drop":
            return terms[0]
        if mistake == "syntax":
            return " +* ".join(terms)
        return " - ".join(terms)


class CalculatorAgent:
    """An ordinary async agent: no tracing code in it."""

    def __init__(self, task: Task, model: ScriptedModel, agent_id: str = "shopper") -> None:
        self.task = task
        self.model = model
        self.agent_id = agent_id
        self.prices: dict[str, float] = {}

    async def lookup(self, item: str) -> float:
        """Tool: the price of one item."""
        await asyncio.sleep(0)
        if item not in PRICES:
            raise KeyError(f"no price for {item!r}")
        return PRICES[item]

    async def calculate(self, expression: str) -> float:
        """Tool: evaluate an arithmetic expression."""
        await asyncio.sleep(0)
        return round(safe_eval(expression), 2)

    async def chat(self, messages: list[dict]) -> AsyncIterator[StreamChunk]:
        """Answer the last user message, streaming chunks."""
        history = list(messages)
        for item, _ in self.task.quantities:
            if item in self.prices and not self.model.good():
                continue  # a skilled model does not look a price up twice
            call = {"id": f"lookup-{item}", "name": "lookup", "arguments": {"item": item}}
            record_llm_call(
                self.model.name, history, "", tool_calls=[call], input_tokens=_tokens(history), output_tokens=8
            )
            yield StreamChunk("tool_calls", tool_calls=[call])
            self.prices[item] = await self.lookup(item)
            history.append({"role": "assistant", "content": "", "tool_calls": [call]})
            history.append({"role": "tool", "tool_call_id": call["id"], "content": str(self.prices[item])})
        answer: float | None = None
        for _attempt in range(2):
            expression = self.model.expression(self.task, self.prices)
            call = {"id": f"calc-{_attempt}", "name": "calculate", "arguments": {"expression": expression}}
            record_llm_call(
                self.model.name, history, "", tool_calls=[call], input_tokens=_tokens(history), output_tokens=12
            )
            yield StreamChunk("tool_calls", tool_calls=[call])
            history.append({"role": "assistant", "content": "", "tool_calls": [call]})
            try:
                answer = await self.calculate(expression)
                history.append({"role": "tool", "tool_call_id": call["id"], "content": str(answer)})
                break
            except ValueError as exc:
                history.append({"role": "tool", "tool_call_id": call["id"], "content": f"error: {exc}"})
        text = f"The total is {answer:.2f}." if answer is not None else "I could not compute the total."
        record_llm_call(self.model.name, history, text, input_tokens=_tokens(history), output_tokens=len(text.split()))
        for word in text.split(" "):
            yield StreamChunk("content", content=word + " ")
        yield StreamChunk("done")


def _tokens(messages: list[dict]) -> int:
    return sum(len(str(m.get("content", "")).split()) + 4 for m in messages)


def final_answer(text: str) -> float | None:
    """The number in ``The total is X.``, or None."""
    words = [w.strip(".") for w in text.split()]
    for word in reversed(words):
        try:
            return float(word)
        except ValueError:
            continue
    return None
