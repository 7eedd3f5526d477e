"""Training on logged rollouts with TRL + PEFT (see ``docs``):

* :func:`train_kto` with :class:`KTOTrainConfig`: KTO with LoRA on ``build_kto_dataset`` rows,
  returning a :class:`TrainResult` (adapter path, metrics, log history);
* :func:`implicit_reward_accuracy`: held-out preference accuracy of the implicit reward;
* :func:`record_training_run`: a run and its logged metrics into ``training_runs`` / ``training_metrics``;
* :func:`build_tiny_model`: a tiny offline Qwen2 + tokenizer for demos and tests.

Importing this package does not import torch/TRL; they load when a function runs.
"""

from __future__ import annotations

from agent_rl_plugin.train.config import KTOTrainConfig, TrainConfigError, balanced_weights
from agent_rl_plugin.train.kto import (
    TrainError,
    TrainResult,
    check_kto_dataset,
    implicit_reward_accuracy,
    train_kto,
)
from agent_rl_plugin.train.records import record_training_run
from agent_rl_plugin.train.tiny import build_tiny_model, build_tokenizer

__all__ = [
    "KTOTrainConfig",
    "TrainConfigError",
    "TrainError",
    "TrainResult",
    "balanced_weights",
    "build_tiny_model",
    "build_tokenizer",
    "check_kto_dataset",
    "implicit_reward_accuracy",
    "record_training_run",
    "train_kto",
]
