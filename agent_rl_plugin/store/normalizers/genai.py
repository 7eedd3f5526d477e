"""The ``genai`` normaliser: deprecated GenAI attribute names -> current ones.

These are the names OpenLLMetry (and GenAI instrumentations older than semconv 1.37) write,
the lowest tier of the precedence (see :mod:`agent_rl_plugin.store.normalizers`):

* ``gen_ai.system`` -> ``gen_ai.provider.name``;
* ``gen_ai.usage.prompt_tokens`` / ``completion_tokens`` -> ``gen_ai.usage.input_tokens`` /
  ``output_tokens``;
* flattened ``gen_ai.prompt.N.role/content`` (with ``.tool_call_id`` and
  ``.tool_calls.M.id/name/arguments``) and ``gen_ai.completion.N.*`` (with ``.finish_reason``)
  -> ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON lists of chat messages
  ``{"role", "content"[, "tool_calls"][, "tool_call_id"]}``, in index order (gaps skipped),
  and the finish reasons -> ``gen_ai.response.finish_reasons``;
* the older JSON-string ``gen_ai.prompt`` / ``gen_ai.completion`` (a list of messages) ->
  ``gen_ai.input.messages`` / ``gen_ai.output.messages``;
* ``llm.request.type`` ``chat``/``completion`` -> ``gen_ai.operation.name`` ``chat`` /
  ``text_completion``.

A key that is already present is never overwritten, the legacy keys are kept, and a span with
none of the legacy keys costs a few dict look-ups (early return).
"""

from __future__ import annotations

from typing import Any

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store.normalizers._util import (
    as_text,
    dumps,
    indexed,
    load_json,
    set_missing,
    stated_kind,
    unflatten,
)

LEGACY_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
LEGACY_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
LEGACY_REQUEST_TYPE = "llm.request.type"
LEGACY_PROMPT = "gen_ai.prompt"  # JSON string (semconv <= 1.26)
LEGACY_COMPLETION = "gen_ai.completion"
PROMPT_PREFIX = "gen_ai.prompt."
COMPLETION_PREFIX = "gen_ai.completion."
_REQUEST_TYPES = {"chat": sc.OP_CHAT, "completion": sc.OP_TEXT_COMPLETION}

_TRIGGERS = (
    sc.GEN_AI_SYSTEM,
    LEGACY_PROMPT_TOKENS,
    LEGACY_COMPLETION_TOKENS,
    LEGACY_REQUEST_TYPE,
    LEGACY_PROMPT,
    LEGACY_COMPLETION,
    PROMPT_PREFIX + "0.role",
    PROMPT_PREFIX + "0.content",
    COMPLETION_PREFIX + "0.role",
    COMPLETION_PREFIX + "0.content",
)


def _tool_calls(node: Any) -> list[dict[str, Any]]:
    calls = []
    for call in indexed(node):
        if not isinstance(call, dict) or call.get("name") is None:
            continue
        calls.append(
            {
                "id": call.get("id"),
                "type": "function",
                "function": {"name": call.get("name"), "arguments": call.get("arguments")},
            }
        )
    return calls


def flattened_messages(
    attributes: dict[str, Any], prefix: str, default_role: str = "user"
) -> tuple[list[dict[str, Any]], list[str]]:
    """Messages ``prefix{N}.*`` in index order, and their finish reasons."""
    messages: list[dict[str, Any]] = []
    finish_reasons: list[str] = []
    for node in indexed(unflatten(attributes, prefix)):
        if not isinstance(node, dict):
            continue
        role, content = node.get("role"), node.get("content")
        calls = _tool_calls(node.get("tool_calls"))
        if role is None and content is None and not calls:
            continue
        message: dict[str, Any] = {"role": as_text(role) or default_role, "content": content}
        if calls:
            message["tool_calls"] = calls
        if node.get("tool_call_id") is not None:
            message["tool_call_id"] = as_text(node["tool_call_id"])
        reason = as_text(node.get("finish_reason"))
        if reason is not None:
            finish_reasons.append(reason)
        messages.append(message)
    return messages, finish_reasons


def _message_list_text(value: Any) -> str | None:
    """The JSON text of a JSON-string list of messages, else ``None``."""
    parsed = load_json(value)
    return value if isinstance(parsed, list) else None


def normalize_genai(attributes: dict[str, Any], span_name: str) -> None:
    """Add current GenAI keys derived from deprecated ones, in place (see the module contract)."""
    for key in _TRIGGERS:
        if key in attributes:
            break
    else:
        return
    setdefault = attributes.setdefault
    if sc.GEN_AI_SYSTEM in attributes:
        set_missing(attributes, sc.GEN_AI_PROVIDER_NAME, attributes[sc.GEN_AI_SYSTEM])
    if LEGACY_PROMPT_TOKENS in attributes:
        set_missing(attributes, sc.GEN_AI_USAGE_INPUT_TOKENS, attributes[LEGACY_PROMPT_TOKENS])
    if LEGACY_COMPLETION_TOKENS in attributes:
        set_missing(attributes, sc.GEN_AI_USAGE_OUTPUT_TOKENS, attributes[LEGACY_COMPLETION_TOKENS])
    request_type = attributes.get(LEGACY_REQUEST_TYPE)
    if isinstance(request_type, str) and request_type in _REQUEST_TYPES and stated_kind(attributes) is None:
        attributes[sc.GEN_AI_OPERATION_NAME] = _REQUEST_TYPES[request_type]
    if sc.GEN_AI_INPUT_MESSAGES not in attributes:
        prompt, _ = flattened_messages(attributes, PROMPT_PREFIX)
        if prompt:
            attributes[sc.GEN_AI_INPUT_MESSAGES] = dumps(prompt)
        else:
            set_missing(attributes, sc.GEN_AI_INPUT_MESSAGES, _message_list_text(attributes.get(LEGACY_PROMPT)))
    if sc.GEN_AI_OUTPUT_MESSAGES not in attributes or sc.GEN_AI_RESPONSE_FINISH_REASONS not in attributes:
        completion, reasons = flattened_messages(attributes, COMPLETION_PREFIX, "assistant")
        if completion:
            setdefault(sc.GEN_AI_OUTPUT_MESSAGES, dumps(completion))
        else:
            set_missing(attributes, sc.GEN_AI_OUTPUT_MESSAGES, _message_list_text(attributes.get(LEGACY_COMPLETION)))
        if reasons:
            setdefault(sc.GEN_AI_RESPONSE_FINISH_REASONS, reasons)


#: Without any of these keys the normaliser does nothing (the store's converter then skips it).
normalize_genai.triggers = frozenset(_TRIGGERS)  # type: ignore[attr-defined]
