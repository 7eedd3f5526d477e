"""The training methods and their configs, in one table.

* :data:`METHODS`: method name -> config class (``kto``, ``grpo``, ``offline_grpo``, ``gigpo``);
* :data:`PRESETS`: fields a method fixes (``gigpo`` is offline GRPO with
  ``advantage_level='step'``); such a field is not an option of that method;
* :func:`normalize_method` (``-``/``_`` and ``offline`` accepted), :func:`method_of_config`,
  :func:`new_config` (a config of a method, its preset applied) and :func:`method_options` (the
  declared options of a method, presets left out).
"""

from __future__ import annotations

from typing import Any, Union

from agent_rl_plugin.train.config import KTOTrainConfig, TrainConfigError
from agent_rl_plugin.train.fields import TrainOption, train_options
from agent_rl_plugin.train.grpo_config import GRPOTrainConfig, OfflineGRPOTrainConfig

AnyTrainConfig = Union[KTOTrainConfig, GRPOTrainConfig, OfflineGRPOTrainConfig]

#: Method name -> config class.
METHODS: dict[str, type] = {
    "kto": KTOTrainConfig,
    "grpo": GRPOTrainConfig,
    "offline_grpo": OfflineGRPOTrainConfig,
    "gigpo": OfflineGRPOTrainConfig,
}
#: Method name -> the fields it fixes.
PRESETS: dict[str, dict[str, Any]] = {"gigpo": {"advantage_level": "step"}}


def normalize_method(method: str) -> str:
    """The canonical method name (``kto``, ``grpo``, ``offline_grpo`` or ``gigpo``)."""
    name = str(method).strip().lower().replace("-", "_")
    if name == "offline":
        name = "offline_grpo"
    if name not in METHODS:
        raise TrainConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    return name


def method_of_config(config: Any) -> str:
    """The method name a config object trains (``gigpo`` for offline step-level advantages)."""
    if isinstance(config, OfflineGRPOTrainConfig):
        return "gigpo" if config.advantage_level == "step" else "offline_grpo"
    if isinstance(config, GRPOTrainConfig):
        return "grpo"
    if isinstance(config, KTOTrainConfig):
        return "kto"
    raise TypeError(f"not a training config: {type(config).__name__}")


def new_config(method: str, **values: Any) -> AnyTrainConfig:
    """A config of ``method`` from field values (already of the field types), with the
    method's preset; raises :class:`TrainConfigError` for invalid values and ``TypeError`` for
    an unknown field."""
    method = normalize_method(method)
    return METHODS[method](**{**PRESETS.get(method, {}), **values})


def method_options(method: str) -> list[TrainOption]:
    """The options of ``method`` (its config's fields but those its preset fixes)."""
    method = normalize_method(method)
    fixed = PRESETS.get(method, {})
    return [o for o in train_options(METHODS[method]) if o.name not in fixed]


__all__ = [
    "METHODS",
    "PRESETS",
    "AnyTrainConfig",
    "method_of_config",
    "method_options",
    "new_config",
    "normalize_method",
]
