"""Built-in plugin: the ``genai`` normaliser, mapping older GenAI attributes onto current ones.

Implements ``agent_rl_register_normalizers``. On the store's write path, for each span:

* ``gen_ai.system`` -> ``gen_ai.provider.name``;
* ``gen_ai.usage.prompt_tokens`` / ``completion_tokens`` -> ``gen_ai.usage.input_tokens`` /
  ``output_tokens``;
* flattened ``gen_ai.prompt.N.role/content`` and ``gen_ai.completion.N.role/content`` (with
  ``.tool_calls.M.id/name/arguments`` and ``.finish_reason``, as OpenLLMetry writes them) ->
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON lists of chat messages
  ``{"role", "content"[, "tool_calls"]}``, and the finish reasons to
  ``gen_ai.response.finish_reasons``;
* ``llm.request.type`` ``chat``/``completion`` -> ``gen_ai.operation.name`` ``chat`` /
  ``text_completion``.

A key that is already present is never overwritten (current attributes win), the legacy keys
are kept, and a span with none of the legacy keys costs a few dict look-ups (early return).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.hookspecs import hookimpl

LEGACY_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
LEGACY_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
LEGACY_REQUEST_TYPE = "llm.request.type"
PROMPT_PREFIX = "gen_ai.prompt."
COMPLETION_PREFIX = "gen_ai.completion."
_REQUEST_TYPES = {"chat": sc.OP_CHAT, "completion": sc.OP_TEXT_COMPLETION}
_MAX_MESSAGES = 10_000

_TRIGGERS = (
    sc.GEN_AI_SYSTEM,
    LEGACY_PROMPT_TOKENS,
    LEGACY_COMPLETION_TOKENS,
    LEGACY_REQUEST_TYPE,
    PROMPT_PREFIX + "0.role",
    PROMPT_PREFIX + "0.content",
    COMPLETION_PREFIX + "0.role",
    COMPLETION_PREFIX + "0.content",
)


def _flattened_messages(attributes: dict[str, Any], prefix: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Messages ``prefix{N}.*`` in order, and their finish reasons."""
    messages: list[dict[str, Any]] = []
    finish_reasons: list[str] = []
    for index in range(_MAX_MESSAGES):
        base = f"{prefix}{index}."
        role = attributes.get(base + "role")
        content = attributes.get(base + "content")
        if role is None and content is None:
            break
        message: dict[str, Any] = {"role": role if role is not None else "user", "content": content}
        calls = []
        for call_index in range(_MAX_MESSAGES):
            call_base = f"{base}tool_calls.{call_index}."
            name = attributes.get(call_base + "name")
            if name is None:
                break
            calls.append(
                {
                    "id": attributes.get(call_base + "id"),
                    "type": "function",
                    "function": {"name": name, "arguments": attributes.get(call_base + "arguments")},
                }
            )
        if calls:
            message["tool_calls"] = calls
        reason = attributes.get(base + "finish_reason")
        if reason is not None:
            finish_reasons.append(str(reason))
        messages.append(message)
    return messages, finish_reasons


def normalize_genai(attributes: dict[str, Any], span_name: str) -> None:
    """Add current GenAI keys derived from legacy ones, in place (see the module contract)."""
    for key in _TRIGGERS:
        if key in attributes:
            break
    else:
        return
    setdefault = attributes.setdefault
    if sc.GEN_AI_SYSTEM in attributes:
        setdefault(sc.GEN_AI_PROVIDER_NAME, attributes[sc.GEN_AI_SYSTEM])
    if LEGACY_PROMPT_TOKENS in attributes:
        setdefault(sc.GEN_AI_USAGE_INPUT_TOKENS, attributes[LEGACY_PROMPT_TOKENS])
    if LEGACY_COMPLETION_TOKENS in attributes:
        setdefault(sc.GEN_AI_USAGE_OUTPUT_TOKENS, attributes[LEGACY_COMPLETION_TOKENS])
    request_type = attributes.get(LEGACY_REQUEST_TYPE)
    if request_type in _REQUEST_TYPES:
        setdefault(sc.GEN_AI_OPERATION_NAME, _REQUEST_TYPES[request_type])
    if sc.GEN_AI_INPUT_MESSAGES not in attributes:
        prompt, _ = _flattened_messages(attributes, PROMPT_PREFIX)
        if prompt:
            attributes[sc.GEN_AI_INPUT_MESSAGES] = json.dumps(prompt, ensure_ascii=False, default=str)
    if sc.GEN_AI_OUTPUT_MESSAGES not in attributes or sc.GEN_AI_RESPONSE_FINISH_REASONS not in attributes:
        completion, reasons = _flattened_messages(attributes, COMPLETION_PREFIX)
        if completion:
            setdefault(sc.GEN_AI_OUTPUT_MESSAGES, json.dumps(completion, ensure_ascii=False, default=str))
        if reasons:
            setdefault(sc.GEN_AI_RESPONSE_FINISH_REASONS, reasons)


@hookimpl
def agent_rl_register_normalizers(register: Callable[[str, Callable[[dict[str, Any], str], None]], None]) -> None:
    register("genai", normalize_genai)
