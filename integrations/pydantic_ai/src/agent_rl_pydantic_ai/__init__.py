"""agent-rl-pydantic-ai: record pydantic-ai agents with agent-rl-plugin.

Installed, it needs no code: ``agent_rl_plugin.configure(db="runs.duckdb")`` switches
pydantic-ai's own GenAI instrumentation on (through the ``pydantic_ai`` entry point, see
:mod:`agent_rl_pydantic_ai.plugin`) and its runs land in the ``rollouts``, ``llm_calls``,
``tool_calls`` and ``steps`` views. :func:`enable` / :func:`disable` do the switching by hand.
Nothing here imports pydantic-ai until it is used. See docs/integrations/pydantic-ai.md.
"""

from __future__ import annotations

from agent_rl_pydantic_ai.instrumentation import disable, enable, installed, settings_for
from agent_rl_pydantic_ai.normalize import normalize_pydantic_ai

__version__ = "0.1.0"
PYDANTIC_AI_VERSION_TESTED = "2.68.0"

__all__ = [
    "enable",
    "disable",
    "installed",
    "settings_for",
    "normalize_pydantic_ai",
    "PYDANTIC_AI_VERSION_TESTED",
]
