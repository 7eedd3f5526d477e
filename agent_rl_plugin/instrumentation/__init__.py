"""Instrumentation: record agents without changing what they do.

* :func:`trace_agent` / :func:`trace_tool`: decorators (sync, async, generators, async
  generators, methods).
* :class:`RLAgentMixin` / :class:`RLOrchestratorMixin`: trace an agent class by mixing in.
* :func:`instrument` / :func:`uninstrument`: trace an existing class or object, and undo it.
* :func:`rollout` / :func:`current_rollout`: the episode context (``with`` / ``async with``).
* :func:`record_llm_call`, :func:`record_tool_call`, :func:`record_event`, :func:`emit_reward`:
  record what decorators cannot see.

See ``docs/instrumenting.md``.
"""

from agent_rl_plugin.instrumentation.context import current_rollout, rollout
from agent_rl_plugin.instrumentation.decorators import trace_agent, trace_tool
from agent_rl_plugin.instrumentation.mixins import RLAgentMixin, RLOrchestratorMixin
from agent_rl_plugin.instrumentation.patching import instrument, uninstrument
from agent_rl_plugin.instrumentation.recording import (
    emit_reward,
    record_event,
    record_llm_call,
    record_tool_call,
)

__all__ = [
    "trace_agent",
    "trace_tool",
    "RLAgentMixin",
    "RLOrchestratorMixin",
    "instrument",
    "uninstrument",
    "rollout",
    "current_rollout",
    "emit_reward",
    "record_llm_call",
    "record_tool_call",
    "record_event",
]
