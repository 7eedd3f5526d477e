"""``RLTracingProcessor``: the Agents SDK's traces and spans as agent-rl OpenTelemetry spans.

Register it with the SDK (:func:`instrument` does): ``agents.add_trace_processor(p)`` keeps the
SDK's own exporter (traces also go to the OpenAI dashboard when an API key is set);
``agents.set_trace_processors([p])`` makes it the only processor (nothing leaves the process).

Mapping (one OTel span per SDK span, same tree, the SDK's timestamps):

==================  ===========================================================================
SDK                 recorded
==================  ===========================================================================
trace               the rollout: root span ``rollout {workflow_name}`` (rollout id = the trace
                    id without ``trace_``); inside an ``arl.rollout()`` / traced agent, a
                    ``workflow {name}`` span of that rollout instead
agent               ``invoke_agent {name}`` (``agents`` view); input = its first LLM call's
                    messages, output = its last LLM text when that had no tool calls
generation          ``chat {model}`` (``llm_calls``): input/output messages, model, usage, config
response            ``chat {model}`` from the ``Response`` (OpenAI Responses models)
function            ``execute_tool {name}`` (``tool_calls``): arguments, result, error; the
                    ``call_id`` of the matching tool call of the LLM output when known
handoff             ``handoff`` event (``events``): agent_id = from, target = to
guardrail           ``guardrail`` event: agent_id = the agent, data = {guardrail, triggered}
turn                ``turn {n} {agent}``; a turn whose model emitted no generation span (a
                    custom ``Model`` not wrapped by :func:`instrument_model`) gets a
                    ``chat unknown`` LLM call with the turn's token usage and no content
task, custom, ...   a plain span of the same name (its data as JSON)
==================  ===========================================================================

Processor callbacks never raise into the SDK (failures are logged once) and never change the
SDK objects they are given.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agents.tracing import TracingProcessor
from opentelemetry import trace as otel_trace

from agent_rl_openai_agents.convert import (
    as_plain,
    iso_to_ns,
    message_text,
    parse_json,
    rollout_id_for,
    to_chat_messages,
    tool_calls_of,
    usage_numbers,
)
from agent_rl_plugin import integration as rl
from agent_rl_plugin.integration import (
    RolloutInfo,
    capture_content,
    current_rollout,
    end_span,
    fire_rollout_end,
    fire_rollout_start,
    is_recording,
    log_failure,
    new_id,
    pause_client_capture,
    record_error_text,
    resume_client_capture,
    to_attr,
    to_attribute_value,
    to_json_text,
)
from agent_rl_plugin.integration import semconv as sc

logger = logging.getLogger(__name__)

__all__ = ["RLTracingProcessor", "instrument", "uninstrument", "installed_processor"]

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


def _error_text(error: Any) -> str | None:
    """'message: detail' of an SDK ``SpanError`` (``None`` when there is none)."""
    if not error:
        return None
    if isinstance(error, dict):
        message = str(error.get("message") or "error")
        data = error.get("data")
        detail = data.get("error") if isinstance(data, dict) else data
        return f"{message}: {detail}" if detail not in (None, "") else message
    return str(error)


def _error_kind(error: Any) -> str:
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return "error"


@dataclass
class _Trace:
    trace_id: str
    attrs: dict[str, str]
    span: Any  # our span for the trace (rollout root, or workflow span in a caller's rollout)
    info: RolloutInfo | None  # set when the trace is its own rollout
    outer: Any = None  # the caller's rollout span when the trace joined one
    first_input: Any = None
    final_output: str | None = None
    error: tuple[str, str | None] | None = None  # (kind, detail) of what ended the run


@dataclass
class _Span:
    span_id: str
    kind: str
    trace: _Trace
    parent: _Span | None
    start_ns: int
    otel: Any = None
    name: str | None = None  # agent name (agent spans)
    had_llm: bool = False  # turn spans: an LLM call was recorded inside
    first_child_ns: int | None = None
    pending_calls: list[dict[str, Any]] = field(default_factory=list)  # tool calls not yet run
    first_input: Any = None  # agent spans
    output: str | None = None  # agent spans: last LLM text without tool calls
    skipped: bool = False
    paused: Any = None  # LLM spans: the pause_client_capture() token while the call runs

    def ancestor(self, *kinds: str) -> _Span | None:
        node = self.parent
        while node is not None:
            if node.kind in kinds:
                return node
            node = node.parent
        return None

    def otel_parent(self) -> Any:
        node = self.parent
        while node is not None:
            if node.otel is not None:
                return node.otel
            node = node.parent
        return self.trace.span


class RLTracingProcessor(TracingProcessor):
    """Records the SDK's traces as agent-rl rollouts (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: dict[str, _Trace] = {}
        self._spans: dict[str, _Span] = {}
        self.active = True

    # -- traces -----------------------------------------------------------------------------
    def on_trace_start(self, trace: Any) -> None:
        if not self.active or not is_recording():
            return
        try:
            self._trace_start(trace)
        except Exception:
            log_failure("openai-agents: recording a trace start")

    def _trace_start(self, trace: Any) -> None:
        trace_id = str(trace.trace_id)
        name = str(getattr(trace, "name", None) or "Agent workflow")
        metadata = {
            "framework": "openai-agents",
            "workflow_name": name,
            "trace_id": trace_id,
            "group_id": getattr(trace, "group_id", None),
            "trace_metadata": as_plain(getattr(trace, "metadata", None)),
        }
        metadata = {k: v for k, v in metadata.items() if v is not None}
        tracer = rl.get_tracer()
        now = time.time_ns()
        current = current_rollout()
        if current is not None:  # inside the caller's rollout: one span of it
            outer = otel_trace.get_current_span()
            span = tracer.start_span(
                f"workflow {name}",
                start_time=now,
                attributes={**current.attributes, SDK_TRACE_ID: trace_id, SDK_DATA: to_json_text(metadata)},
            )
            state = _Trace(
                trace_id, dict(current.attributes), span, None, outer=outer if outer.is_recording() else None
            )
        else:
            info = RolloutInfo(rollout_id=rollout_id_for(trace_id), metadata=metadata, name=name, implicit=True)
            span = tracer.start_span(
                f"rollout {name}",
                start_time=now,
                attributes={
                    sc.SPAN_KIND: sc.SPAN_KIND_ROLLOUT,
                    sc.ROLLOUT_ROOT: True,
                    **info.attributes,
                    sc.ROLLOUT_METADATA: to_json_text(metadata),
                    SDK_TRACE_ID: trace_id,
                },
            )
            state = _Trace(trace_id, dict(info.attributes), span, info)
            fire_rollout_start(info)
        with self._lock:
            self._traces[trace_id] = state

    def on_trace_end(self, trace: Any) -> None:
        try:
            with self._lock:
                state = self._traces.pop(str(trace.trace_id), None)
                orphans = [s for s in self._spans.values() if s.trace is state] if state else []
                for orphan in orphans:
                    self._spans.pop(orphan.span_id, None)
            if state is None:
                return
            now = time.time_ns()
            for orphan in orphans:  # spans the SDK never finished
                if orphan.otel is not None:
                    record_error_text(orphan.otel, "unfinished", "the trace ended before this span")
                    end_span(orphan.otel, end_time=now)
            self._trace_end(state, now)
        except Exception:
            log_failure("openai-agents: recording a trace end")

    def _trace_end(self, state: _Trace, now: int) -> None:
        content = capture_content()
        targets = [state.span]
        if state.outer is not None:
            targets.append(state.outer)
        for target in targets:
            existing = getattr(target, "attributes", None) or {}
            if content and state.first_input is not None and sc.ROLLOUT_INPUT not in existing:
                target.set_attribute(sc.ROLLOUT_INPUT, to_json_text(state.first_input))
            if content and state.final_output is not None:
                target.set_attribute(sc.ROLLOUT_OUTPUT, to_json_text(state.final_output))
        if state.error is not None:
            record_error_text(state.span, *state.error)
        end_span(state.span, end_time=now)
        if state.info is not None:
            fire_rollout_end(state.info, "error" if state.error else "ok", None)

    # -- spans ------------------------------------------------------------------------------
    def on_span_start(self, span: Any) -> None:
        try:
            with self._lock:
                state = self._traces.get(str(span.trace_id))
                if state is None:
                    return
                parent = self._spans.get(span.parent_id) if span.parent_id else None
            self._span_start(span, state, parent)
        except Exception:
            log_failure("openai-agents: recording a span start")

    def _start(self, node: _Span, name: str, attributes: dict[str, Any]) -> Any:
        parent = node.otel_parent()
        context = otel_trace.set_span_in_context(parent) if parent is not None else None
        attrs = {**node.trace.attrs, SDK_SPAN_ID: node.span_id, SDK_SPAN_TYPE: node.kind, **attributes}
        return rl.start_span(name, attributes=attrs, context=context, start_time=node.start_ns)

    def _span_start(self, span: Any, state: _Trace, parent: _Span | None) -> None:
        data = span.span_data
        kind = str(getattr(data, "type", "span"))
        start_ns = iso_to_ns(span.started_at) or time.time_ns()
        node = _Span(str(span.span_id), kind, state, parent, start_ns)
        if parent is not None and parent.first_child_ns is None:
            parent.first_child_ns = start_ns
        if kind == "agent":
            node.name = str(getattr(data, "name", "") or "agent")
            node.otel = self._start(
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
            node.otel = self._start(
                node,
                f"{sc.OP_EXECUTE_TOOL} {tool}",
                {
                    sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                    sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
                    sc.GEN_AI_TOOL_NAME: tool,
                },
            )
        elif kind == "guardrail":
            node.otel = self._start(node, f"guardrail {getattr(data, 'name', '')}", {sc.SPAN_KIND: sc.SPAN_KIND_EVENT})
        elif kind == "turn":
            node.name = str(getattr(data, "agent_name", "") or "")
            node.otel = self._start(node, f"turn {getattr(data, 'turn', '')} {node.name}".strip(), {})
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
            node.otel = self._start(node, name, {})
        with self._lock:
            self._spans[node.span_id] = node

    def on_span_end(self, span: Any) -> None:
        try:
            with self._lock:
                node = self._spans.pop(str(span.span_id), None)
            if node is None:
                return
            if node.paused is not None:
                resume_client_capture(node.paused)
            self._span_end(span, node)
        except Exception:
            log_failure("openai-agents: recording a span end")

    def _span_end(self, span: Any, node: _Span) -> None:
        data = span.span_data
        end_ns = iso_to_ns(span.ended_at) or time.time_ns()
        error = span.error
        kind = node.kind
        if kind in LLM_TYPES:
            self._llm_end(node, data, error, end_ns)
            return
        if kind == "handoff":
            self._handoff_end(node, data, error, end_ns)
            return
        otel = node.otel
        if otel is None:
            return
        if kind == "agent":
            self._agent_end(node, data, error)
        elif kind == "function":
            self._function_end(node, data)
        elif kind == "guardrail":
            self._guardrail_end(node, data)
        elif kind == "turn":
            self._turn_end(node, data, error, end_ns)
        else:
            exported = self._export(data)
            if exported:
                otel.set_attribute(SDK_DATA, to_json_text(exported))
            usage = getattr(data, "usage", None)
            if usage is not None:
                otel.set_attribute(SDK_USAGE, to_json_text(usage))
            if kind == "task" and error:
                node.trace.error = (_error_kind(error), _error_text_detail(error))
        if error:
            record_error_text(otel, _error_kind(error), _error_text_detail(error))
        end_span(otel, end_time=end_ns)

    @staticmethod
    def _export(data: Any) -> Any:
        if getattr(data, "type", None) == "custom" and hasattr(data, "data"):
            return as_plain(data.data)
        try:
            exported = data.export()
        except Exception:
            return None
        return as_plain(exported)

    # -- agent ------------------------------------------------------------------------------
    def _agent_end(self, node: _Span, data: Any, error: Any) -> None:
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
            state.error = (_error_kind(error), _error_text_detail(error))

    # -- LLM calls --------------------------------------------------------------------------
    def _llm_end(self, node: _Span, data: Any, error: Any, end_ns: int) -> None:
        if node.ancestor(*LLM_TYPES) is not None:
            return  # a model call inside another recorded model call (e.g. a wrapped model)
        kind = node.kind
        response = getattr(data, "response", None) if kind == "response" else None
        model = getattr(data, "model", None) if kind == "generation" else getattr(response, "model", None)
        raw_input = getattr(data, "input", None)
        raw_output = getattr(data, "output", None) if kind == "generation" else getattr(response, "output", None)
        usage = getattr(data, "usage", None) or getattr(response, "usage", None)
        config = getattr(data, "model_config", None) if kind == "generation" else None
        if (
            not error
            and model is None
            and raw_input is None
            and raw_output is None
            and usage is None
            and response is None
        ):
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
        otel = self._start(node, f"{sc.OP_CHAT} {model or 'unknown'}", attrs)
        if error:
            record_error_text(otel, _error_kind(error), _error_text_detail(error))
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

    def _turn_end(self, node: _Span, data: Any, error: Any, end_ns: int) -> None:
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
        llm = _Span(new_id()[:16], "generation", node.trace, node, node.start_ns)
        span = self._start(llm, f"{sc.OP_CHAT} unknown", attrs)
        end_span(span, end_time=min(end_ns, node.first_child_ns or end_ns))

    # -- tools ------------------------------------------------------------------------------
    def _function_end(self, node: _Span, data: Any) -> None:
        otel = node.otel
        arguments = getattr(data, "input", None)
        holder = node.ancestor("turn") or node.ancestor("agent")
        call_id = self._match_call(holder, getattr(data, "name", None), arguments)
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

    @staticmethod
    def _match_call(holder: _Span | None, name: Any, arguments: Any) -> str | None:
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

    # -- coordination events ----------------------------------------------------------------
    def _event(
        self,
        otel: Any,
        event_type: str,
        time_ns: int,
        *,
        agent_id: Any = None,
        target: Any = None,
        reason: str | None = None,
        **data: Any,
    ) -> None:
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

    def _handoff_end(self, node: _Span, data: Any, error: Any, end_ns: int) -> None:
        source = getattr(data, "from_agent", None)
        target = getattr(data, "to_agent", None)
        otel = self._start(node, f"handoff {source} -> {target}", {sc.SPAN_KIND: sc.SPAN_KIND_EVENT})
        self._event(otel, EVENT_HANDOFF, node.start_ns, agent_id=source, target=target, error=_error_text(error))
        if error:
            record_error_text(otel, _error_kind(error), _error_text_detail(error))
        end_span(otel, end_time=end_ns)

    def _guardrail_end(self, node: _Span, data: Any) -> None:
        agent = node.ancestor("agent")
        triggered = bool(getattr(data, "triggered", False))
        if triggered:  # an agent's input/output guardrail tripwire: the run raises
            node.trace.error = ("guardrail tripwire triggered", str(getattr(data, "name", "") or "") or None)
        self._event(
            node.otel,
            EVENT_GUARDRAIL,
            node.start_ns,
            agent_id=agent.name if agent is not None else None,
            reason="tripwire triggered" if triggered else None,
            guardrail=getattr(data, "name", None),
            triggered=triggered,
        )

    # -- lifecycle --------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Nothing to release: agent-rl flushes its own exporters at exit."""

    def force_flush(self) -> None:
        try:
            rl.flush()  # a no-op until agent-rl is configured
        except Exception:
            log_failure("openai-agents: flushing")


def _error_text_detail(error: Any) -> str | None:
    if isinstance(error, dict):
        data = error.get("data")
        detail = data.get("error") if isinstance(data, dict) else data
        if detail in (None, ""):
            return None
        return detail if isinstance(detail, str) else json.dumps(as_plain(detail), default=str)
    return None


# -- registering with the SDK -------------------------------------------------------------------
_INSTALLED: RLTracingProcessor | None = None
_INSTALL_LOCK = threading.Lock()


def installed_processor() -> RLTracingProcessor | None:
    """The processor :func:`instrument` registered, if any."""
    return _INSTALLED


def instrument(*, exclusive: bool = False, rl_config: Any = None) -> RLTracingProcessor:
    """Register an :class:`RLTracingProcessor` with the Agents SDK (once) and return it.

    ``exclusive=False`` (default): ``agents.add_trace_processor`` -- the SDK's other processors
    (its OpenAI exporter) keep running. ``exclusive=True``: ``agents.set_trace_processors`` --
    ours is the only one, nothing is exported to OpenAI. ``rl_config``: passed to
    ``agent_rl_plugin.configure`` first (process-wide). The SDK's tracing must stay enabled
    (not ``set_tracing_disabled(True)`` / ``OPENAI_AGENTS_DISABLE_TRACING=1`` /
    ``RunConfig(tracing_disabled=True)``): a disabled SDK trace reaches no processor.
    """
    global _INSTALLED
    from agents.tracing import add_trace_processor, set_trace_processors

    if rl_config is not None:
        from agent_rl_plugin import configure

        configure(rl_config)
    with _INSTALL_LOCK:
        processor = _INSTALLED or RLTracingProcessor()
        processor.active = True
        if exclusive:
            set_trace_processors([processor])
        elif processor not in _registered():
            add_trace_processor(processor)
        _INSTALLED = processor
    return processor


def _registered() -> tuple[Any, ...]:
    from agents.tracing import get_trace_provider

    multi = getattr(get_trace_provider(), "_multi_processor", None)
    return tuple(getattr(multi, "_processors", ()) or ())


def uninstrument() -> None:
    """Stop recording: the processor from :func:`instrument` is deactivated and removed from
    the SDK's processors (the SDK's own exporter is not put back after ``exclusive=True``:
    ``agents.set_trace_processors([agents.tracing.default_processor()])`` does that)."""
    global _INSTALLED
    with _INSTALL_LOCK:
        processor = _INSTALLED
        _INSTALLED = None
    if processor is None:
        return
    processor.active = False
    try:
        from agents.tracing import set_trace_processors

        remaining = [p for p in _registered() if p is not processor]
        if len(remaining) != len(_registered()):
            set_trace_processors(remaining)
    except Exception:
        log_failure("openai-agents: removing the processor")
