"""LangChain objects -> the JSON shapes the store reads. No function here raises.

* :func:`message_dict`: a ``BaseMessage`` (or a ``("role", "text")`` tuple, a str, a dict) as an
  OpenAI-style chat message ``{"role", "content"[, "name"][, "tool_calls"][, "tool_call_id"]}``,
  tool calls as ``{"id", "type": "function", "function": {"name", "arguments": JSON text}}``
  (the shape ``llm_calls`` and the dataset builders read). Reasoning/thinking content blocks are
  taken out of the content and returned separately by :func:`reasoning_of`.
* :func:`jsonable`: any value a chain returns (graph states, messages, ``Command``/``Send``,
  documents, pydantic models) as plain JSON-able data.
* :func:`model_name`, :func:`usage_of`, :func:`finish_reasons_of`: what a chat model run says
  about its model, token usage and finish reasons.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping, Sequence

logger = logging.getLogger(__name__)

__all__ = [
    "message_dict",
    "messages_list",
    "reasoning_of",
    "text_of",
    "jsonable",
    "model_name",
    "usage_of",
    "finish_reasons_of",
    "commands_in",
]

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "function",
          "developer": "system", "user": "user", "assistant": "assistant",
          # message chunks' types
          "HumanMessageChunk": "user", "AIMessageChunk": "assistant", "SystemMessageChunk": "system",
          "ToolMessageChunk": "tool", "FunctionMessageChunk": "function"}
_REASONING_BLOCKS = ("reasoning", "thinking")


def _args_text(args: Any) -> str:
    if isinstance(args, str):
        return args
    try:
        return json.dumps(args, ensure_ascii=False, default=str)
    except Exception:
        return str(args)


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for call in getattr(message, "tool_calls", None) or []:
        if isinstance(call, Mapping):
            calls.append({"id": call.get("id"), "type": "function",
                          "function": {"name": call.get("name"), "arguments": _args_text(call.get("args", {}))}})
    for call in getattr(message, "invalid_tool_calls", None) or []:
        if isinstance(call, Mapping):
            calls.append({"id": call.get("id"), "type": "function", "invalid": True,
                          "function": {"name": call.get("name"), "arguments": _args_text(call.get("args") or "")}})
    return calls


def _split_content(content: Any) -> tuple[Any, list[str]]:
    """(content without reasoning blocks, the reasoning texts). Text-only block lists become a str."""
    if not isinstance(content, list):
        return content, []
    kept: list[Any] = []
    reasoning: list[str] = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") in _REASONING_BLOCKS:
            text = block.get("reasoning") or block.get("thinking") or block.get("text")
            if not text and isinstance(block.get("summary"), list):  # OpenAI Responses reasoning
                text = "".join(str(s.get("text", "")) for s in block["summary"] if isinstance(s, Mapping))
            if text:
                reasoning.append(str(text))
            continue
        kept.append(block)
    if all(isinstance(b, str) or (isinstance(b, Mapping) and b.get("type") == "text") for b in kept):
        return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in kept), reasoning
    return [dict(b) if isinstance(b, Mapping) else b for b in kept], reasoning


def reasoning_of(message: Any) -> str | None:
    """Reasoning text of an AI message: reasoning/thinking content blocks, else
    ``additional_kwargs["reasoning_content"]`` (DeepSeek, vLLM, ...)."""
    try:
        _, parts = _split_content(getattr(message, "content", None))
        extra = getattr(message, "additional_kwargs", None) or {}
        if not parts and isinstance(extra.get("reasoning_content"), str):
            parts = [extra["reasoning_content"]]
        return "".join(parts) or None
    except Exception:
        return None


def message_dict(message: Any) -> Any:
    """One message in the OpenAI chat shape (see the module docstring); unknown values as is."""
    try:
        return _message_dict(message)
    except Exception:
        logger.debug("agent-rl-langchain: could not convert a message", exc_info=True)
        return jsonable(message)


def _message_dict(message: Any) -> Any:
    if isinstance(message, str):
        return {"role": "user", "content": message}
    if isinstance(message, tuple) and len(message) == 2:
        role, content = message
        return {"role": _ROLES.get(str(role), str(role)), "content": content}
    if isinstance(message, Mapping):
        return jsonable(dict(message))
    kind = getattr(message, "type", None)
    if not isinstance(kind, str) or not hasattr(message, "content"):
        return jsonable(message)
    if kind in ("chat", "ChatMessageChunk"):
        role = str(getattr(message, "role", "user"))
    else:
        role = _ROLES.get(kind, kind)
    content, _ = _split_content(message.content)
    out: dict[str, Any] = {"role": role, "content": content}
    name = getattr(message, "name", None)
    if name:
        out["name"] = name
    if role == "assistant":
        calls = _tool_calls(message)
        if calls:
            out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = getattr(message, "tool_call_id", None)
        if getattr(message, "status", "success") == "error":
            out["status"] = "error"
    return out


def messages_list(messages: Any) -> list[Any] | None:
    """A list of messages (BaseMessage objects, tuples, strs, dicts) converted, else ``None``."""
    if not isinstance(messages, (list, tuple)):
        return None
    return [message_dict(m) for m in messages]


def text_of(message: Any) -> str | None:
    """The text of a message's content (text blocks joined), else ``None``."""
    content, _ = _split_content(getattr(message, "content", None))
    return content if isinstance(content, str) else None


def jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as plain JSON-able data (see the module docstring). Never raises."""
    try:
        return _jsonable(value, _depth)
    except Exception:
        return repr(value)


def _jsonable(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if depth > 20:
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(getattr(value, "type", None), str) and hasattr(value, "content") and hasattr(value, "additional_kwargs"):
        return _message_dict(value)
    cls = type(value).__name__
    if cls == "Command" and hasattr(value, "goto"):
        out: dict[str, Any] = {"command": {}}
        for key in ("graph", "update", "resume", "goto"):
            item = getattr(value, key, None)
            if item not in (None, (), []):
                out["command"][key] = _jsonable(item, depth + 1)
        return out
    if cls == "Send" and hasattr(value, "node"):
        return {"send": {"node": value.node, "arg": _jsonable(getattr(value, "arg", None), depth + 1)}}
    if cls == "Document" and hasattr(value, "page_content"):
        return {"page_content": value.page_content, "metadata": _jsonable(getattr(value, "metadata", {}), depth + 1)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _jsonable(dump(), depth + 1)
    if hasattr(value, "__dataclass_fields__"):
        return {k: _jsonable(getattr(value, k, None), depth + 1) for k in value.__dataclass_fields__}
    return repr(value)


def _first(*values: Any) -> Any:
    for value in values:
        if value not in (None, ""):
            return value
    return None


def model_name(serialized: Mapping[str, Any] | None, metadata: Mapping[str, Any] | None,
               invocation_params: Mapping[str, Any] | None, name: str | None) -> str:
    """The requested model: LangChain's ``ls_model_name``, the invocation parameters'
    ``model``/``model_name``/``model_id``, the serialised constructor's, else the run/class name."""
    metadata = metadata or {}
    params = invocation_params or {}
    kwargs = (serialized or {}).get("kwargs") if isinstance((serialized or {}).get("kwargs"), Mapping) else {}
    ids = (serialized or {}).get("id")
    return str(_first(
        metadata.get("ls_model_name"),
        params.get("model"), params.get("model_name"), params.get("model_id"),
        kwargs.get("model"), kwargs.get("model_name"),
        name,
        params.get("_type"),
        ids[-1] if isinstance(ids, list) and ids else None,
        "unknown",
    ))


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def usage_of(generations: Sequence[Any], llm_output: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """(input_tokens, output_tokens): the messages' ``usage_metadata`` (summed over the run's
    generations), else the provider's ``llm_output["token_usage"|"usage"]``."""
    inputs = outputs = None
    for generation in generations:
        usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
        if isinstance(usage, Mapping):
            i, o = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
            if i is not None:
                inputs = (inputs or 0) + i
            if o is not None:
                outputs = (outputs or 0) + o
    if inputs is not None or outputs is not None:
        return inputs, outputs
    for key in ("token_usage", "usage"):
        usage = (llm_output or {}).get(key)
        if isinstance(usage, Mapping):
            i = _first(_int(usage.get("prompt_tokens")), _int(usage.get("input_tokens")))
            o = _first(_int(usage.get("completion_tokens")), _int(usage.get("output_tokens")))
            if i is not None or o is not None:
                return i, o
    return None, None


def finish_reasons_of(generations: Sequence[Any]) -> list[str]:
    """One finish reason per generation: the provider's (``finish_reason``/``stop_reason``/
    ``done_reason``), else ``tool_calls`` when the message asks for tools, else ``stop``."""
    reasons: list[str] = []
    for generation in generations:
        message = getattr(generation, "message", None)
        info = getattr(generation, "generation_info", None) or {}
        meta = getattr(message, "response_metadata", None) or {}
        reason = _first(info.get("finish_reason"), meta.get("finish_reason"), meta.get("stop_reason"),
                        meta.get("done_reason"))
        if reason is None:
            reason = "tool_calls" if getattr(message, "tool_calls", None) else "stop"
        reasons.append(str(reason))
    return reasons


def commands_in(value: Any) -> list[Any]:
    """LangGraph ``Command`` objects in a run's output (the output itself, or a list of them)."""
    def is_command(item: Any) -> bool:
        return type(item).__name__ == "Command" and hasattr(item, "goto") and hasattr(item, "update")

    if is_command(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for item in value if is_command(item)]
    return []


def goto_targets(command: Any) -> list[str]:
    """The node names a ``Command`` sends control to (``goto`` as a name, a ``Send`` or a list)."""
    goto = getattr(command, "goto", None)
    items = goto if isinstance(goto, (list, tuple)) else [goto]
    targets = []
    for item in items:
        if isinstance(item, str) and item:
            targets.append(item)
        elif item is not None and isinstance(getattr(item, "node", None), str):
            targets.append(item.node)
    return targets
