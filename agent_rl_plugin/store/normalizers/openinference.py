"""The ``openinference`` normaliser: OpenInference (Arize Phoenix) spans -> GenAI keys.

Attribute names follow ``openinference-semantic-conventions`` (``openinference/semconv/trace``,
checked against 0.1.42 and spans of ``openinference-instrumentation-openai`` 0.1.66). A span is
translated when it has ``openinference.span.kind`` (or ``llm.input_messages.0.*`` /
``llm.model_name`` without one). Keys already present are never overwritten.

========================================  ==================================================
OpenInference                             canonical key
========================================  ==================================================
``openinference.span.kind`` LLM           ``gen_ai.operation.name`` ``chat`` (``text_completion``
                                          when only ``llm.prompts`` is there)
``openinference.span.kind`` TOOL          ``execute_tool``
``openinference.span.kind`` AGENT         ``invoke_agent``
``openinference.span.kind`` CHAIN         ``invoke_workflow`` (a parentless one is a rollout root)
``llm.provider``, else ``llm.system``     ``gen_ai.provider.name``
``llm.request.model_name``, else          ``gen_ai.request.model``
``llm.invocation_parameters`` ``model``,
else ``llm.model_name``
``llm.response.model_name``, else         ``gen_ai.response.model``
``llm.model_name``
``llm.token_count.prompt/completion``     ``gen_ai.usage.input_tokens/output_tokens`` (a missing
(``llm.token_count.total``)               side: total minus the other)
``llm.input_messages.N.message.*``        ``gen_ai.input.messages`` (else the ``messages`` of a
                                          JSON ``input.value``)
``llm.output_messages.N.message.*``       ``gen_ai.output.messages`` (else the ``choices`` of a
                                          JSON ``output.value``)
``llm.finish_reason``                     ``gen_ai.response.finish_reasons``
``tool.name``, ``tool.description``       ``gen_ai.tool.name``, ``gen_ai.tool.description``
``tool_call.id``, else ``tool.id``        ``gen_ai.tool.call.id``
``tool_call.function.arguments``, else    ``gen_ai.tool.call.arguments`` (TOOL spans)
``input.value``
``output.value``                          ``gen_ai.tool.call.result`` (TOOL spans)
``input.value`` / ``output.value``        ``agent_rl.input`` / ``agent_rl.output`` (AGENT, CHAIN)
``agent.name``                            ``gen_ai.agent.name``
``session.id``                            ``gen_ai.conversation.id``
========================================  ==================================================

A message ``llm.*_messages.N.message.{role, content, name, tool_call_id}`` becomes ``{"role",
"content"[, "name"][, "tool_call_id"]}``; ``message.contents.M.message_content.{type, text,
image.image.url}`` becomes a list content (``{"type": "text", "text"}`` /
``{"type": "image_url", "image_url": {"url"}}``); ``message.tool_calls.M.tool_call.{id,
function.name, function.arguments}`` (and the older ``message.function_call_name`` /
``function_call_arguments_json``) become OpenAI-style ``tool_calls``. ``input.value`` /
``output.value`` become JSON text: a ``text/plain`` value as a JSON string, any other value
kept when it is valid JSON, else as a JSON string. ``tool.parameters`` is the tool's parameter
*schema*, not the call's arguments, so it is left as it is.
"""

from __future__ import annotations

from typing import Any

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store.normalizers._util import (
    AGENT,
    LLM,
    OPERATION_OF_KIND,
    TOOL,
    WORKFLOW,
    as_text,
    dumps,
    fill_tokens,
    indexed,
    json_text,
    load_json,
    set_missing,
    stated_kind,
    sub,
    unflatten,
)

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
LLM_PROVIDER = "llm.provider"
LLM_SYSTEM = "llm.system"
LLM_MODEL_NAME = "llm.model_name"
LLM_REQUEST_MODEL_NAME = "llm.request.model_name"
LLM_RESPONSE_MODEL_NAME = "llm.response.model_name"
LLM_INVOCATION_PARAMETERS = "llm.invocation_parameters"
LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
LLM_TOKEN_COUNT_TOTAL = "llm.token_count.total"
LLM_INPUT_MESSAGES = "llm.input_messages."
LLM_OUTPUT_MESSAGES = "llm.output_messages."
LLM_PROMPTS = "llm.prompts"
LLM_FINISH_REASON = "llm.finish_reason"
TOOL_NAME = "tool.name"
TOOL_DESCRIPTION = "tool.description"
TOOL_ID = "tool.id"
TOOL_CALL_ID = "tool_call.id"
TOOL_CALL_ARGUMENTS = "tool_call.function.arguments"
AGENT_NAME = "agent.name"
SESSION_ID = "session.id"

