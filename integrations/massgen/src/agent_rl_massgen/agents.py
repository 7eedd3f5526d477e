"""Mixins and ready classes for MassGen agents and orchestrators, and instance instrumentation.

::

    class MyAgent(MassGenAgentMixin, SingleAgent): ...          # or use RLSingleAgent
    class MyOrch(MassGenOrchestratorMixin, Orchestrator): ...   # or use RLOrchestrator

What they add to the core ``RLAgentMixin`` / ``RLOrchestratorMixin`` (an ``invoke_agent`` span
per ``chat()``, streamed text as its output, ``enable_rl`` / ``rl_config`` keyword arguments):

* the agent's backend is observed (:mod:`agent_rl_massgen.stream`): one ``chat {model}`` span
  per backend stream with input messages, streamed text, reasoning, requested tool calls, token
  usage, and one ``execute_tool`` span per tool the backend executed;
* the orchestrator's ``coordination_tracker`` is observed (:mod:`agent_rl_massgen.coordination`):
  new answers, votes (target, reason), restarts, rounds, final presenter and final answer become
  coordination events; its agents are instrumented too (``rl_instrument_agents``), so plain
  ``SingleAgent`` objects given to an ``RLOrchestrator`` are recorded;
* the reward switches of :class:`agent_rl_massgen.RLConfig` are applied when a top-level
  ``chat()`` ends (:mod:`agent_rl_massgen.runs`).

The backend, tracker and agent observation is one function, :func:`observe`, shared with the
package's ``agent_rl_instrument_object`` hook, so ``arl.instrument(obj)`` and the generic
``arl.RLAgentMixin`` / ``arl.RLOrchestratorMixin`` record the same spans and events as these
mixins (the reward switches stay with these mixins).

Every chunk MassGen yields is passed on unchanged, in the same order.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any, Callable, ClassVar

from agent_rl_plugin.integration import (
    RLAgentMixin,
    RLOrchestratorMixin,
    instance_disabled,
    instrument,
    log_failure,
    uninstrument,
)

from agent_rl_massgen.config import switches_for
from agent_rl_massgen.coordination import observe_tracker, unobserve_tracker
from agent_rl_massgen.runs import current_run, emit_run_rewards, end_run, start_run
from agent_rl_massgen.stream import observe_backend, unobserve_backend

logger = logging.getLogger(__name__)

__all__ = [
    "MassGenAgentMixin",
    "MassGenOrchestratorMixin",
    "instrument_agent",
    "instrument_orchestrator",
    "uninstrument_massgen",
    "observe",
    "massgen_kind",
]

_CONFIG_ATTR = "_agent_rl_massgen_config"
_PATCHED_ATTR = "_agent_rl_massgen_instrumented"


def _prompt_of(messages: Any) -> str | None:
    if isinstance(messages, str):
        return messages
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
                return message["content"]
    return None


async def _observed_chat(obj: Any, inner: Any, messages: Any, collect_text: bool):
    """Yield ``inner``'s chunks unchanged; own the run's reward log when this is the top call."""
    if instance_disabled(obj):
        key = None
    else:
        key = start_run(switches_for(obj.__dict__.get(_CONFIG_ATTR)), _prompt_of(messages))
    completed = False
    try:
        async for chunk in inner:
            if key is not None and collect_text:
                run = current_run()
                content = getattr(chunk, "content", None)
                if run is not None and getattr(getattr(chunk, "type", None), "value", getattr(chunk, "type", None)) == "content" and isinstance(content, str):
                    run.streamed_text.append(content)
            yield chunk
        completed = True
    finally:
        try:
            await inner.aclose()
        finally:
            if key is not None:
                log = end_run(key)
                if completed and log is not None:
                    emit_run_rewards(log)


def _take_config(kwargs: dict[str, Any]) -> Any:
    return kwargs.get("rl_config")


def massgen_kind(obj: Any) -> str | None:
    """``"orchestrator"``, ``"agent"`` (another MassGen ``ChatAgent``) or ``None`` for ``obj``.

    Never imports MassGen: an object of a MassGen class exists only once MassGen is imported.
    """
    orchestrators = sys.modules.get("massgen.orchestrator")
    if orchestrators is not None and isinstance(obj, getattr(orchestrators, "Orchestrator", ())):
        return "orchestrator"
    chat_agents = sys.modules.get("massgen.chat_agent")
    if chat_agents is not None and isinstance(obj, getattr(chat_agents, "ChatAgent", ())):
        return "agent"
    return None


def observe(obj: Any, instrument_agents: bool | None = None) -> Callable[[], None] | None:
    """Record what MassGen does inside ``obj``; returns the undo, or ``None`` when ``obj`` is not
    a MassGen agent or orchestrator. The one implementation behind the mixins,
    :func:`instrument_agent` / :func:`instrument_orchestrator` and the ``agent_rl_instrument_object``
    hook (so ``arl.instrument(obj)`` and ``arl.RLAgentMixin`` record the same).

    * an agent: its backend's streams (``chat {model}`` and ``execute_tool`` spans,
      :func:`agent_rl_massgen.stream.observe_backend`), ``obj`` being an owner whose
      ``enable_rl=False`` switches its streams off;
    * an orchestrator: its ``coordination_tracker`` (coordination events) and, with
      ``instrument_agents`` (default: ``obj.rl_instrument_agents``, else true), its agents that
      are not recorded otherwise (:func:`instrument_agent`: their ``chat`` span and backend).

    Idempotent (a backend or tracker is observed once; the undo removes only what this call
    installed). It never wraps ``obj``'s own ``chat``: its agent span comes from the caller (the
    mixins' class wrappers, ``arl.instrument``). Never raises (a failure is logged).
    """
    kind = massgen_kind(obj)
    if kind is None:
        return None
    undos: list[Callable[[], None]] = []
    try:
        if kind == "agent":
            backend = getattr(obj, "backend", None)
            if backend is not None and observe_backend(backend, owner=obj):
                undos.append(lambda: unobserve_backend(backend))
        else:
            tracker = getattr(obj, "coordination_tracker", None)
            if tracker is not None and observe_tracker(tracker):
                undos.append(lambda: unobserve_tracker(tracker))
            if instrument_agents is None:
                instrument_agents = bool(getattr(obj, "rl_instrument_agents", True))
            if instrument_agents:
                undos.extend(_instrument_agents_of(obj))
    except Exception:
        log_failure("agent-rl-massgen: instrumenting a MassGen object")

    def undo() -> None:
        for step in reversed(undos):
            try:
                step()
            except Exception:
                log_failure("agent-rl-massgen: undoing the instrumentation of a MassGen object")

    return undo


def _instrument_agents_of(orchestrator: Any) -> list[Callable[[], None]]:
    undos: list[Callable[[], None]] = []
    for agent in (getattr(orchestrator, "agents", None) or {}).values():
        try:
            if isinstance(agent, (MassGenAgentMixin, MassGenOrchestratorMixin)) or _patched(agent):
                continue
            instrument_agent(agent)
            undos.append(functools.partial(uninstrument_massgen, agent))
        except Exception:
            logger.warning("agent-rl-massgen: could not instrument agent %r", agent, exc_info=True)
    return undos


def _patched(obj: Any) -> bool:
    return bool(getattr(obj, "__dict__", {}).get(_PATCHED_ATTR))


class MassGenAgentMixin(RLAgentMixin):
    """``RLAgentMixin`` for MassGen ``ChatAgent`` subclasses (``SingleAgent``,
    ``ConfigurableAgent``...): mix in first, ``class X(MassGenAgentMixin, SingleAgent)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        config = _take_config(kwargs)
        super().__init__(*args, **kwargs)
        self.__dict__[_CONFIG_ATTR] = config
        if not instance_disabled(self):
            observe(self)  # done already when the agent_rl_instrument_object hook is installed

    async def chat(self, messages: Any, *args: Any, **kwargs: Any):  # type: ignore[override]
        inner = super().chat(messages, *args, **kwargs)
        async for chunk in _observed_chat(self, inner, messages, collect_text=True):
            yield chunk


