"""``RLToolCallingAgent`` / ``RLCodeAgent``: smolagents' agents that record themselves (imports
smolagents)."""

from __future__ import annotations

from typing import Any

from smolagents import CodeAgent, ToolCallingAgent

import agent_rl_plugin as arl
from agent_rl_smolagents.agents import instrument_agent


class SmolagentsMixin:
    """Put first in the bases of a smolagents agent class: its instances record themselves.

    Keyword arguments taken out before the agent's ``__init__``: ``rl_config`` (an
    :class:`agent_rl_plugin.RLConfig`, given to ``arl.configure``, process-wide) and
    ``enable_rl`` (``False``: this instance is not instrumented at all)."""

    def __init__(self, *args: Any, rl_config: Any = None, enable_rl: bool = True, **kwargs: Any) -> None:
        if rl_config is not None:
            arl.configure(rl_config)
        super().__init__(*args, **kwargs)
        if enable_rl:
            instrument_agent(self)


class RLToolCallingAgent(SmolagentsMixin, ToolCallingAgent):
    """A ``ToolCallingAgent`` that records its runs, model calls, tool calls and step errors."""


class RLCodeAgent(SmolagentsMixin, CodeAgent):
    """A ``CodeAgent`` that records its runs, model calls, code executions, tool calls and step errors."""
