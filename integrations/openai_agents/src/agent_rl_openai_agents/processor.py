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

This module holds the processor (the SDK's callbacks, its tables of traces and spans in
flight, the rollout of each trace) and its registration with the SDK; how each kind of span is
recorded is :mod:`agent_rl_openai_agents.spans`, the per-trace / per-span state
:mod:`agent_rl_openai_agents.state`, the SDK's span errors as text
:mod:`agent_rl_openai_agents.span_errors`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from agents.tracing import TracingProcessor
from opentelemetry import trace as otel_trace

from agent_rl_openai_agents import spans
from agent_rl_openai_agents.convert import as_plain, iso_to_ns, rollout_id_for
from agent_rl_openai_agents.span_errors import error_detail, error_kind, error_text

# ``X as X``: names this module defined before its parts moved out, still importable from here.
from agent_rl_openai_agents.spans import EVENT_GUARDRAIL as EVENT_GUARDRAIL
from agent_rl_openai_agents.spans import EVENT_HANDOFF as EVENT_HANDOFF
from agent_rl_openai_agents.spans import LLM_TYPES as LLM_TYPES
from agent_rl_openai_agents.spans import SDK_AGENT_HANDOFFS as SDK_AGENT_HANDOFFS
from agent_rl_openai_agents.spans import SDK_AGENT_OUTPUT_TYPE as SDK_AGENT_OUTPUT_TYPE
from agent_rl_openai_agents.spans import SDK_AGENT_TOOLS as SDK_AGENT_TOOLS
from agent_rl_openai_agents.spans import SDK_DATA, SDK_TRACE_ID
from agent_rl_openai_agents.spans import SDK_LLM_FROM as SDK_LLM_FROM
from agent_rl_openai_agents.spans import SDK_MCP_DATA as SDK_MCP_DATA
from agent_rl_openai_agents.spans import SDK_MODEL_CONFIG as SDK_MODEL_CONFIG
from agent_rl_openai_agents.spans import SDK_SPAN_ID as SDK_SPAN_ID
from agent_rl_openai_agents.spans import SDK_SPAN_TYPE as SDK_SPAN_TYPE
from agent_rl_openai_agents.spans import SDK_USAGE as SDK_USAGE
from agent_rl_openai_agents.state import SpanState, TraceState
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
    record_error_text,
    resume_client_capture,
    to_json_text,
)
from agent_rl_plugin.integration import semconv as sc

logger = logging.getLogger(__name__)

__all__ = ["RLTracingProcessor", "instrument", "uninstrument", "installed_processor"]

# Private names this module defined before its parts moved out (the same objects).
_Trace = TraceState
_Span = SpanState
_error_text = error_text
_error_kind = error_kind
_error_text_detail = error_detail


class RLTracingProcessor(TracingProcessor):
    """Records the SDK's traces as agent-rl rollouts (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: dict[str, TraceState] = {}
        self._spans: dict[str, SpanState] = {}
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
            state = TraceState(
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
            state = TraceState(trace_id, dict(info.attributes), span, info)
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

    def _trace_end(self, state: TraceState, now: int) -> None:
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

    def _span_start(self, span: Any, state: TraceState, parent: SpanState | None) -> None:
        data = span.span_data
        kind = str(getattr(data, "type", "span"))
        start_ns = iso_to_ns(span.started_at) or time.time_ns()
        node = SpanState(str(span.span_id), kind, state, parent, start_ns)
        if parent is not None and parent.first_child_ns is None:
            parent.first_child_ns = start_ns
        spans.record_start(node, data)
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

    def _span_end(self, span: Any, node: SpanState) -> None:
        data = span.span_data
        end_ns = iso_to_ns(span.ended_at) or time.time_ns()
        error = span.error
        spans.record_end(node, data, error, end_ns)

    # -- lifecycle --------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Nothing to release: agent-rl flushes its own exporters at exit."""

    def force_flush(self) -> None:
        try:
            rl.flush()  # a no-op until agent-rl is configured
        except Exception:
            log_failure("openai-agents: flushing")


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
