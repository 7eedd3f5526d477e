"""Configuration of the trainers: one dataclass per method, each field declared once with
:func:`~agent_rl_plugin.train.fields.option` (help text, command-line flag, allowed values; the
CLI options, the config-file schema and the docs table are generated from it) and validation
in ``__post_init__`` raising :class:`TrainConfigError` (a ``ValueError``) with a message that
names the field.

* :class:`LoRATrainConfig`: what every method shares (model, output, optimiser, LoRA,
  precision, checkpoints);
* :class:`KTOTrainConfig`: KTO (this module);
* :class:`~agent_rl_plugin.train.grpo_config.GRPOTrainConfig` and
  :class:`~agent_rl_plugin.train.grpo_config.OfflineGRPOTrainConfig`: online and offline GRPO.

Fields left ``None`` that depend on the machine (``batch_size``,
``gradient_accumulation_steps``, ``lora_r``, ``lora_alpha``, ``use_cpu``, ``bf16``) are filled by
:func:`agent_rl_plugin.train.hardware.apply_hardware_profile` when training starts; a value
given explicitly is always kept.

Balanced KTO weights (``desirable_weight``/``undesirable_weight`` left ``None``): TRL's KTO
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
from dataclasses import dataclass
from typing import Optional, Union

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.train.fields import check_choices, option

RATIO_LOW = 1.0
RATIO_HIGH = 4.0 / 3.0
RATIO_TARGET = 7.0 / 6.0


class TrainConfigError(AgentRLError, ValueError):
    """A training configuration value is invalid."""


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


def _positive_int(name: str, value, minimum: int = 1) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
        raise TrainConfigError(f"{name} must be an integer >= {minimum} or None, got {value!r}")


@dataclass
class LoRATrainConfig:
    """Fields every trainer shares. Subclasses add their method's fields."""

    model: str = option(
        help="Base model: a local directory (saved with save_pretrained) or a Hugging Face model name.",
        flag="--model",
        short="-m",
        required=True,
    )
    allow_download: bool = option(
        False,
        help="Download the base model from the Hugging Face hub when it is neither a local directory nor cached "
        "(default False: loading is offline, and an unknown name fails at once; also AGENT_RL_ALLOW_DOWNLOAD=1).",
        flag="--allow-download",
    )
    output_dir: str = option(
        help="Directory for checkpoints, logs and the saved LoRA adapter (<output_dir>/adapter).",
        flag="--out",
        short="-o",
        required=True,
    )
    learning_rate: float = option(5e-5, help="Peak learning rate of the LoRA parameters.", flag="--lr")
    epochs: float = option(
        1.0, help="Number of passes over the dataset (ignored when max_steps is set).", flag="--epochs"
    )
    max_steps: Optional[int] = option(
        None, help="Stop after this many optimizer steps (None: use epochs).", flag="--max-steps"
    )
    batch_size: Optional[int] = option(
        None, help="Per-device train batch size (None: from the hardware profile).", flag="--batch-size"
    )
    gradient_accumulation_steps: Optional[int] = option(
        None, help="Batches accumulated per optimizer step (None: from the hardware profile)."
    )
    lora_r: Optional[int] = option(None, help="LoRA rank (None: from the hardware profile).", flag="--lora-r")
    lora_alpha: Optional[float] = option(None, help="LoRA alpha, scale = alpha / r (None: 2 * lora_r).")
    lora_dropout: float = option(0.0, help="Dropout on the LoRA input, in [0, 1).")
    target_modules: Optional[list[str]] = option(
        None, help="Module names that get LoRA adapters (None: 'all-linear', every linear layer but the output head)."
    )
    max_length: Optional[int] = option(1024, help="Truncate prompt + completion to this many tokens (None: no limit).")
    seed: int = option(42, help="Random seed of the trainer (data order, LoRA init, sampling).")
    use_cpu: Optional[bool] = option(
        None, help="Train on CPU (None: auto, CPU when no GPU is available).", flag="--use-cpu"
    )
    bf16: Optional[bool] = option(
        None, help="Use bf16 mixed precision (None: auto, when the GPU supports it).", flag="--bf16"
    )
    logging_steps: int = option(1, help="Log metrics every this many steps.")
    save_strategy: str = option(
        "no", help="When the trainer saves checkpoints: 'no', 'steps' or 'epoch'.", choices=("no", "steps", "epoch")
    )
    save_steps: int = option(
        500,
        help="Save a checkpoint every this many steps (when save_strategy is 'steps').",
        flag="--save-steps",
        implies={"save_strategy": "steps"},
    )
    save_total_limit: Optional[int] = option(None, help="Keep at most this many checkpoints (None: all).")
    resume_from_checkpoint: Union[bool, str, None] = option(
        None,
        help="Resume from a checkpoint: a checkpoint directory, or 'latest' (True) for the newest one under output_dir.",
        flag="--resume",
    )
    report_to: list[str] = option(
        help="Experiment trackers for the trainer (e.g. ['wandb']); [] for none.", factory=list
    )

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
        _positive_int("batch_size", self.batch_size)
        _positive_int("gradient_accumulation_steps", self.gradient_accumulation_steps)
        _positive_int("lora_r", self.lora_r)
        if self.lora_alpha is not None and not self.lora_alpha > 0:
            raise TrainConfigError(f"lora_alpha must be > 0 or None, got {self.lora_alpha}")
        if not 0 <= self.lora_dropout < 1:
            raise TrainConfigError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.target_modules is not None:
            if isinstance(self.target_modules, str):
                self.target_modules = [self.target_modules]
            self.target_modules = list(self.target_modules)
            if not self.target_modules:
                raise TrainConfigError("target_modules: give at least one module name, or None for all linear layers")
        if self.max_length is not None and self.max_length < 2:
            raise TrainConfigError(f"max_length must be >= 2 or None, got {self.max_length}")
        if self.logging_steps < 1:
            raise TrainConfigError(f"logging_steps must be >= 1, got {self.logging_steps}")
        check_choices(self, TrainConfigError)
        _positive_int("save_steps", self.save_steps)
        _positive_int("save_total_limit", self.save_total_limit)
        if isinstance(self.resume_from_checkpoint, str):
            if self.resume_from_checkpoint.lower() in ("true", "latest"):
                self.resume_from_checkpoint = True
            elif not self.resume_from_checkpoint.strip():
                self.resume_from_checkpoint = None
        if self.resume_from_checkpoint is False:
            self.resume_from_checkpoint = None
        if isinstance(self.report_to, str):
            self.report_to = [] if self.report_to == "none" else [self.report_to]
        self.report_to = list(self.report_to)

    # -- helpers the trainers share -------------------------------------------------------------

    def resolved_lora_alpha(self) -> float:
        """``lora_alpha``, or ``2 * lora_r`` when it was left ``None``."""
        if self.lora_alpha is not None:
            return float(self.lora_alpha)
        if self.lora_r is None:
            raise TrainConfigError("lora_r is not set: call apply_hardware_profile(config) first")
        return float(2 * self.lora_r)

    def lora_config(self):
        """The ``peft.LoraConfig`` of these fields (causal LM)."""
        from peft import LoraConfig

        if self.lora_r is None:
            raise TrainConfigError("lora_r is not set: call apply_hardware_profile(config) first")
        return LoraConfig(
            r=self.lora_r,
            lora_alpha=self.resolved_lora_alpha(),
            lora_dropout=self.lora_dropout,
            target_modules=self.target_modules if self.target_modules is not None else "all-linear",
            task_type="CAUSAL_LM",
        )

    def trainer_arguments(self) -> dict:
        """Keyword arguments of ``transformers.TrainingArguments`` (and TRL's configs, its
        subclasses) that these fields set. The hardware fields must be resolved."""
        missing = [
            n for n in ("batch_size", "gradient_accumulation_steps", "use_cpu", "bf16") if getattr(self, n) is None
        ]
        if missing:
            raise TrainConfigError(f"{', '.join(missing)} not set: call apply_hardware_profile(config) first")
        return dict(
            output_dir=self.output_dir,
            learning_rate=self.learning_rate,
            num_train_epochs=self.epochs,
            max_steps=self.max_steps if self.max_steps is not None else -1,
            per_device_train_batch_size=self.batch_size,
            gradient_accumulation_steps=self.gradient_accumulation_steps,
            seed=self.seed,
            use_cpu=bool(self.use_cpu),
            bf16=bool(self.bf16),
            logging_steps=self.logging_steps,
            save_strategy=self.save_strategy,
            save_steps=self.save_steps,
            save_total_limit=self.save_total_limit,
            report_to=list(self.report_to),
        )


