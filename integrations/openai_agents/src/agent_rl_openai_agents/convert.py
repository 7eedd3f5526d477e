"""Pure conversions of Agents SDK tracing data to this project's conventions (no SDK import).

* :func:`to_chat_messages`: model input/output in any of the shapes the SDK's spans carry
  (Responses API items: ``message`` / ``function_call`` / ``function_call_output`` /
  ``reasoning`` / other ``*_call`` items, chat-completions messages, a ``Response`` dump, a
  plain string) -> chat messages ``{"role", "content"[, "tool_calls"][, "tool_call_id"]}``
  with OpenAI-style ``tool_calls`` (``{"id", "type": "function", "function": {"name",
  "arguments"}}``), the shape the store's normalisers produce. Also returns the reasoning text.
* :func:`usage_numbers`: input/output tokens from a usage dict or object.
* :func:`iso_to_ns`: the SDK's ISO-8601 timestamps -> epoch nanoseconds.
* :func:`rollout_id_for`: the rollout id of an SDK trace (its id without ``trace_``).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "as_plain",
    "to_chat_messages",
    "tool_calls_of",
    "message_text",
    "usage_numbers",
    "iso_to_ns",
    "rollout_id_for",
    "parse_json",
]

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")


def as_plain(value: Any, _depth: int = 0) -> Any:
    """Pydantic models / dataclass-like objects -> plain dicts and lists (best effort)."""
    if _depth > 20:
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return as_plain(dump(exclude_none=True), _depth + 1)
        except Exception:
            pass
    if isinstance(value, dict):
        return {str(k): as_plain(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_plain(v, _depth + 1) for v in value]
    return value


def parse_json(text: Any) -> Any:
    """A JSON string parsed, anything else (or text that is not JSON) unchanged."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _content(content: Any) -> Any:
    """Responses content parts -> one string when they are all text, else the parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") in (*_TEXT_PARTS, "refusal"):
                texts.append(str(part.get("text", part.get("refusal", ""))))
            else:
                return content
        return "".join(texts)
    return content


def _reasoning_text(item: dict[str, Any]) -> str:
    pieces = []
    for key in ("summary", "content"):
        for part in item.get(key) or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
    return "\n".join(pieces)


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    if arguments is not None and not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, default=str)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


_ID_KEYS = ("id", "call_id", "type", "status")


def to_chat_messages(value: Any) -> tuple[list[dict[str, Any]], str | None]:
    """(chat messages, reasoning text or None) of a model input or output in any SDK shape."""
    messages: list[dict[str, Any]] = []
    reasoning: list[str] = []
    if value is None:
        return messages, None
    if isinstance(value, str):
        return [{"role": "user", "content": value}], None
    items = as_plain(value)
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        return [{"role": "user", "content": items}], None
    open_assistant: dict[str, Any] | None = None  # the message function calls attach to

    def assistant() -> dict[str, Any]:
        nonlocal open_assistant
        if open_assistant is None:
            open_assistant = {"role": "assistant", "content": None}
            messages.append(open_assistant)
        return open_assistant

    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": item})
            open_assistant = None
            continue
        if not isinstance(item, dict):
            messages.append({"role": "user", "content": item})
            open_assistant = None
            continue
        kind = item.get("type")
        if item.get("object") == "response" or (kind is None and "role" not in item and isinstance(item.get("output"), list)):
            inner, text = to_chat_messages(item.get("output"))
            messages.extend(inner)
            if text:
                reasoning.append(text)
            open_assistant = None
            continue
        if "role" in item and kind in (None, "message"):
            message = {"role": item.get("role"), "content": _content(item.get("content"))}
            message.update((k, v) for k, v in item.items()
                           if k not in (*_ID_KEYS, "role", "content") and v is not None)
            messages.append(message)
            open_assistant = message if message.get("role") == "assistant" else None
            continue
        if kind == "function_call":
            target = assistant()
            target.setdefault("tool_calls", []).append(_call(item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments")))
            continue
        if kind == "function_call_output" or (isinstance(kind, str) and kind.endswith("_call_output")):
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id") or item.get("id"),
                             "content": output if isinstance(output, str) else _content(output)})
            open_assistant = None
            continue
        if kind == "reasoning":
            text = _reasoning_text(item)
            if text:
                reasoning.append(text)
            continue
        if isinstance(kind, str) and kind.endswith("_call"):
            arguments = item.get("arguments", item.get("input", item.get("action")))
            if arguments is None:
                arguments = {k: v for k, v in item.items() if k not in _ID_KEYS}
            target = assistant()
            target.setdefault("tool_calls", []).append(_call(item.get("call_id") or item.get("id"), item.get("name") or kind, arguments))
            continue
        messages.append({"role": "assistant" if kind else "user", "content": item})
        open_assistant = None
    return messages, ("\n".join(reasoning) or None)


def tool_calls_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool call of the assistant messages, in order."""
    calls = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls.extend(c for c in message.get("tool_calls") or [] if isinstance(c, dict))
    return calls


def message_text(messages: list[dict[str, Any]]) -> str | None:
    """The assistant text of ``messages`` joined (``None`` when there is none)."""
    texts = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), str):
            texts.append(message["content"])
    return "".join(texts) if texts else None


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def usage_numbers(usage: Any) -> tuple[int | None, int | None]:
    """(input tokens, output tokens) of a usage dict/object (``prompt_tokens`` etc. accepted)."""
    if usage is None:
        return None, None
    numbers = []
    for keys in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
        value = None
        for key in keys:
            value = _get(usage, key)
            if value is not None:
                break
        try:
            numbers.append(int(value) if value is not None else None)
        except (TypeError, ValueError):
            numbers.append(None)
    return numbers[0], numbers[1]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_to_ns(value: Any) -> int | None:
    """An ISO-8601 timestamp (the SDK's ``started_at``/``ended_at``) as epoch nanoseconds."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def rollout_id_for(trace: Any) -> str:
    """The rollout id the processor gives an SDK trace recorded outside any ``arl.rollout()``:
    its id without the ``trace_`` prefix when that is 32 hex digits (the SDK's own ids), else
    the first 32 hex digits of its SHA-256. ``trace``: a ``Trace``, or its ``trace_id``."""
    trace_id = trace if isinstance(trace, str) else str(getattr(trace, "trace_id", trace))
    bare = trace_id[len("trace_"):] if trace_id.startswith("trace_") else trace_id
    if _HEX32.match(bare):
        return bare
    return hashlib.sha256(trace_id.encode()).hexdigest()[:32]
