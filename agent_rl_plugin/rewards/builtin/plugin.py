"""Built-in plugin: registers the built-in rewards through ``agent_rl_register_rewards``.

Each is registered as its class, so ``config.rewards[NAME]`` (from ``agent-rl score --config``
or ``AGENT_RL_REWARDS``) supplies its parameters and weight. ``format_compliance`` is
registered only when configured (it needs a ``pattern`` or a ``json_schema``);
``learned_reward`` is registered but runs only when named (``run_by_default = False``).
"""

from __future__ import annotations

from typing import Any, Callable

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl

#: Rewards that cannot be built without settings.
NEEDS_SETTINGS = frozenset({"format_compliance"})


@hookimpl
def agent_rl_register_rewards(register: Callable[[Any], None], config: RLConfig) -> None:
    # Imported here, when rewards are wanted: registering this plugin (every configure()) loads
    # none of them, so a recording agent does not carry the sandbox, judge and learned-reward code.
    from agent_rl_plugin.rewards.builtin import BUILTIN_REWARDS

    for name, reward_class in BUILTIN_REWARDS.items():
        if name in NEEDS_SETTINGS and not config.rewards.get(name):
            continue
        register(reward_class)
