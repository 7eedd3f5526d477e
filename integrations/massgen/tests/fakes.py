"""A scripted MassGen backend: a real ``LLMBackend`` subclass that streams scripted chunks.

Each call of ``stream_with_tools`` plays the next *turn* of the script: a list of chunk specs
(keyword arguments of MassGen's ``StreamChunk``), then a ``done`` chunk carrying the turn's
token usage. Helpers build the chunks MassGen's real backends send: content, reasoning, the
model's tool calls (chat-completions shape, e.g. the ``new_answer`` / ``vote`` workflow tools),
and the status chunks of a tool the backend executes itself (custom tools / MCP).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from massgen.backend.base import LLMBackend, StreamChunk


class ScriptedBackend(LLMBackend):
    """Plays ``script`` (a list of turns) one turn per ``stream_with_tools`` call."""

    def __init__(self, script: list[list[dict[str, Any]]], model: str = "scripted-model", usage: tuple[int, int] = (12, 7)) -> None:
        super().__init__(api_key="not-a-key", model=model)
        self.model = model
        self.script = [list(turn) for turn in script]
        self.usage = usage
        self.received: list[list[dict[str, Any]]] = []

    def get_provider_name(self) -> str:
        return "scripted"

    async def stream_with_tools(self, messages, tools, **kwargs):
        self.received.append([dict(m) for m in messages])
        turn = self.script.pop(0) if self.script else [content("(no more script)")]
        for spec in turn:
            if "sleep" in spec:  # {"sleep": seconds}: the model takes its time
                await asyncio.sleep(spec["sleep"])
                continue
            await asyncio.sleep(0)
            yield StreamChunk(**spec)
        prompt, completion = self.usage
        yield StreamChunk(type="done", usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})


def content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": text}


def reasoning(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "content": text, "reasoning_delta": text}


_ids = iter(range(1, 10_000))


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """The model asks for a tool (chat-completions shape)."""
    call = {"id": f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"type": "tool_calls", "tool_calls": [call]}


def new_answer(text: str) -> dict[str, Any]:
    return tool_call("new_answer", content=text)


def vote(agent_id: str, reason: str) -> dict[str, Any]:
    return tool_call("vote", agent_id=agent_id, reason=reason)


def executed_tool(name: str, arguments: dict[str, Any], result: str, call_id: str, error: str | None = None) -> list[dict[str, Any]]:
    """The status chunks MassGen's backends send for a tool they execute (custom tool shape)."""
    source = f"custom_{name}"
    chunks = [
        {"type": "custom_tool_status", "status": "custom_tool_called", "content": f"🔧 [Custom Tool] Calling {name}...", "source": source, "tool_call_id": call_id},
        {"type": "custom_tool_status", "status": "function_call", "content": f"Arguments for Calling {name}: {json.dumps(arguments)}", "source": source, "tool_call_id": call_id, "display": False},
    ]
    if error is not None:
        chunks.append({"type": "custom_tool_status", "status": "custom_tool_error", "content": f"❌ [Custom Tool Error] {error}", "source": source, "tool_call_id": call_id})
    else:
        chunks += [
            {"type": "custom_tool_status", "status": "function_call_output", "content": f"Results for Calling {name}: {result}", "source": source, "tool_call_id": call_id, "display": False},
            {"type": "custom_tool_status", "status": "custom_tool_response", "content": f"✅ [Custom Tool] {name} completed", "source": source, "tool_call_id": call_id},
        ]
    return chunks


def two_agent_scripts() -> dict[str, list[list[dict[str, Any]]]]:
    """agent_a answers after a calculator call and votes for itself; agent_b's slower answer
    restarts it (its vote is dropped), it votes again, agent_b votes for agent_a; agent_a presents."""
    return {
        "agent_a": [
            [reasoning("Add two and two."), *executed_tool("calculator", {"expression": "2+2"}, "4", "tool_a1"), content("2+2 = 4."), new_answer("The answer is 4.")],
            [content("My answer is the only one so far."), vote("agent1", "It shows the computation.")],
            [content("Agent b agrees; mine shows the work."), vote("agent1", "It shows the computation.")],
            [content("Final answer: 4")],
        ],
        "agent_b": [
            [content("Let me think."), {"sleep": 0.3}, new_answer("It is 4.")],
            [reasoning("Compare answers."), vote("agent1", "More complete than mine.")],
        ],
    }