KINDS = {"LLM": LLM, "TOOL": TOOL, "AGENT": AGENT, "CHAIN": WORKFLOW}
_TRIGGERS = (SPAN_KIND, LLM_INPUT_MESSAGES + "0.message.role", LLM_MODEL_NAME)


def _content_part(node: Any) -> Any:
    content = sub(node, "message_content")
    if not isinstance(content, dict):
        return node
    kind = content.get("type")
    if kind == "text" or (kind is None and "text" in content):
        return {"type": "text", "text": content.get("text")}
    url = sub(content, "image", "image", "url")
    if kind == "image" or url is not None:
        return {"type": "image_url", "image_url": {"url": url}}
    return {key: value for key, value in content.items()}


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for node in indexed(message.get("tool_calls")):
        call = sub(node, "tool_call")
        if not isinstance(call, dict):
            continue
        calls.append(
            {
                "id": as_text(call.get("id")),
                "type": "function",
                "function": {
                    "name": as_text(sub(call, "function", "name")),
                    "arguments": sub(call, "function", "arguments"),
                },
            }
        )
    if not calls and message.get("function_call_name") is not None:
        calls.append(
            {
                "id": None,
                "type": "function",
                "function": {
                    "name": as_text(message["function_call_name"]),
                    "arguments": message.get("function_call_arguments_json"),
                },
            }
        )
    return calls


def messages(attributes: dict[str, Any], prefix: str, default_role: str) -> list[dict[str, Any]]:
    """Chat messages from OpenInference's flattened ``prefix N.message.*`` keys."""
    out = []
    for node in indexed(unflatten(attributes, prefix)):
        message = sub(node, "message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if content is None and message.get("contents") is not None:
            content = [_content_part(part) for part in indexed(message["contents"])]
        calls = _tool_calls(message)
        role = message.get("role")
        if role is None and content is None and not calls:
            continue
        item: dict[str, Any] = {"role": as_text(role) or default_role, "content": content}
        if message.get("name") is not None:
            item["name"] = as_text(message["name"])
        if calls:
            item["tool_calls"] = calls
        if message.get("tool_call_id") is not None:
            item["tool_call_id"] = as_text(message["tool_call_id"])
        out.append(item)
    return out


def _request_messages(value: Any) -> str | None:
    """The ``messages`` of a JSON request body, as JSON text."""
    parsed = load_json(value)
    found = parsed.get("messages") if isinstance(parsed, dict) else None
    return dumps(found) if isinstance(found, list) else None


def _response_messages(value: Any) -> str | None:
    """The ``choices[].message`` of a JSON chat completion, as JSON text."""
    parsed = load_json(value)
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list):
        return None
    found = [c["message"] for c in choices if isinstance(c, dict) and isinstance(c.get("message"), dict)]
    return dumps(found) if found else None


def _request_model(attributes: dict[str, Any]) -> Any:
    model = attributes.get(LLM_REQUEST_MODEL_NAME)
    if model is None:
        params = load_json(attributes.get(LLM_INVOCATION_PARAMETERS))
        model = params.get("model") if isinstance(params, dict) else None
    return model if model is not None else attributes.get(LLM_MODEL_NAME)


