"""Span attributes from LangChain callback payloads (pure functions: no span, no handler state).

Each function takes what a LangChain callback receives (``serialized``, ``metadata``, the run's
inputs or outputs, the callback's ``**kwargs``) and returns the GenAI / agent-rl attributes of
the span :class:`~agent_rl_langchain.handler.AgentRLCallbackHandler` records for it, as a new
``dict`` in the order the attributes are set. Content attributes (messages, arguments,
results, reasoning) are present only when :func:`agent_rl_plugin.integration.capture_content`
is on at call time. Nothing here raises on odd payloads it is documented to accept (``None``
metadata or serialized, missing keys); the handler catches anything else.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from agent_rl_langchain import convert
from agent_rl_plugin.integration import capture_content, new_id, to_attr, to_json_text
from agent_rl_plugin.integration import semconv as sc

__all__ = [
    "SPAN_KIND_CHAIN",
    "LANGGRAPH_NODE",
    "LANGGRAPH_STEP",
    "LANGGRAPH_BUBBLE_UP",
    "langgraph_attributes",
    "serialized_name",
    "maybe_json",
    "agent_attributes",
    "llm_start_attributes",
    "llm_result_attributes",
    "tool_start_attributes",
    "tool_end_attributes",
    "retriever_start_attributes",
    "retriever_end_attributes",
]

SPAN_KIND_CHAIN = "chain"
LANGGRAPH_NODE = "langgraph.node"
LANGGRAPH_STEP = "langgraph.step"
LANGGRAPH_BUBBLE_UP = "langgraph.bubble_up"


def langgraph_attributes(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``langgraph.node`` / ``langgraph.step`` from a run's metadata, where LangGraph set them
    (a string node, an int step that is not a bool)."""
    metadata = metadata or {}
    attrs: dict[str, Any] = {}
    node = metadata.get("langgraph_node")
    if isinstance(node, str):
        attrs[LANGGRAPH_NODE] = node
    step = metadata.get("langgraph_step")
    if isinstance(step, int) and not isinstance(step, bool):
        attrs[LANGGRAPH_STEP] = step
    return attrs


def serialized_name(serialized: Any) -> str | None:
    """The name in a ``serialized`` payload: its ``name``, else the last part of its ``id``."""
    if not isinstance(serialized, Mapping):
        return None
    name = serialized.get("name")
    if isinstance(name, str) and name:
        return name
    ids = serialized.get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else None


def maybe_json(text: Any) -> Any:
    """``text`` parsed as JSON when it is a string holding JSON; else ``text`` unchanged."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def agent_attributes(name: str, inputs: Any) -> dict[str, Any]:
    """An ``invoke_agent`` span's attributes: operation, kind, agent name and role; with content,
    the run's inputs (``agent_rl.input``) and, when they hold ``messages``, those messages."""
    attrs: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
        sc.SPAN_KIND: sc.SPAN_KIND_AGENT,
        sc.GEN_AI_AGENT_NAME: name,
        sc.AGENT_ROLE: "agent",
    }
    if capture_content():
        attrs[sc.ROLLOUT_INPUT] = to_json_text(convert.jsonable(inputs))
        messages = inputs.get("messages") if isinstance(inputs, Mapping) else None
        converted = convert.messages_list(messages)
        if converted is not None:
            attrs[sc.GEN_AI_INPUT_MESSAGES] = to_json_text(converted)
    return attrs


def llm_start_attributes(
    operation: str,
    serialized: Any,
    messages: list[Any],
    metadata: Mapping[str, Any] | None,
    kwargs: Mapping[str, Any],
) -> tuple[str, dict[str, Any]]:
    """(model, attributes) of an LLM run's span at its start: operation, kind, request model,
    provider (``ls_provider``), temperature (invocation params, else ``ls_temperature``) and,
    with content, the input ``messages`` (already in the OpenAI chat shape). The agent name is
    the caller's to add: it depends on the run's ancestors."""
    params = kwargs.get("invocation_params") or {}
    model = convert.model_name(serialized, metadata, params, kwargs.get("name"))
    attrs: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: operation,
        sc.SPAN_KIND: sc.SPAN_KIND_LLM,
        sc.GEN_AI_REQUEST_MODEL: model,
    }
    provider = (metadata or {}).get("ls_provider")
    if isinstance(provider, str) and provider:
        attrs[sc.GEN_AI_PROVIDER_NAME] = provider
    temperature = params.get("temperature", (metadata or {}).get("ls_temperature"))
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        attrs[sc.GEN_AI_REQUEST_TEMPERATURE] = float(temperature)
    if capture_content():
        attrs[sc.GEN_AI_INPUT_MESSAGES] = to_json_text(messages)
    return model, attrs


