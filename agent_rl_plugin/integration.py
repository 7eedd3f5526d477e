"""The public API for framework integrations: everything a package that records another
framework's agents (LangChain callbacks, an OpenAI Agents tracing processor, MassGen streams,
...) needs from agent-rl-plugin, in one stable module.

Stability: every name in ``__all__`` keeps its signature and meaning across minor versions; the
modules behind them (``tracing``, ``instrumentation.*``, ``context``) are internal and may
change. An integration imports only :mod:`agent_rl_plugin` (the facade),
:mod:`agent_rl_plugin.integration`, :mod:`agent_rl_plugin.hookspecs` (``hookimpl``) and
:mod:`agent_rl_plugin.config`; ``tests/test_integration_api.py`` enforces it for the
integrations in this repository. See ``docs/integration-api.md``.

What it offers, by task:

* **Is anything recorded?** :func:`is_recording` (on, configured, not suppressed),
  :func:`is_enabled`, :func:`active_config` (the config in force, or ``None``),
  :func:`current_config`, :func:`configure`, :func:`flush`.
* **Spans of the GenAI kinds**: :func:`start_span` (``kind`` = :data:`AGENT`, :data:`TOOL`,
  :data:`LLM`, or a kind of the framework's own), :func:`set_attributes`, :func:`record_error`,
  :func:`record_error_text`, :func:`end_span`; :func:`get_tracer` for anything else.
  Attribute names are in :mod:`semconv <agent_rl_plugin.semconv>` (re-exported as ``semconv``),
  values are made with :func:`to_json_text` (JSON content), :func:`to_attr` (free text) and
  :func:`to_attribute_value`, and only when :func:`capture_content` says content is kept.
* **Rollouts**: :func:`rollout` (open one, as users do), :class:`RolloutInfo` and
  :func:`current_rollout`; :func:`set_current_rollout` / :func:`reset_current_rollout` to make a
  rollout current while the framework runs code for it (the span processor stamps its ids on
  every span started meanwhile); :func:`fire_rollout_start` / :func:`fire_rollout_end` and
  :func:`rollout_status` when the integration itself opens an implicit rollout.
* **Recording from a framework's own events**: :func:`record_llm_call`,
  :func:`record_tool_call`, :func:`record_event`, :func:`emit_reward`.
* **Avoiding double recording**: :func:`client_capture_paused` (a context manager) stops LLM
  client capture (the OpenAI/Anthropic/LiteLLM SDK calls ``configure()`` records with no code)
  inside it: wrap the framework's model call in it when the integration records that call from
  the framework's own events; :func:`pause_client_capture` / :func:`resume_client_capture` do
  the same from a framework's start and end callbacks. :func:`suppress` / :func:`unsuppress` switch recording off for
  the running context (e.g. while the framework's own LLM span covers a call that automatic
  capture would record again); :func:`is_suppressed`; :func:`instance_disabled` for objects
  created with ``enable_rl=False``.
* **Tracing classes**: :func:`trace_agent`, :func:`trace_tool`, :func:`instrument`,
  :func:`uninstrument`, :class:`RLAgentMixin`, :class:`RLOrchestratorMixin`.
* **Errors**: :func:`log_failure`, called from an ``except`` block, logs a failure once per
  site as a warning (then at debug level): an integration must never raise into agent code.

Every function here that touches a span, a hook or a value never raises, unless its own
docstring says so.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from agent_rl_plugin import semconv
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.context import RolloutInfo, current_rollout, reset_current, set_current
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.instrumentation import (
    RLAgentMixin,
    RLOrchestratorMixin,
    emit_reward,
    instrument,
    record_event,
    record_llm_call,
    record_tool_call,
    rollout,
    trace_agent,
    trace_tool,
    uninstrument,
)
from agent_rl_plugin.instrumentation.calls import instance_disabled, is_recording, is_suppressed, suppress, unsuppress
from agent_rl_plugin.instrumentation.clients import client_capture_paused, pause_client_capture, resume_client_capture
from agent_rl_plugin.instrumentation.context import fire_rollout_end, fire_rollout_start, rollout_status
from agent_rl_plugin.instrumentation.spans import (
    capture_content,
    end_span,
    log_failure,
    record_error,
    record_error_text,
    set_attributes,
    to_attr,
    to_json_text,
)
from agent_rl_plugin.serialize import to_attribute_value
from agent_rl_plugin.tracing import active_config, configure, current_config, flush, get_tracer, is_enabled

__all__ = [
    "AGENT",
    "LLM",
    "TOOL",
    "RLAgentMixin",
    "RLConfig",
    "RLOrchestratorMixin",
    "RolloutInfo",
    "active_config",
    "capture_content",
    "configure",
    "current_config",
    "current_rollout",
    "emit_reward",
    "end_span",
    "fire_rollout_end",
    "fire_rollout_start",
    "flush",
    "get_tracer",
    "instance_disabled",
    "instrument",
    "is_enabled",
    "is_recording",
    "is_suppressed",
    "client_capture_paused",
    "pause_client_capture",
    "resume_client_capture",
    "log_failure",
    "new_id",
    "record_error",
    "record_error_text",
    "record_event",
    "record_llm_call",
    "record_tool_call",
    "reset_current_rollout",
    "rollout",
    "rollout_status",
    "semconv",
    "set_attributes",
    "set_current_rollout",
    "start_span",
    "suppress",
    "to_attr",
    "to_attribute_value",
    "to_json_text",
    "trace_agent",
    "trace_tool",
    "uninstrument",
    "unsuppress",
]

#: The span kinds (``agent_rl.span.kind``) that the store's views read as agent, tool and LLM
#: steps.
AGENT: str = semconv.SPAN_KIND_AGENT
TOOL: str = semconv.SPAN_KIND_TOOL
LLM: str = semconv.SPAN_KIND_LLM


def set_current_rollout(info: RolloutInfo | None) -> contextvars.Token[RolloutInfo | None]:
    """Make ``info`` the current rollout (``None``: none) in the running context, so
    :func:`current_rollout`, :func:`emit_reward` and the span processor (which stamps the
    rollout's ids on every span started) see it; undo with :func:`reset_current_rollout`."""
    return set_current(info)


def reset_current_rollout(token: contextvars.Token[RolloutInfo | None]) -> None:
    """Undo :func:`set_current_rollout`. Never raises (a token from another context is logged)."""
    reset_current(token)


def start_span(
    name: str,
    kind: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    *,
    context: otel_context.Context | None = None,
    start_time: int | None = None,
) -> trace.Span:
    """Start (not activate) a span on our tracer, configuring from the environment on first use.

    ``kind`` (:data:`AGENT`, :data:`TOOL`, :data:`LLM`, or the framework's own) is stored as
    ``agent_rl.span.kind`` unless ``attributes`` names one; ``context`` is the parent context
    (default: the current one); ``start_time`` in nanoseconds since the epoch (default: now).
    Inside a rollout the span carries its ids. End it with :func:`end_span`. Call it only when
    :func:`is_recording` is true: a disabled recorder returns a non-recording span. Raises what
    the OpenTelemetry tracer raises (callers wrap it with :func:`log_failure`).
    """
    attrs = dict(attributes or {})
    if kind is not None:
        attrs.setdefault(semconv.SPAN_KIND, kind)
    return get_tracer().start_span(name, context=context, start_time=start_time, attributes=attrs)
