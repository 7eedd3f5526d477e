"""agent-rl-textarena: TextArena's single-player games as agent-rl-plugin text environments.

::

    from agent_rl_textarena import make_frozenlake
    env = make_frozenlake()                 # a TextEnv: reset(seed) -> board text, step("down")
    observation = env.reset(env.train_starts[0])

:class:`TextArenaGym` is the glue (a gymnasium-style view of a TextArena env that
:class:`~agent_rl_plugin.envs.GymTextAdapter` wraps). Nothing here imports textarena until an
environment is made; :mod:`agent_rl_textarena.plugin`, the entry point, never does. See
docs/integrations/textarena.md.
"""

from __future__ import annotations

from agent_rl_textarena.frozenlake import (
    ACTIONS,
    DEFAULT_HELDOUT_STARTS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TRAIN_STARTS,
    make_frozenlake,
    optimal_actions,
    shortest_path,
)
from agent_rl_textarena.gym import RewardMode, TextArenaGym

__version__ = "0.1.0"
TEXTARENA_VERSION_TESTED = "0.7.4"

__all__ = [
    "ACTIONS",
    "DEFAULT_HELDOUT_STARTS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TRAIN_STARTS",
    "TEXTARENA_VERSION_TESTED",
    "RewardMode",
    "TextArenaGym",
    "make_frozenlake",
    "optimal_actions",
    "shortest_path",
]
