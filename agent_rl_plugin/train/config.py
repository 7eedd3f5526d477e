"""Configuration of :func:`agent_rl_plugin.train.train_kto` (KTO with LoRA on TRL + PEFT).

Every field has help text (``dataclasses.fields(KTOTrainConfig)[i].metadata["help"]``);
``__post_init__`` checks the values and raises :class:`TrainConfigError` (a ``ValueError``)
with a message that names the field.

Balanced weights (``desirable_weight``/``undesirable_weight`` left ``None``): TRL's KTO
documentation recommends weights such that
``desirable_weight * n_desirable / (undesirable_weight * n_undesirable)`` lies in ``[1, 4/3]``.
:func:`balanced_weights` keeps ``undesirable_weight = 1`` and sets ``desirable_weight = 1`` when
the label counts already give a ratio in that range, otherwise
``desirable_weight = (7/6) * n_undesirable / n_desirable`` so that the ratio is 7/6, the middle
of the recommended range. A weight given explicitly is kept as given (the other, if ``None``,
is 1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

RATIO_LOW = 1.0
RATIO_HIGH = 4.0 / 3.0
RATIO_TARGET = 7.0 / 6.0


class TrainConfigError(ValueError):
    """A training configuration value is invalid."""


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover - torch missing or broken
        return False


def _bf16_supported() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    except Exception:  # pragma: no cover
        return False


def balanced_weights(n_desirable: int, n_undesirable: int) -> tuple[float, float]:
    """``(desirable_weight, undesirable_weight)`` for the label counts (see the module doc)."""
    if n_desirable <= 0 or n_undesirable <= 0:
        raise TrainConfigError(
            f"balanced weights need both classes: {n_desirable} desirable, {n_undesirable} undesirable"
        )
    ratio = n_desirable / n_undesirable
    if RATIO_LOW <= ratio <= RATIO_HIGH:
        return 1.0, 1.0
    return RATIO_TARGET * n_undesirable / n_desirable, 1.0


def _help(text: str, default=None, factory=None):
    if factory is not None:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


@dataclass
class KTOTrainConfig:
    """What :func:`~agent_rl_plugin.train.train_kto` trains and how (see the module doc)."""

    model: str = _help("Base model: a local directory or a Hugging Face model name (loaded with from_pretrained).")
    output_dir: str = _help("Directory for checkpoints, logs and the saved LoRA adapter.")
    learning_rate: float = _help("Peak learning rate of the LoRA parameters.", 5e-5)
    epochs: float = _help("Number of passes over the dataset (ignored when max_steps is set).", 1.0)
    max_steps: Optional[int] = _help("Stop after this many optimizer steps (None: use epochs).", None)
    batch_size: int = _help(
        "Per-device train batch size; must be > 1 because KTO estimates its KL term by pairing "
        "completions within a batch.",
        8,
    )
    gradient_accumulation_steps: int = _help("Batches accumulated per optimizer step.", 1)
    lora_r: int = _help("LoRA rank.", 16)
    lora_alpha: int = _help("LoRA alpha (scale = alpha / r).", 32)
    lora_dropout: float = _help("Dropout on the LoRA input, in [0, 1).", 0.0)
    target_modules: Optional[list[str]] = _help(
        "Module names that get LoRA adapters (None: 'all-linear', every linear layer but the output head).",
        None,
    )
    beta: float = _help("KTO beta: strength of the implicit KL penalty against the reference model (> 0).", 0.1)
    desirable_weight: Optional[float] = _help(
        "Loss weight of desirable rows (None: balanced from the label counts, see balanced_weights).", None
    )
    undesirable_weight: Optional[float] = _help(
        "Loss weight of undesirable rows (None: 1, or balanced with desirable_weight).", None
    )
    max_length: Optional[int] = _help("Truncate prompt + completion to this many tokens (None: no limit).", 1024)
    seed: int = _help("Random seed of the trainer (data order, LoRA init).", 42)
    use_cpu: Optional[bool] = _help("Train on CPU (None: auto, CPU when CUDA is not available).", None)
    bf16: Optional[bool] = _help("Use bf16 mixed precision (None: auto, when the GPU supports it).", None)
    logging_steps: int = _help("Log metrics every this many steps.", 1)
    save_strategy: str = _help("When the trainer saves checkpoints: 'no', 'steps' or 'epoch'.", "no")
    report_to: list[str] = _help("Experiment trackers for the trainer (e.g. ['wandb']); [] for none.", factory=list)

    def __post_init__(self) -> None:
        if not self.model or not str(self.model).strip():
            raise TrainConfigError("model: give a local model directory or a model name")
        if not self.output_dir or not str(self.output_dir).strip():
            raise TrainConfigError("output_dir: give a directory for the adapter and logs")
        self.model = os.fspath(self.model)
        self.output_dir = os.fspath(self.output_dir)
        if not self.learning_rate > 0:
            raise TrainConfigError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.max_steps is None and not self.epochs > 0:
            raise TrainConfigError(f"epochs must be > 0 (or set max_steps), got {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            raise TrainConfigError(f"max_steps must be >= 1 or None, got {self.max_steps}")
        if self.batch_size <= 1:
            raise TrainConfigError(
                f"batch_size must be > 1 for KTO (got {self.batch_size}): KTO estimates its KL term by "
                "pairing completions within a batch; use 2 or more"
            )
        if self.gradient_accumulation_steps < 1:
            raise TrainConfigError(
                f"gradient_accumulation_steps must be >= 1, got {self.gradient_accumulation_steps}"
            )
        if self.lora_r < 1:
            raise TrainConfigError(f"lora_r must be >= 1, got {self.lora_r}")
        if not self.lora_alpha > 0:
            raise TrainConfigError(f"lora_alpha must be > 0, got {self.lora_alpha}")
        if not 0 <= self.lora_dropout < 1:
            raise TrainConfigError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.target_modules is not None:
            if isinstance(self.target_modules, str):
                self.target_modules = [self.target_modules]
            self.target_modules = list(self.target_modules)
            if not self.target_modules:
                raise TrainConfigError("target_modules: give at least one module name, or None for all linear layers")
        if not self.beta > 0:
            raise TrainConfigError(f"beta must be > 0, got {self.beta}")
        for name in ("desirable_weight", "undesirable_weight"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise TrainConfigError(f"{name} must be > 0 or None, got {value}")
        if self.max_length is not None and self.max_length < 2:
            raise TrainConfigError(f"max_length must be >= 2 or None, got {self.max_length}")
        if self.logging_steps < 1:
            raise TrainConfigError(f"logging_steps must be >= 1, got {self.logging_steps}")
        if self.save_strategy not in ("no", "steps", "epoch"):
            raise TrainConfigError(f"save_strategy must be 'no', 'steps' or 'epoch', got {self.save_strategy!r}")
        if isinstance(self.report_to, str):
            self.report_to = [] if self.report_to == "none" else [self.report_to]
        self.report_to = list(self.report_to)
        if self.use_cpu is None:
            self.use_cpu = not _cuda_available()
        if self.bf16 is None:
            self.bf16 = (not self.use_cpu) and _bf16_supported()

    def weights_for(self, n_desirable: int, n_undesirable: int) -> tuple[float, float]:
        """The ``(desirable_weight, undesirable_weight)`` used for these label counts."""
        if self.desirable_weight is None and self.undesirable_weight is None:
            return balanced_weights(n_desirable, n_undesirable)
        return (
            1.0 if self.desirable_weight is None else float(self.desirable_weight),
            1.0 if self.undesirable_weight is None else float(self.undesirable_weight),
        )


__all__ = ["KTOTrainConfig", "TrainConfigError", "balanced_weights"]
