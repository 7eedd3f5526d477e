"""``RLAgentMixin`` and ``RLOrchestratorMixin``: trace an agent class by mixing in one base.

::

    class RLSingle(RLAgentMixin, SingleAgent):
        pass                                  # chat/run/... of SingleAgent are now traced

    class RLOrch(RLOrchestratorMixin, Orchestrator):
        rl_tool_methods = ("search",)

Contract:

* At class creation (``__init_subclass__``) the subclass gets wrapped copies of its agent
  methods: ``rl_methods`` if the class sets it, else whichever of ``chat, run, arun, step,
  invoke, ainvoke, __call__`` it defines or inherits (``object`` and the mixins excluded); and
  of ``rl_tool_methods`` (default none) as tool spans. Bases are never modified. Agent spans
  are named after the instance's class; ``gen_ai.agent.id`` comes from ``self.agent_id``.
* ``__init__`` accepts two optional keyword arguments and removes them before calling the next
  ``__init__`` in the MRO, so bases that do not know them keep working:
  ``enable_rl=False`` makes this instance's calls (and everything recorded inside its sync and
  async calls and while its generators and async generators run) pass straight through; ``rl_config=RLConfig(...)`` calls
  :func:`agent_rl_plugin.tracing.configure` with it. That configuration is **process-wide**,
  not per instance.
* Once the base ``__init__`` has returned, the instance is offered to the installed
  integrations (:func:`agent_rl_plugin.instrumentation.patching.claim`, the
  ``agent_rl_instrument_object`` hook), unless ``enable_rl=False``: the integration that knows
  the framework records what happens inside the traced methods (a MassGen agent's LLM and
  tool calls, say). :func:`agent_rl_plugin.uninstrument` on the instance calls its undo. A
  failing hook is logged; the object is built all the same.
* The orchestrator's spans carry ``agent_rl.agent.role="orchestrator"``. Its run is the rollout
  root when no rollout is active, and sub-agents called from it (also through
  ``asyncio.gather``/``create_task``, which copy the context) are its children.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

from agent_rl_plugin.instrumentation.calls import INSTANCE_FLAG
from agent_rl_plugin.instrumentation.patching import claim, wrap_class_methods
from agent_rl_plugin.instrumentation.recording import record_event
from agent_rl_plugin.instrumentation.spans import log_failure

__all__ = ["RLAgentMixin", "RLOrchestratorMixin"]


class RLAgentMixin:
    """Mix in first (``class X(RLAgentMixin, Base)``) to trace ``Base``'s agent methods."""

    #: Agent methods to trace; ``None`` means the defaults listed in the module docstring.
    rl_methods: ClassVar[Sequence[str] | None] = None
    #: Methods traced as tool executions (``execute_tool {method}``).
    rl_tool_methods: ClassVar[Sequence[str]] = ()
    #: Recorded as ``agent_rl.agent.role``.
    rl_agent_role: ClassVar[str] = "agent"
    _rl_is_mixin: ClassVar[bool] = True  # set in the mixins' own __dict__ only

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_rl_is_mixin"):
            return
        mixins = tuple(k for k in cls.__mro__ if k.__dict__.get("_rl_is_mixin"))
        wrap_class_methods(cls, cls.rl_methods, cls.rl_tool_methods, role=cls.rl_agent_role, skip=mixins)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        enable_rl = kwargs.pop("enable_rl", None)
        rl_config = kwargs.pop("rl_config", None)
        if rl_config is not None:
            from agent_rl_plugin import tracing

            tracing.configure(rl_config)
        if enable_rl is False:
            _set_flag(self)
        super().__init__(*args, **kwargs)
        if enable_rl is False:
            _set_flag(self)  # again: some bases (pydantic models) replace __dict__ in __init__
        else:
            claim(self)  # never raises


def _set_flag(obj: Any) -> None:
    try:
        object.__getattribute__(obj, "__dict__")[INSTANCE_FLAG] = False
    except Exception:
        log_failure("switching recording off for an instance (enable_rl=False)")


class RLOrchestratorMixin(RLAgentMixin):
    """Like :class:`RLAgentMixin`, for an agent that coordinates other agents."""

    rl_agent_role: ClassVar[str] = "orchestrator"
    _rl_is_mixin: ClassVar[bool] = True

    def rl_record_event(self, event_type: str, **fields: Any) -> None:
        """Shortcut for :func:`agent_rl_plugin.record_event` (coordination events)."""
        record_event(event_type, **fields)