def _llm(attributes: dict[str, Any]) -> None:
    provider = attributes.get(LLM_PROVIDER)
    set_missing(attributes, sc.GEN_AI_PROVIDER_NAME, provider if provider is not None else attributes.get(LLM_SYSTEM))
    if sc.GEN_AI_REQUEST_MODEL not in attributes:
        set_missing(attributes, sc.GEN_AI_REQUEST_MODEL, as_text(_request_model(attributes)))
    response_model = attributes.get(LLM_RESPONSE_MODEL_NAME)
    set_missing(
        attributes,
        sc.GEN_AI_RESPONSE_MODEL,
        as_text(response_model if response_model is not None else attributes.get(LLM_MODEL_NAME)),
    )
    fill_tokens(
        attributes,
        attributes.get(LLM_TOKEN_COUNT_PROMPT),
        attributes.get(LLM_TOKEN_COUNT_COMPLETION),
        attributes.get(LLM_TOKEN_COUNT_TOTAL),
    )
    if sc.GEN_AI_INPUT_MESSAGES not in attributes:
        found = messages(attributes, LLM_INPUT_MESSAGES, "user")
        set_missing(
            attributes,
            sc.GEN_AI_INPUT_MESSAGES,
            dumps(found) if found else _request_messages(attributes.get(INPUT_VALUE)),
        )
    if sc.GEN_AI_OUTPUT_MESSAGES not in attributes:
        found = messages(attributes, LLM_OUTPUT_MESSAGES, "assistant")
        set_missing(
            attributes,
            sc.GEN_AI_OUTPUT_MESSAGES,
            dumps(found) if found else _response_messages(attributes.get(OUTPUT_VALUE)),
        )
    reason = attributes.get(LLM_FINISH_REASON)
    if reason is not None:
        set_missing(
            attributes,
            sc.GEN_AI_RESPONSE_FINISH_REASONS,
            [as_text(r) for r in reason] if isinstance(reason, (list, tuple)) else [as_text(reason)],
        )


def _tool(attributes: dict[str, Any]) -> None:
    set_missing(attributes, sc.GEN_AI_TOOL_NAME, as_text(attributes.get(TOOL_NAME)))
    set_missing(attributes, sc.GEN_AI_TOOL_DESCRIPTION, as_text(attributes.get(TOOL_DESCRIPTION)))
    call_id = attributes.get(TOOL_CALL_ID)
    if call_id is None:
        call_id = attributes.get(TOOL_ID)
    set_missing(attributes, sc.GEN_AI_TOOL_CALL_ID, as_text(call_id))
    if sc.GEN_AI_TOOL_CALL_ARGUMENTS not in attributes:
        arguments = attributes.get(TOOL_CALL_ARGUMENTS)
        set_missing(
            attributes,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS,
            json_text(arguments)
            if arguments is not None
            else json_text(attributes.get(INPUT_VALUE), attributes.get(INPUT_MIME_TYPE)),
        )
    if sc.GEN_AI_TOOL_CALL_RESULT not in attributes:
        set_missing(
            attributes,
            sc.GEN_AI_TOOL_CALL_RESULT,
            json_text(attributes.get(OUTPUT_VALUE), attributes.get(OUTPUT_MIME_TYPE)),
        )


def _input_output(attributes: dict[str, Any]) -> None:
    if sc.ROLLOUT_INPUT not in attributes:
        set_missing(
            attributes, sc.ROLLOUT_INPUT, json_text(attributes.get(INPUT_VALUE), attributes.get(INPUT_MIME_TYPE))
        )
    if sc.ROLLOUT_OUTPUT not in attributes:
        set_missing(
            attributes, sc.ROLLOUT_OUTPUT, json_text(attributes.get(OUTPUT_VALUE), attributes.get(OUTPUT_MIME_TYPE))
        )


def normalize_openinference(attributes: dict[str, Any], span_name: str) -> None:
    """Add canonical keys translated from OpenInference ones, in place (see the module table)."""
    for key in _TRIGGERS:
        if key in attributes:
            break
    else:
        return
    kind = stated_kind(attributes)
    if kind is None:
        own = attributes.get(SPAN_KIND)
        kind = KINDS.get(own.upper()) if isinstance(own, str) else None
        if kind is None and SPAN_KIND not in attributes:
            kind = LLM  # llm.* keys without a span kind: an LLM call
        if kind is not None:
            operation = OPERATION_OF_KIND[kind]
            if kind == LLM and LLM_INPUT_MESSAGES + "0.message.role" not in attributes and LLM_PROMPTS in attributes:
                operation = sc.OP_TEXT_COMPLETION
            attributes[sc.GEN_AI_OPERATION_NAME] = operation
    session = attributes.get(SESSION_ID)
    set_missing(attributes, sc.GEN_AI_CONVERSATION_ID, as_text(session))
    set_missing(attributes, sc.GEN_AI_AGENT_NAME, as_text(attributes.get(AGENT_NAME)))
    if kind == LLM:
        _llm(attributes)
    elif kind == TOOL:
        _tool(attributes)
    elif kind in (AGENT, WORKFLOW):
        _input_output(attributes)


#: Without any of these keys the normaliser does nothing (the store's converter then skips it).
normalize_openinference.triggers = frozenset(_TRIGGERS)  # type: ignore[attr-defined]
