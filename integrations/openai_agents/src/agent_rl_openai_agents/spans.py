"""How each kind of Agents SDK span is recorded: its OTel span, attributes and events.

:func:`record_start` runs when the SDK starts a span, :func:`record_end` when it ends it; the
processor calls them with the span's :class:`~agent_rl_openai_agents.state.SpanState` (the
SDK's tree, the trace it belongs to) and the SDK span's ``span_data``. The mapping, kind by kind,
is the table of :mod:`agent_rl_openai_agents.processor`. OTel spans are opened under the nearest
recorded ancestor (else the trace's span) with the trace's rollout attributes, the SDK's span
id and type, and the SDK's start time; they end at the SDK's end time. LLM calls (``generation``
/ ``response``) and handoffs are recorded whole when they end; an LLM call inside another
recorded one is left out; an empty ``generation`` span (no model, input, output, usage) is
marked ``skipped`` and its turn synthesises the call from its usage instead. What later spans
need is written back to the states: a turn's ``had_llm``, the tool calls still to match
(:func:`match_call`), an agent's first input and last text output, the trace's final output
and error. These functions raise what the OTel SDK or a conversion raises; the processor's
callbacks catch it.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace as otel_trace

from agent_rl_openai_agents.convert import (
    as_plain,
    message_text,
    parse_json,
    to_chat_messages,
    tool_calls_of,
    usage_numbers,
)
from agent_rl_openai_agents.span_errors import error_detail, error_kind, error_text
from agent_rl_openai_agents.state import SpanState
from agent_rl_plugin import integration as rl
from agent_rl_plugin.integration import (
    capture_content,
    end_span,
    new_id,
    pause_client_capture,
    record_error_text,
    to_attr,
    to_attribute_value,
    to_json_text,
)
from agent_rl_plugin.integration import semconv as sc

__all__ = [
    "SDK_TRACE_ID",
    "SDK_SPAN_ID",
    "SDK_SPAN_TYPE",
    "SDK_DATA",
    "SDK_USAGE",
    "SDK_MODEL_CONFIG",
    "SDK_LLM_FROM",
    "SDK_AGENT_TOOLS",
    "SDK_AGENT_HANDOFFS",
    "SDK_AGENT_OUTPUT_TYPE",
    "SDK_MCP_DATA",
    "EVENT_HANDOFF",
    "EVENT_GUARDRAIL",
    "LLM_TYPES",
    "start_span",
    "record_start",
    "record_end",
    "match_call",
    "add_event",
]

# Attributes of our own (the SDK's ids and data, for cross-reference).
SDK_TRACE_ID = "openai_agents.trace_id"
SDK_SPAN_ID = "openai_agents.span_id"
SDK_SPAN_TYPE = "openai_agents.span_type"
SDK_DATA = "openai_agents.data"
SDK_USAGE = "openai_agents.usage"
SDK_MODEL_CONFIG = "openai_agents.model_config"
SDK_LLM_FROM = "openai_agents.llm_from"  # "turn": synthesised from a turn span (no content)
SDK_AGENT_TOOLS = "openai_agents.agent.tools"
SDK_AGENT_HANDOFFS = "openai_agents.agent.handoffs"
SDK_AGENT_OUTPUT_TYPE = "openai_agents.agent.output_type"
SDK_MCP_DATA = "openai_agents.mcp_data"

EVENT_HANDOFF = "handoff"
EVENT_GUARDRAIL = "guardrail"
LLM_TYPES = ("generation", "response")


def start_span(node: SpanState, name: str, attributes: dict[str, Any]) -> Any:
    """Start the OTel span of ``node`` (see the module docstring) with ``attributes``."""
    parent = node.otel_parent()
    context = otel_trace.set_span_in_context(parent) if parent is not None else None
    attrs = {**node.trace.attrs, SDK_SPAN_ID: node.span_id, SDK_SPAN_TYPE: node.kind, **attributes}
    return rl.start_span(name, attributes=attrs, context=context, start_time=node.start_ns)


# -- start and end, by kind ---------------------------------------------------------------------
def record_start(node: SpanState, data: Any) -> None:
    """An SDK span started: open its OTel span now (``node.otel``), or, for an LLM call, pause
    agent-rl's client capture until it ends (``node.paused``: the processor resumes it)."""
    kind = node.kind
    if kind == "agent":
        node.name = str(getattr(data, "name", "") or "agent")
        node.otel = start_span(
            node,
            f"{sc.OP_INVOKE_AGENT} {node.name}",
            {
                sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                sc.SPAN_KIND: sc.SPAN_KIND_AGENT,
                sc.GEN_AI_AGENT_NAME: node.name,
                sc.AGENT_ROLE: "agent",
            },
        )
    elif kind == "function":
        tool = str(getattr(data, "name", "") or "tool")
        node.otel = start_span(
            node,
            f"{sc.OP_EXECUTE_TOOL} {tool}",
            {
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
                sc.GEN_AI_TOOL_NAME: tool,
            },
        )
    elif kind == "guardrail":
        node.otel = start_span(node, f"guardrail {getattr(data, 'name', '')}", {sc.SPAN_KIND: sc.SPAN_KIND_EVENT})
    elif kind == "turn":
        node.name = str(getattr(data, "agent_name", "") or "")
        node.otel = start_span(node, f"turn {getattr(data, 'turn', '')} {node.name}".strip(), {})
    elif kind in LLM_TYPES:
        # Recorded when it ends. Meanwhile the OpenAI SDK call the model makes is not
        # captured by agent-rl's client capture: this span is its one row of llm_calls.
        node.paused = pause_client_capture()
    elif kind == "handoff":
        pass  # recorded when it ends (no children of its own)
    else:
        label = getattr(data, "name", None) or getattr(data, "server", None)
        if kind == "custom":
            name = str(label or kind)
        else:
            name = f"{kind} {label}" if label else kind
        node.otel = start_span(node, name, {})


