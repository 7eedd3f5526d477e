"""The ``langchain`` entry point of group ``agent_rl_plugin`` (never imports LangChain).

Registering it makes ``agent-rl plugins`` list the integration (with the versions it was tested
against). It implements no hooks: :class:`agent_rl_langchain.AgentRLCallbackHandler` writes spans
in the GenAI shape the store reads directly (nothing to normalise), and LangChain steps use the
default GiGPO state key (the latest tool result), which is what a tool-calling agent acts on.
"""

from __future__ import annotations

from agent_rl_langchain import LANGCHAIN_CORE_VERSION_TESTED, LANGGRAPH_VERSION_TESTED

__all__ = ["LANGCHAIN_CORE_VERSION_TESTED", "LANGGRAPH_VERSION_TESTED"]
