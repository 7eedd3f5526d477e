"""Parsing saved conversations (OpenAI chat format, one per JSONL line) into steps to record.

A line is either a bare list of messages, or an object::

    {"messages": [...], "task_id": "t1", "group_id": "g1", "metadata": {...},
     "reward": 1.0 | {"name": value, ...}, "model": "gpt-4o", "agent": "support-bot"}

where only ``messages`` is required. Messages have a ``role``: ``system``, ``developer`` and
``user`` messages are context; each ``assistant`` message is one LLM step (``content`` and/or
``tool_calls``, OpenAI style ``{"id", "type": "function", "function": {"name", "arguments"}}``
or flat ``{"id", "name", "arguments"}``; the legacy ``function_call`` too); each ``tool``
message (legacy: ``function``) is one tool step, matched to the earlier tool call with the
same ``tool_call_id`` (without one: the oldest unanswered call of the same ``name``, else the
oldest unanswered call). Arguments given as JSON text are parsed; a tool result is kept as
the message's ``content`` as is. The model is the assistant message's ``model``, else the
line's ``model``, else ``metadata["model"]``, else ``"imported"``; an assistant message's
``usage`` (``prompt_tokens``/``completion_tokens``) gives its token counts.

Each problem is a ``ValueError`` naming the message (1-based) and what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
DEFAULT_MODEL = "imported"
DEFAULT_AGENT = "imported_chat"
LINE_KEYS = ("messages", "task_id", "group_id", "metadata", "reward", "model", "agent")


@dataclass
class LlmStep:
    index: int  # position of the assistant message
    model: str
    input_messages: list[dict[str, Any]]
    output: dict[str, Any]
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass
class ToolStep:
    index: int  # position of the tool message
    name: str
    arguments: Any
    result: Any
    call_id: str | None


@dataclass
class ChatLine:
    """One conversation, checked and cut into steps."""

    line: int
    messages: list[dict[str, Any]]
    steps: list[LlmStep | ToolStep]
    task_id: str
    group_id: str | None
    metadata: dict[str, Any]
    rewards: dict[str, float]
    agent: str
    content_hash: str
    final_output: Any = None
    context: list[dict[str, Any]] = field(default_factory=list)  # messages before the first reply


def content_hash(obj: Any) -> str:
    """sha256 of the line's JSON value in canonical form (key order and spacing ignored)."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _id_text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{what} must be non-empty text or an integer, got {json.dumps(value)[:60]}")
    return str(value).strip()


