"""A scripted smolagents ``Model`` (no API key, no network) and the tools the tests use."""

from __future__ import annotations

from smolagents import Tool, tool
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model
from smolagents.monitoring import TokenUsage


def call(name: str, arguments: dict, call_id: str) -> ChatMessageToolCall:
    return ChatMessageToolCall(function=ChatMessageToolCallFunction(name=name, arguments=arguments), id=call_id, type="function")


class ScriptedModel(Model):
    """Returns the scripted ``ChatMessage`` s in order; keeps the messages it was sent."""

    def __init__(self, replies: list[ChatMessage], model_id: str = "scripted-model") -> None:
        super().__init__(model_id=model_id)
        self.replies = list(replies)
        self.received: list[list] = []

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs) -> ChatMessage:
        self.received.append([m.dict() if hasattr(m, "dict") else dict(m) for m in messages])
        reply = self.replies.pop(0)
        return ChatMessage(role=reply.role, content=reply.content, tool_calls=reply.tool_calls,
                           token_usage=TokenUsage(input_tokens=10 * len(messages), output_tokens=7))


def reply(content: str | None = None, *tool_calls: ChatMessageToolCall) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=content, tool_calls=list(tool_calls) or None)


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b.

    Args:
        a: the dividend
        b: the divisor
    """
    return a / b


class Lookup(Tool):
    name = "lookup"
    description = "Looks a key up; fails for unknown keys."
    inputs = {"key": {"type": "string", "description": "the key"}}
    output_type = "string"

    def forward(self, key: str) -> str:
        if key != "pi":
            raise KeyError(f"no entry {key}")
        return "3.14159"


def tool_calling_script() -> list[ChatMessage]:
    """divide by zero (tool error), then divide + lookup in parallel (lookup fails), then answer."""
    return [
        reply("Let me divide.", call("divide", {"a": 6, "b": 0}, "c1")),
        reply(None, call("divide", {"a": 6, "b": 3}, "c2"), call("lookup", {"key": "e"}, "c3")),
        reply(None, call("final_answer", {"answer": "6/3 = 2.0"}, "c4")),
    ]


def code_script() -> list[ChatMessage]:
    """Code that fails (lookup of an unknown key), then code that uses the tools and answers."""
    return [
        reply("Thought: look it up.\n<code>\nprint(lookup(key='e'))\n</code>"),
        reply("Thought: compute.\n<code>\nx = divide(a=6, b=3)\nprint(lookup(key='pi'))\nfinal_answer(f'6/3 = {x}')\n</code>"),
    ]
