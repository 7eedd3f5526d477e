"""The ``smolagents`` entry point of group ``agent_rl_plugin`` (never imports smolagents).

It implements no hook today: the adapter (:mod:`agent_rl_smolagents.agents`) writes the canonical
keys (``gen_ai.*`` / ``agent_rl.*``) itself, so no normaliser is needed, and the built-in GiGPO
state key (a hash of the latest tool result, else the rollout's input) already fits smolagents'
steps. The entry point makes the package show in ``agent-rl plugins`` with its version, and is
where hooks go when it needs some.
"""

from __future__ import annotations

__all__: list[str] = []
