"""The settings of a closed training loop (:func:`agent_rl_plugin.loop.train_loop`), from Python
or from a YAML/JSON file (``agent-rl loop --config loop.yaml``).

Training options are not repeated here: ``train`` holds overrides of
:class:`~agent_rl_plugin.train.grpo_config.OfflineGRPOTrainConfig` fields, checked by that class
(one definition per training option); :data:`TRAIN_DEFAULTS` are the loop's own defaults for
them, tuned on the bundled grids.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agent_rl_plugin.envs import GridWorld, KeyDoor, TextEnv
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.rl import METHODS

__all__ = ["ENVIRONMENTS", "TRAIN_DEFAULTS", "LoopConfig", "LoopConfigError", "environment_factory", "load_loop_config"]


def _keydoor() -> TextEnv:
    return KeyDoor(key_reward=0.5)


#: The bundled environments a loop config can name. ``keydoor`` pays 0.5 for the key (partial
#: credit: from scratch a random policy almost never reaches the door with it, see KeyDoor).
ENVIRONMENTS: dict[str, Callable[[], TextEnv]] = {"grid": GridWorld, "keydoor": _keydoor}

#: The loop's defaults for training options (OfflineGRPOTrainConfig fields), each overridable
#: through ``LoopConfig.train``. ``advantage_level``, ``choices``, ``model`` and ``output_dir``
#: are set by the loop itself.
TRAIN_DEFAULTS: dict[str, Any] = {
    "learning_rate": 1e-3,
    "epochs": 4.0,
    "target_kl": 0.1,
    "batch_size": 16,
    "gradient_accumulation_steps": 1,
    "lora_r": 8,
    "lora_alpha": 16,
    "loss_normalization": "token",
    "epsilon": 0.2,
    "beta": 0.0,
    "measure_examples": 0,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": [],
    "lora_dropout": 0.0,
}

_LOOP_OWNED = ("advantage_level", "allow_download", "choices", "model", "output_dir", "seed")


class LoopConfigError(AgentRLError, ValueError):
    """A loop setting that cannot work; the message names the setting."""


def environment_factory(env: str) -> Callable[[], TextEnv]:
    """The factory ``env`` names: a bundled environment (:data:`ENVIRONMENTS`), or
    ``"package.module:callable"`` returning a :class:`~agent_rl_plugin.envs.TextEnv` (imported,
    like ``agent-rl rollouts run``'s agent: only name code you trust)."""
    if env in ENVIRONMENTS:
        return ENVIRONMENTS[env]
    hint = f"use one of {', '.join(ENVIRONMENTS)}, or module:callable returning a TextEnv"
    if not isinstance(env, str) or env.count(":") != 1:
        raise LoopConfigError(f"env: unknown environment {env!r}", hint=hint)
    import importlib

    module_name, attribute = env.split(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise LoopConfigError(f"env: cannot load {env!r}: {exc}", hint=hint) from None
    if not callable(factory):
        raise LoopConfigError(f"env: {env!r} is not callable", hint=hint)
    return factory


@dataclass
class LoopConfig:
    """One closed loop: ``rounds`` rounds of ``group_size`` rollouts per training start of
    ``env`` with the current policy -> episode rewards -> ``method`` advantages -> offline LoRA
    training that continues the same adapter -> reload -> held-out greedy evaluation.

    ``model``: base model directory (``None``: a tiny Qwen2 built under ``output_dir`` with
    ``seed``); ``db``: the DuckDB file everything is recorded in (``None``:
    ``output_dir/loop.duckdb``); ``name``: the loop's id in the store (``None``: derived from
    the settings, so running the same config again resumes it); ``temperature``: sampling
    temperature of the training rollouts; ``allow_download``: download ``model`` from the
    Hugging Face hub when it is neither a local directory nor cached (default ``False``: loading
    is offline, :mod:`agent_rl_plugin.train.loading`); ``train``: overrides of training options
    (:data:`TRAIN_DEFAULTS`, e.g. ``entropy_coef``); ``torch_threads``: torch's thread count for
    the run (1 by default: tiny models are no faster with more, and a fixed count keeps a seed's
    numbers the same on every machine; ``None`` leaves torch's setting)."""

    env: str = "grid"
    method: str = "grpo"
    rounds: int = 8
    group_size: int = 8
    seed: int = 0
    model: str | None = None
    output_dir: str = "agent-rl-loop"
    db: str | None = None
    name: str | None = None
    temperature: float = 1.0
    torch_threads: int | None = 1
    allow_download: bool = False
    train: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        environment_factory(self.env)  # fails here, naming the setting, when it cannot be made
        if self.method not in METHODS:
            raise LoopConfigError(f"method: unknown method {self.method!r}", hint=f"use one of {', '.join(METHODS)}")
        for name in ("rounds", "group_size", "seed"):
            value = getattr(self, name)
            low = 0 if name == "seed" else (1 if name == "rounds" else 2)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise LoopConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if not (isinstance(self.temperature, (int, float)) and self.temperature > 0):
            raise LoopConfigError(f"temperature must be > 0, got {self.temperature!r}")
        if not isinstance(self.train, dict):
            raise LoopConfigError(f"train must be a mapping of training options, got {type(self.train).__name__}")
        owned = sorted(set(self.train) & set(_LOOP_OWNED))
        if owned:
            raise LoopConfigError(
                f"train: {', '.join(owned)} are set by the loop",
                hint="set model, output_dir and seed at the top level of the loop config",
            )
        self._check_training_options()

    def _check_training_options(self) -> None:
        """Build the round's training config once now, so a misspelled or bad option fails here
        (naming it), not after the first round's rollouts."""
        import dataclasses as dc

        from agent_rl_plugin.train.grpo_config import OfflineGRPOTrainConfig

        known = {f.name for f in dc.fields(OfflineGRPOTrainConfig)}
        unknown = sorted(set(self.train) - known)
        if unknown:
            raise LoopConfigError(
                f"train: unknown training options {', '.join(unknown)}",
                hint="the options are OfflineGRPOTrainConfig's fields (docs/training.md)",
            )
        try:
            OfflineGRPOTrainConfig(
                model="model", output_dir="out", advantage_level="step", choices=["a", "b"], **self.training_options()
            )
        except (TypeError, ValueError) as exc:
            raise LoopConfigError(f"train: {exc}") from None

    def settings_digest(self) -> str:
        """A digest of every setting that shapes the run (all but ``rounds``, ``name``,
        ``output_dir``, ``db``, ``torch_threads`` and ``allow_download``): a resumed loop must
        have the same one."""
        ignored = ("rounds", "name", "output_dir", "db", "torch_threads", "allow_download")
        shape = {k: v for k, v in dataclasses.asdict(self).items() if k not in ignored}
        return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:10]

    @property
    def db_path(self) -> str:
        return self.db or str(Path(self.output_dir) / "loop.duckdb")

    def training_options(self) -> dict[str, Any]:
        """The training options of every round: :data:`TRAIN_DEFAULTS` updated by ``train``."""
        return {**TRAIN_DEFAULTS, **self.train}

    def loop_id(self) -> str:
        """``name``, else a stable id of the settings that shape the run (not ``rounds``, so a
        longer run of the same loop resumes it)."""
        if self.name:
            return self.name
        return f"{self.env.rsplit(':', 1)[-1]}-{self.method}-s{self.seed}-{self.settings_digest()}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_loop_config(path: str | os.PathLike[str], **overrides: Any) -> LoopConfig:
    """A :class:`LoopConfig` from a YAML or JSON file (keys: its fields), with ``overrides``
    (fields given on the command line) applied. Unknown keys are an error naming them."""
    import yaml

    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise LoopConfigError(f"cannot read loop config {where}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise LoopConfigError(f"{where} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise LoopConfigError(f"{where} must hold a mapping of loop settings")
    known = {f.name for f in dataclasses.fields(LoopConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise LoopConfigError(
            f"{where}: unknown settings {', '.join(unknown)}", hint=f"known: {', '.join(sorted(known))}"
        )
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return LoopConfig(**data)
    except TypeError as exc:
        raise LoopConfigError(f"{where}: {exc}") from None
