"""Collecting reward plugins from the ``agent_rl_register_rewards`` hook.

Every plugin (built-in module or ``pip install``-ed entry point) implementing the hook is called
with ``register`` and the :class:`~agent_rl_plugin.config.RLConfig`. ``register`` accepts:

* a :class:`~agent_rl_plugin.rewards.base.RewardPlugin` instance (functions decorated with
  :func:`~agent_rl_plugin.rewards.base.reward` are instances of ``FunctionReward``);
* a ``RewardPlugin`` subclass, which is instantiated with ``config.rewards.get(NAME, {})`` as
  keyword arguments (its parameters and ``weight``). When the instance names itself otherwise
  (``llm_judge`` without a judge is ``llm_judge_heuristic``), a ``weight`` under that name
  overrides.

For an instance, a ``weight`` in ``config.rewards[NAME]`` overrides the reward's weight; other
parameters are the plugin's to read (``config.rewards.get(NAME, {})`` in its hook).

Each reward remembers the pluggy plugin that registered it. Rows in ``rewards`` carry

* ``plugin``: that plugin's name in the plugin manager: the entry-point name for installed
  packages (``example_rewards``), the :data:`~agent_rl_plugin.plugins.DEFAULT_PLUGINS` key for
  built-ins (``rewards_builtin``), the object's class name for unnamed objects registered in code;
* ``plugin_version``: ``"<package version>/<reward version>"``, e.g. ``"0.3.0/1"``: the
  distribution's version (:func:`agent_rl_plugin.plugins.plugin_version`; ``unknown`` when it has
  none) and the reward's own ``version``. Split on the last ``/`` to get either part.

Two rewards with one name are refused with :class:`DuplicateRewardError` naming both plugins. A
plugin whose hook raises is skipped, and an object that is not a valid reward is skipped, both
reported in :attr:`RewardRegistry.errors` (they never stop the other plugins).
"""

from __future__ import annotations

import copy
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any

import pluggy

from agent_rl_plugin import plugins as plugin_registry
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.rewards.base import RewardPlugin

logger = logging.getLogger(__name__)

HOOK_NAME = "agent_rl_register_rewards"
_MODES = ("pointwise", "batch")
_SOURCES = ("code", "llm", "heuristic", "human")


class RewardRegistrationError(AgentRLError, ValueError):
    """A reward could not be registered (bad object, bad name, mode or source)."""


class DuplicateRewardError(RewardRegistrationError):
    """Two registered rewards share a name; the message names both plugins."""


@dataclass(frozen=True)
class RegisteredReward:
    """A reward and the plugin that registered it."""

    reward: RewardPlugin
    plugin: str
    package_version: str | None = None

    @property
    def name(self) -> str:
        return self.reward.name

    @property
    def plugin_version(self) -> str:
        """``"<package version>/<reward version>"``, the ``plugin_version`` column."""
        return f"{self.package_version or 'unknown'}/{self.reward.version}"

    def describe(self) -> dict[str, Any]:
        """The reward's own description plus ``plugin`` and ``plugin_version``."""
        return {**self.reward.describe(), "plugin": self.plugin, "plugin_version": self.plugin_version}


@dataclass
class RewardRegistry:
    """The registered rewards by name, and the plugins that failed to register theirs."""

    rewards: dict[str, RegisteredReward] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def plugins(self) -> dict[str, RewardPlugin]:
        return {name: entry.reward for name, entry in self.rewards.items()}


def _display_name(pm: pluggy.PluginManager, plugin: object) -> str:
    name = pm.get_name(plugin) or ""
    if not name or name.isdigit():  # registered without a name: pluggy used id(plugin)
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
    return name