class MassGenOrchestratorMixin(RLOrchestratorMixin):
    """``RLOrchestratorMixin`` for MassGen's ``Orchestrator``: mix in first,
    ``class X(MassGenOrchestratorMixin, Orchestrator)``."""

    #: Instrument the orchestrator's agents (their chat spans and backends) at construction.
    rl_instrument_agents: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        config = _take_config(kwargs)
        super().__init__(*args, **kwargs)
        self.__dict__[_CONFIG_ATTR] = config
        if not instance_disabled(self):  # enable_rl=False: MassGen's objects stay untouched
            observe(self, instrument_agents=self.rl_instrument_agents)

    async def chat(self, messages: Any, *args: Any, **kwargs: Any):  # type: ignore[override]
        tracker = getattr(self, "coordination_tracker", None)
        if tracker is not None and not instance_disabled(self):
            observe_tracker(tracker)  # a tracker replaced since __init__ is observed too
        inner = super().chat(messages, *args, **kwargs)
        async for chunk in _observed_chat(self, inner, messages, collect_text=False):
            yield chunk


# --- existing objects -----------------------------------------------------------------------
def instrument_agent(agent: Any) -> Any:
    """Record an existing MassGen agent object (its ``chat`` and its backend). Idempotent."""
    if _patched(agent):
        return agent
    instrument(agent, methods=["chat"])  # asks the hook too, when the massgen plugin is installed
    observe(agent)
    agent.__dict__[_PATCHED_ATTR] = True
    return agent


def instrument_orchestrator(orchestrator: Any, instrument_agents: bool = True) -> Any:
    """Record an existing MassGen ``Orchestrator`` object: its ``chat``, its coordination events
    and (``instrument_agents``) its agents. Idempotent. Reward switches come from the
    process-wide configuration (``agent_rl_massgen.RLConfig``) or the environment."""
    if _patched(orchestrator):
        return orchestrator
    instrument(orchestrator, methods=["chat"], role="orchestrator")
    observe(orchestrator, instrument_agents)
    orchestrator.__dict__[_PATCHED_ATTR] = True
    return orchestrator


def uninstrument_massgen(obj: Any) -> None:
    """Undo :func:`instrument_agent` / :func:`instrument_orchestrator` (and its agents')."""
    if obj.__dict__.get(_PATCHED_ATTR):
        uninstrument(obj)
        del obj.__dict__[_PATCHED_ATTR]
    backend = getattr(obj, "backend", None)
    if backend is not None:
        unobserve_backend(backend)
    tracker = getattr(obj, "coordination_tracker", None)
    if tracker is not None:
        unobserve_tracker(tracker)
    for agent in (getattr(obj, "agents", None) or {}).values():
        if isinstance(agent, (MassGenAgentMixin, MassGenOrchestratorMixin)):
            continue
        uninstrument_massgen(agent)
