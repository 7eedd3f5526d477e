"""The closed training loop: rollouts -> rewards -> advantages -> LoRA training that continues
the same adapter -> reload -> held-out evaluation, round after round (:func:`train_loop`)."""

from agent_rl_plugin.loop.config import (
    ENVIRONMENTS,
    TRAIN_DEFAULTS,
    LoopConfig,
    LoopConfigError,
    environment_factory,
    load_loop_config,
)
from agent_rl_plugin.loop.driver import LoopResult, evaluate, train_loop
from agent_rl_plugin.loop.episode import REWARD_NAME, EpisodeResult, env_agent, play_episode
from agent_rl_plugin.loop.records import LoopRound, read_rounds

__all__ = [
    "ENVIRONMENTS",
    "REWARD_NAME",
    "TRAIN_DEFAULTS",
    "EpisodeResult",
    "LoopConfig",
    "LoopConfigError",
    "LoopResult",
    "LoopRound",
    "env_agent",
    "environment_factory",
    "evaluate",
    "load_loop_config",
    "play_episode",
    "read_rounds",
    "train_loop",
]
