"""What the trainers share: :class:`TrainResult`, loading a model and tokenizer (offline unless
allowed, :mod:`agent_rl_plugin.train.loading`), finding the checkpoint to resume from, and summarising a finished
``transformers.Trainer`` run."""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.train.config import TrainConfigError


class TrainError(AgentRLError, ValueError):
    """The data or setup cannot be trained on (e.g. only one label class)."""


@dataclass
class TrainResult:
    """What a trainer produced (``train_kto``, ``train_grpo``, ``train_offline_grpo``)."""

    output_dir: str
    adapter_path: str
    metrics: dict[str, float]
    n_rows: int
    global_step: int
    seconds: float
    log_history: list[dict[str, Any]] = field(default_factory=list)
    method: str = "kto"
    n_desirable: int = 0
    n_undesirable: int = 0
    desirable_weight: float = 1.0
    undesirable_weight: float = 1.0
    hardware: dict[str, Any] = field(default_factory=dict)
    resumed_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def latest_checkpoint(output_dir: str | os.PathLike[str]) -> str | None:
    """The ``checkpoint-N`` directory with the largest N under ``output_dir``, or ``None``."""
    root = Path(output_dir)
    if not root.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))]
    return str(max(found)[1]) if found else None


def fresh_start_note(config: Any) -> str | None:
    """When ``config`` asks to resume from the latest checkpoint (``True``) and ``output_dir``
    has none yet (a first run), set ``resume_from_checkpoint`` to ``None`` (start fresh) and
    return a note saying so; else ``None``, leaving the config unchanged."""
    if getattr(config, "resume_from_checkpoint", None) is not True or latest_checkpoint(config.output_dir):
        return None
    config.resume_from_checkpoint = None
    return (
        f"note: resume latest: no checkpoint under {config.output_dir} yet, so this run starts fresh "
        "(checkpoints are saved with save_steps)"
    )


def checkpoint_to_resume(config: Any) -> str | None:
    """The checkpoint directory ``config.resume_from_checkpoint`` names (``True``: the latest
    under ``output_dir``; none there yet starts fresh with a ``UserWarning``, see
    :func:`fresh_start_note`), or ``None`` to start fresh. Raises :class:`TrainConfigError`
    when an asked-for checkpoint directory is not one."""
    note = fresh_start_note(config)
    if note is not None:
        warnings.warn(note, stacklevel=2)
    wanted = getattr(config, "resume_from_checkpoint", None)
    if wanted in (None, False):
        return None
    if wanted is True:
        found = latest_checkpoint(config.output_dir)
        assert found is not None  # fresh_start_note reset the config otherwise
        return found
    path = os.fspath(wanted)
    if not os.path.isfile(os.path.join(path, "trainer_state.json")):
        raise TrainConfigError(
            f"resume_from_checkpoint: {path} is not a checkpoint (no trainer_state.json); "
            f"give a checkpoint-N directory or True for the latest under output_dir"
        )
    return path


def load_model_and_tokenizer(model_path: str, allow_download: bool | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` through ``from_pretrained``, offline unless ``allow_download``
    (see :mod:`agent_rl_plugin.train.loading`); a tokenizer without a pad token pads with its
    end-of-sequence token."""
    from agent_rl_plugin.train.loading import load_model_and_tokenizer as load

    return load(model_path, allow_download=allow_download)


def summarize_run(trainer: Any, output: Any) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """``(metrics, log_history)`` of a finished trainer: the last value logged for each metric,
    then the run summary of ``trainer.train()``."""
    history = [dict(entry) for entry in trainer.state.log_history]
    metrics: dict[str, float] = {}
    for entry in history:
        metrics.update({k: v for k, v in entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    metrics.update({k: v for k, v in (getattr(output, "metrics", None) or {}).items() if isinstance(v, (int, float))})
    return metrics, history


def check_finite_weights(model: Any, skipped_losses: int = 0) -> None:
    """Raise :class:`TrainError` when a trainable parameter of ``model`` holds NaN or inf, so a
    diverged run never saves (or reports as fine) an adapter of NaN weights. ``skipped_losses``:
    micro-batches the trainer already skipped for a non-finite loss (named in the message)."""
    import torch

    bad = [
        name
        for name, parameter in model.named_parameters()
        if parameter.requires_grad and not bool(torch.isfinite(parameter).all())
    ]
    if not bad:
        return
    skipped = f"; {skipped_losses} micro-batches had a non-finite loss and were skipped" if skipped_losses else ""
    raise TrainError(
        f"training diverged: {len(bad)} trainable parameters hold NaN or inf (first: {bad[0]}){skipped}; "
        "the adapter was not saved",
        hint="lower learning_rate, check the advantages and logged old_logprobs for extreme values "
        "(or set use_behaviour_logprobs=False), and keep dual_clip set (default 3.0)",
    )


def save_adapter(trainer: Any, output_dir: str) -> str:
    """Save the LoRA adapter and the tokenizer under ``output_dir/adapter``; returns that path."""
    adapter_path = str(Path(output_dir) / "adapter")
    trainer.save_model(adapter_path)
    return adapter_path


__all__ = [
    "TrainError",
    "TrainResult",
    "check_finite_weights",
    "checkpoint_to_resume",
    "fresh_start_note",
    "latest_checkpoint",
    "load_model_and_tokenizer",
    "save_adapter",
    "summarize_run",
]
