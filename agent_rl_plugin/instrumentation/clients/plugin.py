"""The built-in ``llm_clients`` plugin: switches LLM client capture on when recording is
configured (``RLConfig.instrument_clients``), through the ``agent_rl_configure`` hook like any
outside plugin. Importing it imports no SDK."""

from __future__ import annotations

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.instrumentation.clients import instrument_clients, instrumented_clients, uninstrument_clients


@hookimpl
def agent_rl_configure(config: RLConfig) -> None:
    """Capture the clients ``config.instrument_clients`` selects; stop capturing the others."""
    wanted = set(instrument_clients(config.instrument_clients)) if config.instrument_clients else set()
    for name in instrumented_clients():
        if name not in wanted:
            uninstrument_clients([name])
