"""Continuing a saved LoRA adapter instead of starting a fresh one (``train_offline_grpo(...,
adapter=PATH)``): a training loop trains the *same* adapter round after round, on the same
base model, so nothing is merged between rounds and the KL reference (the model with the
adapter disabled) stays the base model in every round.

* :func:`read_adapter` checks that a directory is a saved PEFT LoRA adapter and reads its
  settings (:class:`SavedAdapter`);
* :func:`adopt_adapter_settings` makes a training config agree with it (the adapter's rank and
  alpha are used; a rank, alpha or target modules the user set differently is an error);
* :func:`check_adapter_fits` compares the adapter's weight shapes with the base model's layers
  (an adapter trained on another base model is refused before PEFT loads it);
* :func:`prepare_policy` returns the trainable PEFT model: a fresh adapter
  (``get_peft_model``), or the saved one loaded with ``PeftModel.from_pretrained(base, path,
  is_trainable=True)``. Only the LoRA weights train; base weights stay frozen.

Errors are :class:`~agent_rl_plugin.train.config.TrainConfigError` naming the adapter path and
the fix. torch and PEFT are imported only when a function needs them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from agent_rl_plugin.train.config import TrainConfigError

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"

_FRESH = "or leave adapter unset to start a fresh adapter"


@dataclass(frozen=True)
class SavedAdapter:
    """The settings of a LoRA adapter saved by PEFT (``save_pretrained``)."""

    path: str
    r: int
    lora_alpha: float
    target_modules: Optional[frozenset[str]]
    base_model: Optional[str]


def read_adapter(path: str | os.PathLike[str]) -> SavedAdapter:
    """Read the ``adapter_config.json`` of a saved LoRA adapter directory (such as the
    ``<output_dir>/adapter`` a previous run saved). Raises :class:`TrainConfigError` when the
    directory is missing, holds no adapter, or holds an adapter that is not LoRA."""
    where = os.fspath(path)
    if not os.path.isdir(where):
        raise TrainConfigError(
            f"adapter: {where} does not exist",
            hint=f"give the adapter directory a previous run saved (<output_dir>/adapter), {_FRESH}",
        )
    config_file = Path(where, ADAPTER_CONFIG)
    if not config_file.is_file():
        raise TrainConfigError(
            f"adapter: {where} is not a saved adapter (no {ADAPTER_CONFIG})",
            hint=f"give the adapter directory a previous run saved (<output_dir>/adapter), {_FRESH}",
        )
    try:
        saved = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise TrainConfigError(
            f"adapter: cannot read {config_file}: {error}", hint=f"save the adapter again, {_FRESH}"
        ) from error
    if not isinstance(saved, dict) or saved.get("peft_type") != "LORA" or not isinstance(saved.get("r"), int):
        kind = saved.get("peft_type") if isinstance(saved, dict) else None
        raise TrainConfigError(
            f"adapter: {where} is not a LoRA adapter (peft_type {kind!r})",
            hint=f"give a LoRA adapter directory, {_FRESH}",
        )
    targets = saved.get("target_modules")
    if isinstance(targets, str):
        targets = None  # a regular expression or 'all-linear': the weights say which layers
    return SavedAdapter(
        path=where,
        r=int(saved["r"]),
        lora_alpha=float(saved.get("lora_alpha") or saved["r"]),
        target_modules=frozenset(targets) if targets else None,
        base_model=saved.get("base_model_name_or_path"),
    )


def adopt_adapter_settings(config: Any, adapter: SavedAdapter, *, rank_set_by_user: bool) -> None:
    """Make ``config`` (a :class:`~agent_rl_plugin.train.config.LoRATrainConfig`) train
    ``adapter``: ``lora_r`` and ``lora_alpha`` become the adapter's. A rank the user set
    (``rank_set_by_user``; a rank the hardware profile picked is replaced), an alpha set and
    target modules set that differ from the adapter's raise :class:`TrainConfigError`."""
    if rank_set_by_user and config.lora_r is not None and config.lora_r != adapter.r:
        raise TrainConfigError(
            f"adapter: {adapter.path} has LoRA rank {adapter.r}, but lora_r is {config.lora_r}",
            hint=f"set lora_r to {adapter.r} (or leave it unset to take the adapter's), {_FRESH} of rank {config.lora_r}",
        )
    if config.lora_alpha is not None and float(config.lora_alpha) != adapter.lora_alpha:
        raise TrainConfigError(
            f"adapter: {adapter.path} has LoRA alpha {adapter.lora_alpha:g}, but lora_alpha is {config.lora_alpha:g}",
            hint=f"set lora_alpha to {adapter.lora_alpha:g} (or leave it unset to take the adapter's), {_FRESH}",
        )
    if (
        config.target_modules is not None
        and adapter.target_modules is not None
        and set(config.target_modules) != adapter.target_modules
    ):
        raise TrainConfigError(
            f"adapter: {adapter.path} adapts {sorted(adapter.target_modules)}, "
            f"but target_modules is {sorted(config.target_modules)}",
            hint=f"leave target_modules unset to take the adapter's, {_FRESH}",
        )
    config.lora_r = adapter.r
    config.lora_alpha = adapter.lora_alpha