def record_end(node: SpanState, data: Any, error: Any, end_ns: int) -> None:
    """An SDK span ended (``error``: its ``SpanError``, if any): record it, end its OTel span."""
    kind = node.kind
    if kind in LLM_TYPES:
        _llm_end(node, data, error, end_ns)
        return
    if kind == "handoff":
        _handoff_end(node, data, error, end_ns)
        return
    otel = node.otel
    if otel is None:
        return
    if kind == "agent":
        _agent_end(node, data, error)
    elif kind == "function":
        _function_end(node, data)
    elif kind == "guardrail":
        _guardrail_end(node, data)
    elif kind == "turn":
        _turn_end(node, data, error, end_ns)
    else:
        exported = _exported_data(data)
        if exported:
            otel.set_attribute(SDK_DATA, to_json_text(exported))
        usage = getattr(data, "usage", None)
        if usage is not None:
            otel.set_attribute(SDK_USAGE, to_json_text(usage))
        if kind == "task" and error:
            node.trace.error = (error_kind(error), error_detail(error))
    if error:
        record_error_text(otel, error_kind(error), error_detail(error))
    end_span(otel, end_time=end_ns)


def _exported_data(data: Any) -> Any:
    """A span's data as plain JSON-able values: a custom span's ``data``, else ``data.export()``
    (``None`` when that fails)."""
    if getattr(data, "type", None) == "custom" and hasattr(data, "data"):
        return as_plain(data.data)
    try:
        exported = data.export()
    except Exception:
        return None
    return as_plain(exported)


# -- agent -------------------------------------------------------------------------------------
def _agent_end(node: SpanState, data: Any, error: Any) -> None:
    """An agent span: its tools, handoffs, output type, first input and last output; its output
    becomes the trace's final output, its error the trace's error."""
    otel = node.otel
    for key, value in (
        (SDK_AGENT_TOOLS, getattr(data, "tools", None)),
        (SDK_AGENT_HANDOFFS, getattr(data, "handoffs", None)),
    ):
        if value is not None:
            otel.set_attribute(key, to_json_text(list(value)))
    output_type = getattr(data, "output_type", None)
    if output_type is not None:
        otel.set_attribute(SDK_AGENT_OUTPUT_TYPE, str(output_type))
    if capture_content():
        if node.first_input is not None:
            otel.set_attribute(sc.ROLLOUT_INPUT, to_json_text(node.first_input))
        if node.output is not None:
            otel.set_attribute(sc.ROLLOUT_OUTPUT, to_json_text(node.output))
    state = node.trace
    if node.output is not None:
        state.final_output = node.output
    # A failed agent span: the run raised (MaxTurnsExceeded, a model error...).
    if error:
        state.error = (error_kind(error), error_detail(error))