@dataclass
class KTOTrainConfig(LoRATrainConfig):
    """What :func:`~agent_rl_plugin.train.train_kto` trains and how (see the module doc)."""

    beta: float = option(
        0.1, help="KTO beta: strength of the implicit KL penalty against the reference model (> 0).", flag="--beta"
    )
    desirable_weight: Optional[float] = option(
        None, help="Loss weight of desirable rows (None: balanced from the label counts, see balanced_weights)."
    )
    undesirable_weight: Optional[float] = option(
        None, help="Loss weight of undesirable rows (None: 1, or balanced with desirable_weight)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size is not None and self.batch_size <= 1:
            raise TrainConfigError(
                f"batch_size must be > 1 for KTO (got {self.batch_size}): KTO estimates its KL term by "
                "pairing completions within a batch; use 2 or more"
            )
        if not self.beta > 0:
            raise TrainConfigError(f"beta must be > 0, got {self.beta}")
        for name in ("desirable_weight", "undesirable_weight"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise TrainConfigError(f"{name} must be > 0 or None, got {value}")

    def weights_for(self, n_desirable: int, n_undesirable: int) -> tuple[float, float]:
        """The ``(desirable_weight, undesirable_weight)`` used for these label counts."""
        if self.desirable_weight is None and self.undesirable_weight is None:
            return balanced_weights(n_desirable, n_undesirable)
        return (
            1.0 if self.desirable_weight is None else float(self.desirable_weight),
            1.0 if self.undesirable_weight is None else float(self.undesirable_weight),
        )


__all__ = ["KTOTrainConfig", "LoRATrainConfig", "TrainConfigError", "balanced_weights"]
