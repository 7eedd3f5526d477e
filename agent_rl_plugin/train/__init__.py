"""Training on logged rollouts with TRL + PEFT (see ``docs/training.md``):

* :func:`train_kto` with :class:`KTOTrainConfig`: KTO with LoRA on ``build_kto_dataset`` rows;
* :func:`train_grpo` with :class:`GRPOTrainConfig`: online GRPO (TRL's ``GRPOTrainer``) with
  reward plugins as reward functions (:func:`reward_functions`) on prompts mined from the store
  (:func:`build_prompt_dataset`);
* :func:`train_offline_grpo` with :class:`OfflineGRPOTrainConfig`: offline GRPO / GiGPO on logged
  completions with precomputed advantages;
* :func:`behaviour_logprobs`: the log-probs a policy should log for a completion, aligned with
  the tokens the offline trainer trains (constrained to a :class:`ChoiceSet` when given);
  :func:`completion_logprob`: a completion's log-prob as the trainer computes it;
* :func:`apply_hardware_profile`: machine-dependent fields (batch, accumulation, LoRA rank,
  precision) from the detected hardware; :func:`load_config_file`: YAML/TOML config files;
* :func:`merge_adapter`: a merged model that loads with plain transformers;
* :func:`implicit_reward_accuracy`: held-out preference accuracy of the implicit reward;
* :func:`record_training_run`: a run and its logged metrics into ``training_runs`` / ``training_metrics``;
* :func:`build_tiny_model`: a tiny offline Qwen2 + tokenizer for demos and tests;
* :func:`run_kto`, :func:`run_grpo_online`, :func:`run_grpo_offline`: data from the store,
  training and the record in one call (what ``agent-rl train`` and the demo do);
* :func:`train_options`: the declared options of a config class (one declaration per option,
  from which the CLI options, the config-file schema and the docs table are generated).

Each trainer returns a :class:`TrainResult`. Importing this package does not import
torch/TRL; they load when a function runs (names resolve lazily).
"""

from __future__ import annotations

from typing import Any

from agent_rl_plugin.lazy import lazy_exports

_EXPORTS = {
    "KTOTrainConfig": "agent_rl_plugin.train.config",
    "LoRATrainConfig": "agent_rl_plugin.train.config",
    "TrainConfigError": "agent_rl_plugin.train.config",
    "balanced_weights": "agent_rl_plugin.train.config",
    "GRPOTrainConfig": "agent_rl_plugin.train.grpo_config",
    "OfflineGRPOTrainConfig": "agent_rl_plugin.train.grpo_config",
    "TrainError": "agent_rl_plugin.train.common",
    "TrainResult": "agent_rl_plugin.train.common",
    "latest_checkpoint": "agent_rl_plugin.train.common",
    "Hardware": "agent_rl_plugin.train.hardware",
    "HardwareProfile": "agent_rl_plugin.train.hardware",
    "apply_hardware_profile": "agent_rl_plugin.train.hardware",
    "detect_hardware": "agent_rl_plugin.train.hardware",
    "load_config_file": "agent_rl_plugin.train.config_files",
    "check_kto_dataset": "agent_rl_plugin.train.kto",
    "implicit_reward_accuracy": "agent_rl_plugin.train.kto",
    "train_kto": "agent_rl_plugin.train.kto",
    "train_grpo": "agent_rl_plugin.train.grpo",
    "build_prompt_dataset": "agent_rl_plugin.train.prompts",
    "reward_functions": "agent_rl_plugin.train.reward_funcs",
    "train_offline_grpo": "agent_rl_plugin.train.offline",
    "behaviour_logprobs": "agent_rl_plugin.train.offline_logprobs",
    "completion_logprob": "agent_rl_plugin.train.offline_logprobs",
    "ChoiceSet": "agent_rl_plugin.train.choices",
    "ChoiceError": "agent_rl_plugin.train.choices",
    "merge_adapter": "agent_rl_plugin.train.export",
    "record_training_run": "agent_rl_plugin.train.records",
    "build_tiny_model": "agent_rl_plugin.train.tiny",
    "run_kto": "agent_rl_plugin.train.runs",
    "run_grpo_online": "agent_rl_plugin.train.runs",
    "run_grpo_offline": "agent_rl_plugin.train.runs",
    "train_options": "agent_rl_plugin.train.fields",
    "build_tokenizer": "agent_rl_plugin.train.tiny",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
