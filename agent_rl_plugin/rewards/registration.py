"""Registering rewards from a script or notebook: :func:`register` and :func:`unregister`.

An installed package registers its rewards through the ``agent_rl_register_rewards`` hook of an
entry point. A script can do the same without packaging anything::

    from agent_rl_plugin.rewards import register, reward, score

    @reward(name="short_answer")
    def short_answer(rollout):
        return 1.0 if len(rollout.final_output or "") < 200 else 0.0

    register(short_answer)
    score("agent_rl.duckdb", rewards=["short_answer"])

The rewards go through the same hook as installed ones: :func:`register` adds (once) a small
plugin object, named ``plugin`` (``"script"`` by default), to the plugin manager, and its
``agent_rl_register_rewards`` implementation registers them. So everything that collects
rewards in this process (:func:`~agent_rl_plugin.rewards.runner.score`, ``agent-rl score``
and ``agent-rl plugins`` run in-process) sees them, and their rows carry ``plugin`` = that name
and ``plugin_version`` = ``"unknown/<reward version>"``.
"""

from __future__ import annotations

import inspect
from typing import TypeAlias

import pluggy

from agent_rl_plugin import plugins as plugin_registry
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.registry import (
    DuplicateRewardError,
    RewardRegistrationError,
    check_reward,
    collect_registered_rewards,
)

#: The plugin name in-script rewards are registered under by default.
SCRIPT_PLUGIN = "script"

RewardLike: TypeAlias = RewardPlugin | type[RewardPlugin]


class ScriptRewards:
    """The plugin holding the rewards registered by :func:`register` under one plugin name."""

    def __init__(self) -> None:
        self.rewards: dict[str, RewardLike] = {}

    @hookimpl
    def agent_rl_register_rewards(self, register) -> None:  # noqa: ANN001 - hook signature
        for reward in list(self.rewards.values()):
            register(reward)


def _name_of(reward: object, plugin: str) -> str:
    if isinstance(reward, RewardPlugin) or (inspect.isclass(reward) and issubclass(reward, RewardPlugin)):
        check_reward(reward, plugin)
        return reward.name
    raise RewardRegistrationError(
        f"register() got {reward!r:.80}, which is not a reward",
        "pass a function decorated with agent_rl_plugin.rewards.reward, or a RewardPlugin instance or subclass",
    )


def _holder(pm: pluggy.PluginManager, plugin: str) -> ScriptRewards | None:
    found = pm.get_plugin(plugin)
    if found is None:
        return None
    if not isinstance(found, ScriptRewards):
        raise RewardRegistrationError(
            f"plugin name {plugin!r} is taken by an installed or built-in plugin",
            "pass another plugin name to register()",
        )
    return found


def register(
    *rewards: RewardLike,
    plugin: str = SCRIPT_PLUGIN,
    replace: bool = False,
    pm: pluggy.PluginManager | None = None,
    config: RLConfig | None = None,
) -> list[str]:
    """Make ``rewards`` available to scoring in this process, as if a plugin named ``plugin``
    registered them through the ``agent_rl_register_rewards`` hook; return their names.

    Each reward is a function decorated with :func:`~agent_rl_plugin.rewards.reward`, a
    :class:`~agent_rl_plugin.rewards.RewardPlugin` instance, or a ``RewardPlugin`` subclass
    (instantiated with ``config.rewards[NAME]`` when scoring, like an installed one).
    Registering the same object again does nothing. ``pm`` defaults to the process-wide plugin
    manager; ``config`` (default ``RLConfig.from_env()``) is used to check names against the
    rewards already registered.

    Raises :class:`~agent_rl_plugin.rewards.registry.RewardRegistrationError` for an object
    that is not a valid reward, and
    :class:`~agent_rl_plugin.rewards.registry.DuplicateRewardError` when a reward of that name
    is already registered: by an installed or built-in plugin, or by an earlier call with
    another object (unless ``replace``, which swaps it). Nothing is registered when one of
    ``rewards`` is refused.
    """
    pm = pm or plugin_registry.get_plugin_manager()
    named = [(_name_of(reward, plugin), reward) for reward in rewards]
    holder = _holder(pm, plugin)
    mine = dict(holder.rewards) if holder is not None else {}
    batch: dict[str, RewardLike] = {}
    for name, reward in named:
        if batch.get(name, reward) is not reward:
            raise DuplicateRewardError(
                f"register() got two different rewards named {name!r}", "give one of them another name"
            )
        batch[name] = reward
    others = {n for n in batch if n not in mine}
    if others:
        registry = collect_registered_rewards(pm, config)
        for name in sorted(others):
            entry = registry.rewards.get(name)
            if entry is not None:
                raise DuplicateRewardError(
                    f"reward name {name!r} is already registered by plugin {entry.plugin!r}",
                    "give yours another name, e.g. @reward(name='my_...')",
                )
    for name, reward in batch.items():
        if name in mine and mine[name] is not reward and not replace:
            raise DuplicateRewardError(
                f"reward name {name!r} is already registered by register() with another object",
                "call unregister(name) first, or register(..., replace=True)",
            )
    if holder is None:
        holder = ScriptRewards()
        pm.register(holder, name=plugin)
    holder.rewards.update(batch)
    return list(batch)


def unregister(*rewards: RewardLike | str, pm: pluggy.PluginManager | None = None) -> list[str]:
    """Remove rewards that :func:`register` added (given as the objects or their names), under
    any plugin name; return the names removed. Rewards it did not add are left alone (an
    installed plugin's rewards cannot be removed this way), so calling it twice is harmless."""
    pm = pm or plugin_registry.get_plugin_manager()
    names = {reward if isinstance(reward, str) else getattr(reward, "name", None) for reward in rewards}
    removed: list[str] = []
    for holder in pm.get_plugins():
        if not isinstance(holder, ScriptRewards):
            continue
        for name in [n for n in holder.rewards if n in names]:
            del holder.rewards[name]
            removed.append(name)
        if not holder.rewards:
            pm.unregister(holder)
    return removed


__all__ = ["SCRIPT_PLUGIN", "RewardLike", "ScriptRewards", "register", "unregister"]
