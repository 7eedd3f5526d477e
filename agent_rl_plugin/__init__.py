"""agent-rl-plugin: record the agents you already run, score them, train on them.

The public API, re-exported here and nowhere else::

    import agent_rl_plugin as arl
    arl.configure(db="agent_rl.duckdb")

    @arl.trace_agent(name="planner")
    def plan(task): ...

    with arl.rollout(task_id="t1", group_id="g1"):
        plan("...")
        arl.emit_reward(1.0, name="user_feedback")

    arl.score("agent_rl.duckdb")            # reward plugins over the stored rollouts

Names are imported on first access, so ``import agent_rl_plugin.store`` (or the CLI) does not
pay for the instrumentation layer and vice versa.

Framework integrations (callbacks, tracing processors of other frameworks) use
:mod:`agent_rl_plugin.integration`, the public API for recording from a framework's own events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_rl_plugin.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "RLConfig": "agent_rl_plugin.config",
    "hookimpl": "agent_rl_plugin.hookspecs",
    "configure": "agent_rl_plugin.tracing",
    "flush": "agent_rl_plugin.tracing",
    "shutdown": "agent_rl_plugin.tracing",
    "RLAgentMixin": "agent_rl_plugin.instrumentation",
    "RLOrchestratorMixin": "agent_rl_plugin.instrumentation",
    "current_rollout": "agent_rl_plugin.instrumentation",
    "emit_reward": "agent_rl_plugin.instrumentation",
    "instrument": "agent_rl_plugin.instrumentation",
    "instrument_clients": "agent_rl_plugin.instrumentation.clients",
    "record_event": "agent_rl_plugin.instrumentation",
    "record_llm_call": "agent_rl_plugin.instrumentation",
    "record_tool_call": "agent_rl_plugin.instrumentation",
    "rollout": "agent_rl_plugin.instrumentation",
    "trace_agent": "agent_rl_plugin.instrumentation",
    "trace_tool": "agent_rl_plugin.instrumentation",
    "uninstrument": "agent_rl_plugin.instrumentation",
    "uninstrument_clients": "agent_rl_plugin.instrumentation.clients",
    "score": "agent_rl_plugin.rewards",
}

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - static names for type checkers and IDEs
    from agent_rl_plugin.config import RLConfig
    from agent_rl_plugin.hookspecs import hookimpl
    from agent_rl_plugin.instrumentation import (
        RLAgentMixin,
        RLOrchestratorMixin,
        current_rollout,
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
    from agent_rl_plugin.instrumentation.clients import instrument_clients, uninstrument_clients
    from agent_rl_plugin.rewards import score
    from agent_rl_plugin.tracing import configure, flush, shutdown