def _rewards(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    pairs = value.items() if isinstance(value, dict) else [("reward", value)]
    rewards = {}
    for name, score in pairs:
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(float(score)):
            raise ValueError(f"reward {name!r} must be a finite number, got {json.dumps(score)[:60]}")
        rewards[str(name)] = float(score)
    return rewards


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _tool_calls(message: dict[str, Any], where: str) -> list[tuple[str | None, str, Any]]:
    """(id, name, arguments) of an assistant message's tool calls."""
    calls = message.get("tool_calls")
    legacy = message.get("function_call")
    if calls is None:
        calls = [{"function": legacy}] if isinstance(legacy, dict) else []
    if not isinstance(calls, list):
        raise ValueError(f"{where}: tool_calls must be a list")
    found = []
    for number, call in enumerate(calls, start=1):
        if not isinstance(call, dict):
            raise ValueError(f"{where}: tool call {number} is not an object")
        function = call.get("function")
        if not isinstance(function, dict):
            function = call
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: tool call {number} has no function name")
        call_id = call.get("id")
        found.append((None if call_id is None else str(call_id), name, _arguments(function.get("arguments"))))
    return found


def _tokens(message: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None, None
    values = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        values.append(int(value) if isinstance(value, int) and not isinstance(value, bool) else None)
    return values[0], values[1]


def _steps(messages: list[Any], model: str) -> list[LlmStep | ToolStep]:
    steps: list[LlmStep | ToolStep] = []
    pending: list[tuple[str | None, str, Any]] = []  # unanswered calls, oldest first
    answered: set[str] = set()
    for index, message in enumerate(messages):
        where = f"message {index + 1}"
        if not isinstance(message, dict):
            raise ValueError(f"{where} is not an object")
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"{where}: role must be one of {', '.join(ROLES)}, got {json.dumps(role)[:40]}")
        if role == "assistant":
            calls = _tool_calls(message, where)
            if message.get("content") is None and not calls:
                raise ValueError(f"{where}: an assistant message needs content or tool_calls")
            input_tokens, output_tokens = _tokens(message)
            line_model = message.get("model")
            turn_model = line_model if isinstance(line_model, str) else model
            steps.append(LlmStep(index, turn_model, list(messages[:index]), dict(message), input_tokens, output_tokens))
            pending.extend(calls)
        elif role in ("tool", "function"):
            call = _match(message, pending, answered, where)
            pending.remove(call)
            if call[0] is not None:
                answered.add(call[0])
            steps.append(
                ToolStep(index, call[1], call[2], message.get("content"), call[0] or message.get("tool_call_id"))
            )
    if not any(isinstance(step, LlmStep) for step in steps):
        raise ValueError("no assistant message: nothing to learn from")
    return steps


def _match(message: dict[str, Any], pending: list[Any], answered: set[str], where: str) -> tuple[str | None, str, Any]:
    call_id = message.get("tool_call_id")
    name = message.get("name")
    if call_id is not None:
        for call in pending:
            if call[0] == str(call_id):
                return call
        if str(call_id) in answered:
            raise ValueError(f"{where}: a second result for tool_call_id {str(call_id)!r}")
        if not isinstance(name, str):
            raise ValueError(f"{where}: tool_call_id {str(call_id)!r} matches no earlier tool call")
    for call in pending:
        if isinstance(name, str) and call[1] == name:
            return call
    if pending and not isinstance(name, str):
        return pending[0]
    if isinstance(name, str):  # a result whose call was not logged: keep it, with what we know
        return (None if call_id is None else str(call_id), name, None)
    raise ValueError(f"{where}: a tool result with no earlier tool call to answer")


def _lookup(obj: dict[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def parse_chat(obj: Any, line: int, task_key: str | None = None) -> ChatLine:
    """One parsed JSON value -> :class:`ChatLine`; ``ValueError`` says what is wrong.

    ``task_id``: the line's ``task_id``; else, with ``task_key``, the value at that dotted path
    of the line object (``metadata.ticket``; a bare list has none); else ``chat-`` and 12 hex
    digits of the hash of the messages before the first assistant reply (same opening, same
    task)."""
    if isinstance(obj, list):
        body: dict[str, Any] = {"messages": obj}
    elif isinstance(obj, dict):
        body = obj
        if "messages" not in body:
            raise ValueError('expected a list of messages or an object with "messages"')
    else:
        raise ValueError(f"expected a list of messages or an object, got {type(obj).__name__}")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    metadata = body.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be an object, got {type(metadata).__name__}")
    model = body.get("model") or metadata.get("model") or DEFAULT_MODEL
    steps = _steps(messages, str(model))
    first_reply = next(step.index for step in steps if isinstance(step, LlmStep))
    context = list(messages[:first_reply])
    task_id = _id_text(body.get("task_id"), "task_id")
    if task_id is None and task_key:
        task_id = _id_text(_lookup(body, task_key), f"the value at task_key {task_key!r}")
    if task_id is None:
        task_id = "chat-" + content_hash(context)[:12]
    last = next(step for step in reversed(steps) if isinstance(step, LlmStep))
    raw_agent = body.get("agent")
    agent = raw_agent if isinstance(raw_agent, str) and raw_agent else DEFAULT_AGENT
    return ChatLine(
        line=line,
        messages=messages,
        steps=steps,
        task_id=task_id,
        group_id=_id_text(body.get("group_id"), "group_id"),
        metadata=metadata,
        rewards=_rewards(body.get("reward")),
        agent=agent,
        content_hash=content_hash(obj),
        final_output=last.output.get("content"),
        context=context,
    )
