"""The ``pydantic_ai`` normaliser: what pydantic-ai's GenAI spans lack for the views and datasets.

pydantic-ai (2.68, instrumentation format 5/6) writes the current GenAI conventions natively
(``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON ``parts`` messages,
``gen_ai.tool.call.arguments`` / ``.result``, ``gen_ai.usage.*``, ``invoke_agent`` / ``chat`` /
``execute_tool`` operations), so the built-in normalisers have nothing to translate. This one
*adds* what is missing, never replacing a key that is present:

* **agent run spans** (``invoke_agent`` with pydantic-ai's ``final_result`` or
  ``pydantic_ai.all_messages``): ``agent_rl.output`` = ``final_result`` (the output as pydantic-ai
  recorded it: a ``str`` output as is, a structured one as JSON, the core's own convention), and
  ``agent_rl.input`` = the run's user prompt (the text of the first user message at or after
  ``pydantic_ai.new_message_index`` in ``pydantic_ai.all_messages``), so ``rollouts.input`` /
  ``output`` and the ``agents`` view are filled;
* **model request spans**: ``agent_rl.reasoning`` = the ``thinking`` parts of the output
  messages (``llm_calls.reasoning``);
* **tool spans that asked for a retry** (``pydantic_ai.tool.retry.cause``): ``error.type`` = the
  cause (``model_retry``, ``validation_error``, ``unknown_tool``, ``unavailable_tool``), so
  ``tool_calls.error`` says why; the message the model was sent back is ``tool_calls.result``;
* **``tool_call_response`` parts** in ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
  ``pydantic_ai.all_messages``: pydantic-ai names the tool's return ``result`` where the GenAI
  message schema names it ``response``; ``response`` is added next to ``result`` (everything else
  in the JSON is kept), so the dataset builders, which read ``response``, see tool results. This is
  the one place the normaliser rewrites a value that is present: it adds a key inside it.

Cheap when there is nothing to do: a few dict look-ups and substring tests per span; JSON is only
parsed on the spans that need it. Bad values are left as they are; nothing here raises on data.
"""

from __future__ import annotations

import json
from typing import Any

# Pinned here rather than imported from agent_rl_plugin.semconv so the module stays importable
# (and testable) alone; the values are the ones the core's views read.
OPERATION = "gen_ai.operation.name"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
ROLLOUT_INPUT = "agent_rl.input"
ROLLOUT_OUTPUT = "agent_rl.output"
REASONING = "agent_rl.reasoning"

FINAL_RESULT = "final_result"
ALL_MESSAGES = "pydantic_ai.all_messages"
NEW_MESSAGE_INDEX = "pydantic_ai.new_message_index"
RETRY_CAUSE = "pydantic_ai.tool.retry.cause"

_RESPONSE_PART = '"tool_call_response"'
_MESSAGE_KEYS = (INPUT_MESSAGES, OUTPUT_MESSAGES, ALL_MESSAGES)


def _load(value: Any) -> Any:
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _parts(message: Any) -> list[dict[str, Any]]:
    parts = message.get("parts") if isinstance(message, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text_of(parts: list[dict[str, Any]], kind: str) -> str | None:
    texts = [p["content"] for p in parts if p.get("type") == kind and isinstance(p.get("content"), str)]
    return "\n".join(texts) if texts else None


def with_response_keys(text: Any) -> str | None:
    """``text`` (JSON messages) with ``response`` added to every ``tool_call_response`` part
    that has pydantic-ai's ``result`` and no ``response``; ``None`` when nothing changes."""
    if not isinstance(text, str) or _RESPONSE_PART not in text:
        return None
    messages = _load(text)
    if not isinstance(messages, list):
        return None
    changed = False
    for message in messages:
        for part in _parts(message):
            if part.get("type") == "tool_call_response" and "result" in part and "response" not in part:
                part["response"] = part["result"]
                changed = True
    return _dumps(messages) if changed else None


def run_prompt(all_messages: Any, new_message_index: Any = None) -> str | None:
    """The user prompt of an agent run: the text of the first user message from
    ``new_message_index`` on (earlier messages are the history the run was given)."""
    messages = _load(all_messages)
    if not isinstance(messages, list):
        return None
    start = new_message_index if isinstance(new_message_index, int) and not isinstance(new_message_index, bool) else 0
    for message in messages[max(start, 0):]:
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text_of(_parts(message), "text")
            if text is not None:
                return text
    return None


def reasoning_of(output_messages: Any) -> str | None:
    """The ``thinking`` parts of JSON output messages, joined by newlines."""
    if not isinstance(output_messages, str) or '"thinking"' not in output_messages:
        return None
    messages = _load(output_messages)
    if not isinstance(messages, list):
        return None
    texts = [t for m in messages if (t := _text_of(_parts(m), "thinking")) is not None]
    return "\n".join(texts) if texts else None


def normalize_pydantic_ai(attributes: dict[str, Any], span_name: str) -> None:
    """Add the keys described in the module docstring, in place."""
    operation = attributes.get(OPERATION)
    if operation == "invoke_agent" and (FINAL_RESULT in attributes or ALL_MESSAGES in attributes):
        if ROLLOUT_OUTPUT not in attributes and isinstance(attributes.get(FINAL_RESULT), str):
            attributes[ROLLOUT_OUTPUT] = attributes[FINAL_RESULT]
        if ROLLOUT_INPUT not in attributes:
            prompt = run_prompt(attributes.get(ALL_MESSAGES), attributes.get(NEW_MESSAGE_INDEX))
            if prompt is not None:
                attributes[ROLLOUT_INPUT] = prompt
    elif operation == "chat" and REASONING not in attributes:
        reasoning = reasoning_of(attributes.get(OUTPUT_MESSAGES))
        if reasoning is not None:
            attributes[REASONING] = reasoning
    elif operation == "execute_tool" and ERROR_TYPE not in attributes:
        cause = attributes.get(RETRY_CAUSE)
        if isinstance(cause, str) and cause:
            attributes[ERROR_TYPE] = cause
    for key in _MESSAGE_KEYS:
        fixed = with_response_keys(attributes.get(key))
        if fixed is not None:
            attributes[key] = fixed
