"""agent-rl-langchain: record LangChain runnables, tool-calling agents and LangGraph graphs with
agent-rl-plugin, through a LangChain callback handler.

::

    import agent_rl_plugin as arl
    from agent_rl_langchain import AgentRLCallbackHandler

    arl.configure(db="runs.duckdb")
    result = graph.invoke(inputs, config={"callbacks": [AgentRLCallbackHandler()]})

or, for every run of the process, ``agent_rl_langchain.instrument_langchain()``.

The handler and ``instrument_langchain`` are imported lazily (they import ``langchain_core``);
:mod:`agent_rl_langchain.plugin`, the entry point, never imports LangChain. See
docs/integrations/langchain.md.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
LANGCHAIN_CORE_VERSION_TESTED = "1.7.2"
LANGGRAPH_VERSION_TESTED = "1.2.22"

__all__ = [
    "AgentRLCallbackHandler",
    "instrument_langchain",
    "uninstrument_langchain",
    "LANGCHAIN_CORE_VERSION_TESTED",
    "LANGGRAPH_VERSION_TESTED",
]

_LAZY = {
    "AgentRLCallbackHandler": "agent_rl_langchain.handler",
    "instrument_langchain": "agent_rl_langchain.instrument",
    "uninstrument_langchain": "agent_rl_langchain.instrument",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'agent_rl_langchain' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
