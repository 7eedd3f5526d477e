"""A scripted chat model that supports tool binding, and the tools and scripts the tests use.

``ScriptedChatModel`` is a real LangChain ``BaseChatModel``: LangChain runs its callbacks,
streaming and batching exactly as for a provider model. It answers with the next ``AIMessage``
of its script (tool calls, usage, reasoning blocks included), records every message list it
was asked with (``received``), and streams a scripted message as text chunks followed by one
chunk carrying its tool calls. ``bind_tools`` returns the model itself (the script decides
which tools are called).
"""

from __future__ import annotations

from typing import Any, Iterator

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from pydantic import Field


class ScriptedChatModel(BaseChatModel):
    """Answers with ``script[0]``, ``script[1]``, ... (raises when the script is exhausted)."""

    script: list[AIMessage]
    model: str = "scripted-model"
    received: list[list[BaseMessage]] = Field(default_factory=list)
    i: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.received.append(list(messages))
        if self.i >= len(self.script):
            raise RuntimeError("the scripted model has no more answers")
        message = self.script[self.i]
        self.i += 1
        return message.model_copy(deep=True)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        message = self._next(messages)
        text = message.content if isinstance(message.content, str) else ""
        words = text.split(" ") if text else []
        for n, word in enumerate(words):
            token = word if n == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        last = AIMessageChunk(
            content="",
            tool_call_chunks=[{"name": c["name"], "args": _json(c["args"]), "id": c["id"], "index": i}
                              for i, c in enumerate(message.tool_calls)],
            usage_metadata=message.usage_metadata,
            chunk_position="last",
        )
        yield ChatGenerationChunk(message=last)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def usage(inputs: int, outputs: int) -> dict[str, int]:
    return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city."""
    if city == "Atlantis":
        raise ValueError(f"no such city: {city}")
    return f"sunny in {city}"


def calculator_script() -> list[AIMessage]:
    """Ask for add(2, 3) and a failing lookup, then answer."""
    return [
        AIMessage(content="", tool_calls=[call("add", {"a": 2, "b": 3}, "call_add"),
                                          call("lookup", {"city": "Atlantis"}, "call_lookup")],
                  usage_metadata=usage(12, 7)),
        AIMessage(content="2 + 3 = 5, and Atlantis was not found.", usage_metadata=usage(40, 11)),
    ]


#: Keys whose values are random per run (message ids, LangGraph task namespaces).
RANDOM_KEYS = frozenset({"id", "checkpoint_ns", "langgraph_checkpoint_ns"})


def strip_ids(value: Any) -> Any:
    """Messages (and structures holding them) as dicts without their per-run random ids."""
    if isinstance(value, BaseMessage):
        return {k: strip_ids(v) for k, v in value.model_dump().items() if k != "id"}
    if isinstance(value, dict):
        return {k: strip_ids(v) for k, v in value.items() if k not in RANDOM_KEYS}
    if isinstance(value, (list, tuple)):
        return [strip_ids(v) for v in value]
    return value