def llm_result_attributes(response: Any) -> dict[str, Any]:
    """An LLM run's attributes from its ``LLMResult`` (first prompt's generations): usage, finish
    reasons, response model and id; with content, one output message per generation and the
    reasoning text."""
    generations_all = getattr(response, "generations", None) or []
    generations = list(generations_all[0]) if generations_all else []
    llm_output = getattr(response, "llm_output", None) or {}
    attrs: dict[str, Any] = {}
    input_tokens, output_tokens = convert.usage_of(generations, llm_output)
    if input_tokens is not None:
        attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
    if output_tokens is not None:
        attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
    if generations:
        attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = convert.finish_reasons_of(generations)
    first = getattr(generations[0], "message", None) if generations else None
    meta = getattr(first, "response_metadata", None) or {}
    response_model = meta.get("model_name") or meta.get("model") or llm_output.get("model_name")
    if isinstance(response_model, str) and response_model:
        attrs[sc.GEN_AI_RESPONSE_MODEL] = response_model
    response_id = getattr(first, "id", None) or meta.get("id")
    if isinstance(response_id, str) and response_id:
        attrs[sc.GEN_AI_RESPONSE_ID] = response_id
    if capture_content():
        outputs = []
        reasoning = []
        for generation in generations:
            message = getattr(generation, "message", None)
            if message is not None:
                outputs.append(convert.message_dict(message))
                text = convert.reasoning_of(message)
                if text:
                    reasoning.append(text)
            else:
                outputs.append({"role": "assistant", "content": getattr(generation, "text", None)})
        attrs[sc.GEN_AI_OUTPUT_MESSAGES] = to_json_text(outputs)
        if reasoning:
            attrs[sc.REASONING] = to_attr("\n".join(reasoning))
    return attrs


def tool_start_attributes(
    serialized: Mapping[str, Any] | None,
    input_str: str,
    inputs: dict[str, Any] | None,
    kwargs: Mapping[str, Any],
) -> tuple[str, dict[str, Any]]:
    """(tool name, attributes) of a tool run's span at its start: the model's tool-call id
    (``tool_call_id``; a fresh id when LangChain gives none), type ``function``, description and,
    with content, the arguments (``inputs``, else ``input_str`` parsed as JSON when it is)."""
    name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
    call_id = kwargs.get("tool_call_id")
    attrs: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
        sc.GEN_AI_TOOL_NAME: name,
        sc.GEN_AI_TOOL_CALL_ID: str(call_id) if call_id else new_id(),
        sc.GEN_AI_TOOL_TYPE: "function",
    }
    description = (serialized or {}).get("description")
    if isinstance(description, str) and description:
        attrs[sc.GEN_AI_TOOL_DESCRIPTION] = to_attr(description)
    if capture_content():
        arguments = inputs if inputs is not None else maybe_json(input_str)
        attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = to_json_text(convert.jsonable(arguments))
    return name, attrs


def tool_end_attributes(output: Any) -> tuple[dict[str, Any], str | None]:
    """(attributes, error text) of a tool run from its output: with content, the result (a
    ``ToolMessage``'s content, else the output itself); the error text is set only for a
    ``ToolMessage`` with ``status="error"`` (its content, as JSON when not a string)."""
    attrs: dict[str, Any] = {}
    result = output
    error_text = None
    if getattr(output, "type", None) == "tool" and hasattr(output, "tool_call_id"):
        result = getattr(output, "content", None)
        if getattr(output, "status", None) == "error":
            error_text = result if isinstance(result, str) else json.dumps(convert.jsonable(result))
    if capture_content():
        attrs[sc.GEN_AI_TOOL_CALL_RESULT] = to_json_text(convert.jsonable(result))
    return attrs, error_text


def retriever_start_attributes(
    serialized: Mapping[str, Any] | None, query: str, kwargs: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """(name, attributes) of a retriever run: a tool span of type ``datastore`` with a fresh
    tool-call id and, with content, ``{"query": query}`` as its arguments."""
    name = str(kwargs.get("name") or serialized_name(serialized) or "retriever")
    attrs: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
        sc.GEN_AI_TOOL_NAME: name,
        sc.GEN_AI_TOOL_CALL_ID: new_id(),
        sc.GEN_AI_TOOL_TYPE: "datastore",
    }
    if capture_content():
        attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = to_json_text({"query": query})
    return name, attrs


def retriever_end_attributes(documents: Sequence[Any]) -> dict[str, Any]:
    """With content, the retrieved documents as the tool result; else no attributes."""
    return {sc.GEN_AI_TOOL_CALL_RESULT: to_json_text(convert.jsonable(list(documents)))} if capture_content() else {}
