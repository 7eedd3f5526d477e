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

from agent_rl_plugin.instrument.context import current_rollout, rollout
from agent_rl_plugin.instrument.decorators import trace_agent, trace_tool
from agent_rl_plugin.instrument.mixins import RLAgentMixin, RLOrchestratorMixin
from agent_rl_plugin.instrument.patching import instrument, uninstrument
from agent_rl_plugin.instrument.recording import (
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


# ``agent_rl_plugin.instrument`` is both this package and the function ``instrument``: once the
# package is imported, ``import agent_rl_plugin as arl; arl.instrument`` is this module (Python
# sets a package's submodules as its attributes). Making the module callable keeps
# ``arl.instrument(obj, methods=[...])`` working either way.
def _make_module_callable() -> None:
    import inspect
    import sys
    import types

    class _CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return instrument(*args, **kwargs)

    module = sys.modules[__name__]
    module.__class__ = _CallableModule
    module.__signature__ = inspect.signature(instrument)  # type: ignore[attr-defined]


_make_module_callable()
del _make_module_callable
