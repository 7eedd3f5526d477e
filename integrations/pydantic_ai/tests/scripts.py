"""Scripted models (pydantic-ai's own ``FunctionModel`` / ``TestModel``) and the agents the tests
run: no API key, no network."""

from __future__ import annotations

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def calculator_script():
    """A FunctionModel that thinks and divides by zero (the tool asks for a retry), then calls
    two tools at once (one fails with a retry), then answers. Records what it was sent."""
    seen: list[list] = []

    def script(messages, info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        turn = len(seen)
        if turn == 1:
            return ModelResponse(parts=[ThinkingPart(content="6/3, use the tool"),
                                        ToolCallPart("divide", {"a": 6, "b": 0}, tool_call_id="c1")],
                                 finish_reason="tool_call")
        if turn == 2:
            return ModelResponse(parts=[ToolCallPart("divide", {"a": 6, "b": 3}, tool_call_id="c2"),
                                        ToolCallPart("lookup", {"key": "missing"}, tool_call_id="c3")],
                                 finish_reason="tool_call")
        return ModelResponse(parts=[TextPart("6/3 = 2")], finish_reason="stop")

    return FunctionModel(script, model_name="scripted"), seen


def calculator_agent(model, **kwargs) -> Agent:
    agent = Agent(model, name="calc", instructions="Answer with the tools.", **kwargs)

    @agent.tool_plain
    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        if b == 0:
            raise ModelRetry("b must not be zero")
        return a / b

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Look a key up."""
        raise ModelRetry(f"no entry {key!r}")

    return agent


def crashing_agent() -> Agent:
    """Its model calls a tool that raises a plain exception: the run fails."""
    model = FunctionModel(lambda messages, info: ModelResponse(parts=[ToolCallPart("explode", {"why": "test"}, tool_call_id="x1")]),
                          model_name="crasher")
    agent = Agent(model, name="crasher")

    @agent.tool_plain
    def explode(why: str) -> str:
        """Always fails."""
        raise ValueError(f"kaput: {why}")

    return agent