# -- LLM calls ---------------------------------------------------------------------------------
def _llm_end(node: SpanState, data: Any, error: Any, end_ns: int) -> None:
    """A ``generation`` / ``response`` span: one ``chat {model}`` LLM call (messages, usage, finish
    reason, model, provider, config); its tool calls become the turn's (else the agent's)
    pending calls, its input and text output the agent's and the trace's."""
    if node.ancestor(*LLM_TYPES) is not None:
        return  # a model call inside another recorded model call (e.g. a wrapped model)
    kind = node.kind
    response = getattr(data, "response", None) if kind == "response" else None
    model = getattr(data, "model", None) if kind == "generation" else getattr(response, "model", None)
    raw_input = getattr(data, "input", None)
    raw_output = getattr(data, "output", None) if kind == "generation" else getattr(response, "output", None)
    usage = getattr(data, "usage", None) or getattr(response, "usage", None)
    config = getattr(data, "model_config", None) if kind == "generation" else None
    if not error and model is None and raw_input is None and raw_output is None and usage is None and response is None:
        node.skipped = True  # an empty generation span (e.g. a scripted model): see turns
        return
    input_messages, _ = to_chat_messages(raw_input)
    instructions = getattr(response, "instructions", None)
    if (
        isinstance(instructions, str)
        and instructions
        and not any(m.get("role") in ("system", "developer") for m in input_messages[:1])
    ):
        input_messages.insert(0, {"role": "system", "content": instructions})
    output_messages, reasoning = to_chat_messages(raw_output)
    for message in output_messages:
        if message.get("role") == "user":  # a chat-completions output message has a role
            message["role"] = "assistant"
    calls = tool_calls_of(output_messages)
    text = message_text(output_messages)
    input_tokens, output_tokens = usage_numbers(as_plain(usage))
    agent = node.ancestor("agent")
    attrs: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.SPAN_KIND: sc.SPAN_KIND_LLM,
        sc.GEN_AI_REQUEST_MODEL: str(model or "unknown"),
    }
    if response is not None:
        attrs[sc.GEN_AI_PROVIDER_NAME] = "openai"
        if getattr(response, "model", None):
            attrs[sc.GEN_AI_RESPONSE_MODEL] = str(response.model)
        if getattr(response, "id", None):
            attrs[sc.GEN_AI_RESPONSE_ID] = str(response.id)
    if agent is not None:
        attrs[sc.GEN_AI_AGENT_NAME] = agent.name
    if input_tokens is not None:
        attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
    if output_tokens is not None:
        attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
    attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = ["error" if error else "tool_calls" if calls else "stop"]
    if config:
        plain = as_plain(config)
        base_url = plain.get("base_url") if isinstance(plain, dict) else None
        if isinstance(base_url, str) and "api.openai.com" in base_url:
            attrs[sc.GEN_AI_PROVIDER_NAME] = "openai"
        attrs[SDK_MODEL_CONFIG] = to_json_text(plain)
        if isinstance(plain, dict) and isinstance(plain.get("temperature"), (int, float)):
            attrs[sc.GEN_AI_REQUEST_TEMPERATURE] = float(plain["temperature"])
    if capture_content():
        if raw_input is not None or input_messages:
            attrs[sc.GEN_AI_INPUT_MESSAGES] = to_json_text(input_messages)
        if raw_output is not None:
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = to_json_text(output_messages)
        if reasoning:
            attrs[sc.REASONING] = to_attr(reasoning)
    otel = start_span(node, f"{sc.OP_CHAT} {model or 'unknown'}", attrs)
    if error:
        record_error_text(otel, error_kind(error), error_detail(error))
    end_span(otel, end_time=end_ns)
    # What the rest of the run needs: the turn had a call, the tool calls to match, the
    # agent's input and (text) output.
    turn = node.ancestor("turn")
    if turn is not None:
        turn.had_llm = True
    holder = turn or agent
    if holder is not None:
        holder.pending_calls.extend(calls)
    if agent is not None:
        if agent.first_input is None and raw_input is not None:
            agent.first_input = [m for m in input_messages if m.get("role") not in ("system", "developer")]
            if node.trace.first_input is None:  # the run's input: the first call's
                node.trace.first_input = agent.first_input
        if raw_output is not None:
            agent.output = text if not calls else None


def _turn_end(node: SpanState, data: Any, error: Any, end_ns: int) -> None:
    """A turn: its number, agent and usage; when no LLM call was recorded inside but it has
    usage, a ``chat unknown`` call (no content) from its start to its first child."""
    otel = node.otel
    usage = as_plain(getattr(data, "usage", None))
    otel.set_attribute("openai_agents.turn", to_attribute_value(getattr(data, "turn", None), 64))
    if node.name:
        otel.set_attribute(sc.GEN_AI_AGENT_NAME, node.name)
    if usage is not None:
        otel.set_attribute(SDK_USAGE, to_json_text(usage))
    if node.had_llm or usage is None:
        return
    # The model emitted no generation span (a custom Model): one LLM call without content,
    # with the turn's usage, from the turn's start to its first child (tools, handoffs).
    input_tokens, output_tokens = usage_numbers(usage)
    attrs: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.SPAN_KIND: sc.SPAN_KIND_LLM,
        sc.GEN_AI_REQUEST_MODEL: "unknown",
        SDK_LLM_FROM: "turn",
    }
    if node.name:
        attrs[sc.GEN_AI_AGENT_NAME] = node.name
    if input_tokens is not None:
        attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
    if output_tokens is not None:
        attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
    llm = SpanState(new_id()[:16], "generation", node.trace, node, node.start_ns)
    span = start_span(llm, f"{sc.OP_CHAT} unknown", attrs)
    end_span(span, end_time=min(end_ns, node.first_child_ns or end_ns))