def _build(obj: Any, config: RLConfig, plugin_name: str) -> RewardPlugin:
    settings = dict(config.rewards.get(getattr(obj, "name", "") or "", {}))
    if inspect.isclass(obj) and issubclass(obj, RewardPlugin):
        try:
            obj = obj(**settings)
        except (TypeError, ValueError) as exc:
            raise RewardRegistrationError(
                f"plugin {plugin_name!r}: reward class {obj.__name__} does not accept the settings "
                f"config.rewards[{obj.name!r}] = {settings!r}: {exc}"
            ) from None
        own = config.rewards.get(obj.name)  # an instance named otherwise (llm_judge_heuristic)
        if own and obj.name != getattr(type(obj), "name", obj.name) and "weight" in own:
            obj.weight = float(own["weight"])
    elif isinstance(obj, RewardPlugin):
        if "weight" in settings:  # on a copy: the plugin's own object keeps its default
            obj = copy.copy(obj)
            obj.weight = float(settings["weight"])
    else:
        raise RewardRegistrationError(
            f"plugin {plugin_name!r} registered {obj!r:.80}, which is not a reward: pass a RewardPlugin "
            "instance or a function decorated with agent_rl_plugin.rewards.reward"
        )
    check_reward(obj, plugin_name)
    return obj


def check_reward(obj: RewardPlugin | type[RewardPlugin], plugin_name: str) -> None:
    """Raise :class:`RewardRegistrationError` unless ``obj`` (a reward or a reward class) has a
    name and a known ``mode`` and ``source``."""
    name = obj.name
    if not isinstance(name, str) or not name.strip():
        raise RewardRegistrationError(f"plugin {plugin_name!r} registered a reward without a name ({obj!r:.80})")
    if obj.mode not in _MODES:
        raise RewardRegistrationError(
            f"plugin {plugin_name!r}: reward {name!r} has mode {obj.mode!r}, not one of {_MODES}"
        )
    if obj.source not in _SOURCES:
        raise RewardRegistrationError(
            f"plugin {plugin_name!r}: reward {name!r} has source {obj.source!r}, not one of {_SOURCES}"
        )


def collect_registered_rewards(
    pm: pluggy.PluginManager | None = None, config: RLConfig | None = None
) -> RewardRegistry:
    """Call every ``agent_rl_register_rewards`` implementation and return what they registered.

    ``pm`` defaults to the process-wide manager, ``config`` to ``RLConfig.from_env()``. Raises
    :class:`DuplicateRewardError` when two rewards share a name.
    """
    pm = pm or plugin_registry.get_plugin_manager()
    config = config or RLConfig.from_env()
    registry = RewardRegistry()
    caller = getattr(pm.hook, HOOK_NAME)
    # pluggy calls the last registered implementation first: keep that order
    for impl in reversed(caller.get_hookimpls()):
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            continue
        plugin_name = _display_name(pm, impl.plugin)
        found: list[RewardPlugin] = []
        problems: list[str] = []

        def register(obj: Any, _name: str = plugin_name, _found: list = found, _problems: list = problems) -> None:
            try:
                _found.append(_build(obj, config, _name))
            except RewardRegistrationError as exc:  # skip this one, keep the plugin's others
                _problems.append(str(exc))

        kwargs = {"register": register, "config": config}
        try:
            impl.function(*[kwargs[arg] for arg in impl.argnames])
        except Exception as exc:  # a broken plugin is reported, the others still register
            problems.append(f"{type(exc).__name__}: {exc}")
            found.clear()
        if problems:
            registry.errors[plugin_name] = "; ".join(problems)
            logger.warning("agent-rl: plugin %r could not register its rewards: %s", plugin_name, "; ".join(problems))
        version = plugin_registry.plugin_version(pm, impl.plugin)
        for reward in found:
            previous = registry.rewards.get(reward.name)
            if previous is not None:
                where = (
                    f"twice by plugin {plugin_name!r}"
                    if previous.plugin == plugin_name
                    else f"by two plugins: {previous.plugin!r} ({type(previous.reward).__name__}) and "
                    f"{plugin_name!r} ({type(reward).__name__})"
                )
                raise DuplicateRewardError(
                    f"reward name {reward.name!r} is registered {where}; rename one of them, or load only "
                    f"one plugin (AGENT_RL_PLUGINS=name,... limits the installed plugins loaded)"
                )
            registry.rewards[reward.name] = RegisteredReward(reward, plugin_name, version)
    return registry


def collect_rewards(pm: pluggy.PluginManager | None = None, config: RLConfig | None = None) -> dict[str, RewardPlugin]:
    """The registered rewards by name (see :func:`collect_registered_rewards`)."""
    return collect_registered_rewards(pm, config).plugins()
