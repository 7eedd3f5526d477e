"""The ``openai_agents`` entry point of group ``agent_rl_plugin`` (never imports the SDK).

Registered so ``agent-rl`` lists the integration among its plugins. It implements no hook: what
the integration records is already in the store's conventions (``chat``/``execute_tool``/
``invoke_agent`` spans, ``agent_rl.event`` events), so the built-in views, rewards and GiGPO
state keys apply unchanged. Recording itself is switched on in the program that runs the agents
(``agent_rl_openai_agents.instrument()``), not by loading this module.
"""

from __future__ import annotations

#: The integration's name, as ``agent-rl`` reports it.
NAME = "openai_agents"