# -- tools -------------------------------------------------------------------------------------
def _function_end(node: SpanState, data: Any) -> None:
    """A tool execution: the matching tool-call id (a fresh one when none matches), arguments,
    result and MCP data."""
    otel = node.otel
    arguments = getattr(data, "input", None)
    holder = node.ancestor("turn") or node.ancestor("agent")
    call_id = match_call(holder, getattr(data, "name", None), arguments)
    otel.set_attribute(sc.GEN_AI_TOOL_CALL_ID, call_id or new_id())
    if capture_content():
        if arguments is not None:
            otel.set_attribute(sc.GEN_AI_TOOL_CALL_ARGUMENTS, to_json_text(parse_json(arguments)))
        output = getattr(data, "output", None)
        if output is not None:
            otel.set_attribute(sc.GEN_AI_TOOL_CALL_RESULT, to_json_text(as_plain(output)))
    mcp = getattr(data, "mcp_data", None)
    if mcp:
        otel.set_attribute(SDK_MCP_DATA, to_json_text(as_plain(mcp)))


def match_call(holder: SpanState | None, name: Any, arguments: Any) -> str | None:
    """The id of the LLM's tool call this execution answers (same name, same arguments
    when known, first not yet used)."""
    if holder is None:
        return None
    pending = holder.pending_calls
    for exact in (True, False):
        for index, call in enumerate(pending):
            function = call.get("function") or {}
            if function.get("name") != name:
                continue
            if exact and arguments is not None and function.get("arguments") != arguments:
                continue
            pending.pop(index)
            return str(call["id"]) if call.get("id") else None
    return None


# -- coordination events -----------------------------------------------------------------------
def add_event(
    otel: Any,
    event_type: str,
    time_ns: int,
    *,
    agent_id: Any = None,
    target: Any = None,
    reason: str | None = None,
    **data: Any,
) -> None:
    """An agent-rl event (``agent_rl.event``) on ``otel`` at ``time_ns``, in the rollout of its
    ``agent_rl.rollout.id``; ``None`` fields are left out, the rest of ``data`` is its JSON data."""
    attrs: dict[str, Any] = {sc.EVENT_TYPE: event_type}
    attributes = getattr(otel, "attributes", None) or {}
    rollout_id = attributes.get(sc.ROLLOUT_ID)
    if rollout_id is not None:
        attrs[sc.ROLLOUT_ID] = rollout_id
    if agent_id is not None:
        attrs[sc.EVENT_AGENT_ID] = str(agent_id)
    if target is not None:
        attrs[sc.EVENT_TARGET] = str(target)
    if reason is not None:
        attrs[sc.EVENT_REASON] = to_attr(reason)
    data = {k: v for k, v in data.items() if v is not None}
    if data:
        attrs[sc.EVENT_DATA] = to_json_text(data)
    otel.add_event(sc.EVENT_NAME, attributes=attrs, timestamp=time_ns)


def _handoff_end(node: SpanState, data: Any, error: Any, end_ns: int) -> None:
    """A handoff: a ``handoff {from} -> {to}`` event span with a ``handoff`` event."""
    source = getattr(data, "from_agent", None)
    target = getattr(data, "to_agent", None)
    otel = start_span(node, f"handoff {source} -> {target}", {sc.SPAN_KIND: sc.SPAN_KIND_EVENT})
    add_event(otel, EVENT_HANDOFF, node.start_ns, agent_id=source, target=target, error=error_text(error))
    if error:
        record_error_text(otel, error_kind(error), error_detail(error))
    end_span(otel, end_time=end_ns)


def _guardrail_end(node: SpanState, data: Any) -> None:
    """A guardrail: a ``guardrail`` event; a triggered tripwire becomes the trace's error."""
    agent = node.ancestor("agent")
    triggered = bool(getattr(data, "triggered", False))
    if triggered:  # an agent's input/output guardrail tripwire: the run raises
        node.trace.error = ("guardrail tripwire triggered", str(getattr(data, "name", "") or "") or None)
    add_event(
        node.otel,
        EVENT_GUARDRAIL,
        node.start_ns,
        agent_id=agent.name if agent is not None else None,
        reason="tripwire triggered" if triggered else None,
        guardrail=getattr(data, "name", None),
        triggered=triggered,
    )