def check_adapter_fits(model: Any, adapter: SavedAdapter, base_model: str) -> None:
    """Raise :class:`TrainConfigError` when a LoRA weight of ``adapter`` targets a layer
    ``model`` (the base model, loaded from ``base_model``) does not have, or a layer of another
    shape: the adapter was trained on another base model."""
    weights = Path(adapter.path, ADAPTER_WEIGHTS)
    if not weights.is_file():
        return  # an older .bin adapter: PEFT's own loading checks it
    from safetensors import safe_open

    trained_on = f" (it was trained on {adapter.base_model})" if adapter.base_model else ""
    hint = f"train on the base model the adapter was trained on{trained_on}, {_FRESH}"
    with safe_open(str(weights), framework="pt") as handle:
        shapes = {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}
    for key, shape in sorted(shapes.items()):
        # a layer weight is (out, in); lora_A is (r, in), lora_B (out, r)
        for part, dim in ((".lora_A.weight", 1), (".lora_B.weight", 0)):
            if not key.endswith(part):
                continue
            name = key[: -len(part)].removeprefix("base_model.model.")
            try:
                layer = model.get_submodule(name)
            except AttributeError:
                raise TrainConfigError(
                    f"adapter: {adapter.path} does not fit the base model {base_model}: it has no layer {name}",
                    hint=hint,
                ) from None
            layer_shape = tuple(getattr(getattr(layer, "weight", None), "shape", ()))
            if len(layer_shape) == 2 and len(shape) == 2 and layer_shape[dim] != shape[dim]:
                raise TrainConfigError(
                    f"adapter: {adapter.path} does not fit the base model {base_model}: layer {name} has "
                    f"weight shape {list(layer_shape)}, the adapter's {part[1:]} has {list(shape)}",
                    hint=hint,
                )


def prepare_policy(model: Any, config: Any, adapter: SavedAdapter | None = None) -> Any:
    """The PEFT model to train on the base ``model``: a fresh LoRA adapter of
    ``config.lora_config()`` when ``adapter`` is ``None``, else the saved ``adapter`` (checked
    with :func:`check_adapter_fits`), loaded trainable with its weights as they were saved and
    ``config.lora_dropout``. Either way only the LoRA weights require gradients, and
    ``disable_adapter()`` gives the unchanged base model (the KL reference)."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if adapter is None:
        return get_peft_model(model, config.lora_config())
    check_adapter_fits(model, adapter, config.model)
    lora = LoraConfig.from_pretrained(adapter.path)
    lora.lora_dropout = config.lora_dropout
    lora.inference_mode = False
    try:
        return PeftModel.from_pretrained(model, adapter.path, config=lora, is_trainable=True)
    except (RuntimeError, ValueError, KeyError) as error:
        raise TrainConfigError(
            f"adapter: cannot load {adapter.path} onto the base model {config.model}: {error}",
            hint=f"train on the base model the adapter was trained on, {_FRESH}",
        ) from error


__all__ = [
    "SavedAdapter",
    "adopt_adapter_settings",
    "check_adapter_fits",
    "prepare_policy",
    "read_adapter",
]
