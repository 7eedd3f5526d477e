"""Online GRPO with LoRA: :func:`train_grpo` wraps ``trl.GRPOTrainer`` and ``trl.GRPOConfig``
(no training loop of our own). TRL samples ``num_generations`` completions per prompt, scores
them with the reward functions (reward plugins wrapped by
:func:`~agent_rl_plugin.train.reward_funcs.reward_functions`, or plain TRL callables),
normalises the rewards within each group and updates the LoRA adapter.

Prompts come from :func:`~agent_rl_plugin.train.prompts.build_prompt_dataset` (or any rows with
a ``prompt`` column, text or chat messages); the other columns (``task_id``, ``ground_truth``)
reach the reward functions. ``max_length`` of the shared config is not used: TRL 1.16's GRPO
neither truncates prompts nor takes a prompt length (completions are cut at
``max_completion_length``).

The reward curve (the mean weighted reward TRL logs at each logging step, and each function's
mean) is in ``TrainResult.extra``: ``reward_steps``, ``reward_curve``, ``reward_curves``, with
``reward_names``, ``reward_weights``, ``n_prompts`` and, for plugin functions, ``reward_stats``
(completions scored, failed, timed out).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, Mapping, Sequence

from agent_rl_plugin.train.common import (
    TrainError,
    TrainResult,
    checkpoint_to_resume,
    load_model_and_tokenizer,
    save_adapter,
    summarize_run,
)
from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.grpo_config import GRPOTrainConfig
from agent_rl_plugin.train.hardware import HardwareProfile, apply_hardware_profile
from agent_rl_plugin.train.reward_funcs import reward_weights


def prompt_dataset(prompts: Any):
    """``prompts`` as a ``datasets.Dataset`` with a ``prompt`` column: a Dataset as is, rows
    (mappings with ``prompt``), or bare prompts (texts or message lists). Raises
    :class:`TrainError` when there is no prompt or no ``prompt`` column."""
    import datasets

    if isinstance(prompts, datasets.Dataset):
        dataset = prompts
    else:
        if prompts is None:
            raise TrainError("no prompts given: pass build_prompt_dataset(...) or rows with a 'prompt' column")
        rows = list(prompts)
        if rows and not isinstance(rows[0], Mapping):
            rows = [{"prompt": p} for p in rows]
        if any(not isinstance(r, Mapping) for r in rows):
            raise TrainError("prompts must all be rows (mappings with 'prompt') or all bare prompts")
        dataset = datasets.Dataset.from_list([dict(r) for r in rows]) if rows else None
        if dataset is None:
            raise TrainError("no prompts: the prompt dataset is empty (check build_prompt_dataset's filter)")
    if "prompt" not in dataset.column_names:
        raise TrainError(f"the prompt dataset needs a 'prompt' column; it has {dataset.column_names}")
    if len(dataset) == 0:
        raise TrainError("no prompts: the prompt dataset is empty (check build_prompt_dataset's filter)")
    return dataset


def _functions(reward_funcs: Any) -> list[Callable[..., Any]]:
    if reward_funcs is None:
        funcs: list[Any] = []
    elif callable(reward_funcs) and not isinstance(reward_funcs, (list, tuple)):
        funcs = [reward_funcs]
    else:
        funcs = list(reward_funcs)
    if not funcs:
        raise TrainError("no reward functions: pass reward_functions(['task_completion', ...]) or TRL reward callables")
    bad = [f for f in funcs if not callable(f)]
    if bad:
        raise TrainError(
            f"{bad[0]!r:.80} is not a reward function: wrap reward plugin names with reward_functions(...)"
        )
    return funcs


def _world_size() -> int:
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def check_batch(config: GRPOTrainConfig, n_prompts: int) -> None:
    """TRL's batch rules as :class:`TrainConfigError` / :class:`TrainError` (instead of TRL's
    ``ValueError`` deep inside ``GRPOConfig``): the generation batch (``batch_size x
    gradient_accumulation_steps x processes``) holds whole groups of ``num_generations``, and the
    dataset has at least the prompts one generation batch needs."""
    if config.batch_size is None or config.gradient_accumulation_steps is None:
        raise TrainConfigError(
            "batch_size and gradient_accumulation_steps not set: call apply_hardware_profile(config) first"
        )
    if config.num_generations < 2:
        raise TrainConfigError(f"num_generations must be >= 2, got {config.num_generations}")
    generation_batch = config.batch_size * config.gradient_accumulation_steps * _world_size()
    if generation_batch % config.num_generations:
        raise TrainConfigError(
            f"batch_size x gradient_accumulation_steps ({config.batch_size} x {config.gradient_accumulation_steps}"
            f"{f' x {_world_size()} processes' if _world_size() > 1 else ''} = {generation_batch}) must be a multiple "
            f"of num_generations ({config.num_generations}): TRL fills each generation batch with whole groups"
        )
    needed = generation_batch // config.num_generations
    if n_prompts < needed:
        raise TrainError(
            f"{n_prompts} prompt(s), but one generation batch of {generation_batch} completions needs "
            f"{needed} distinct prompts ({config.num_generations} completions each); give more prompts or "
            "lower batch_size / gradient_accumulation_steps"
        )


def _weights(config: GRPOTrainConfig, funcs: Sequence[Callable[..., Any]]) -> list[float]:
    if config.reward_weights is not None:
        if len(config.reward_weights) != len(funcs):
            raise TrainConfigError(
                f"reward_weights has {len(config.reward_weights)} weights for {len(funcs)} reward functions"
            )
        return list(config.reward_weights)
    return reward_weights(funcs)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def reward_curves(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``reward_steps``, ``reward_curve`` (mean weighted reward per logged step) and
    ``reward_curves`` (``{function name: mean per logged step}``) from a log history; a step
    where a function scored nothing (every completion ``None``) has ``None``."""
    steps: list[int] = []
    curve: list[float | None] = []
    per_function: dict[str, list[float | None]] = {}
    for entry in history:
        if "reward" not in entry:
            continue
        steps.append(int(entry.get("step", len(steps) + 1)))
        curve.append(_number(entry["reward"]))
        for key, value in entry.items():
            if key.startswith("rewards/") and key.endswith("/mean"):
                per_function.setdefault(key[len("rewards/") : -len("/mean")], []).append(_number(value))
    return {"reward_steps": steps, "reward_curve": curve, "reward_curves": per_function}


def train_grpo(
    config: GRPOTrainConfig,
    prompts: Any,
    reward_funcs: Sequence[Callable[..., Any]] | Callable[..., Any],
    *,
    hardware: HardwareProfile | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train a LoRA adapter with online GRPO (``trl.GRPOTrainer``) on ``prompts`` (a Dataset or
    rows with a ``prompt`` column, see :func:`prompt_dataset`) rewarded by ``reward_funcs`` (TRL
    reward functions, e.g. from :func:`~agent_rl_plugin.train.reward_funcs.reward_functions`).

    Fields left ``None`` are filled by
    :func:`~agent_rl_plugin.train.hardware.apply_hardware_profile` (``hardware``: a profile
    already applied). TRL's ``reward_weights`` are ``config.reward_weights``, else each
    function's ``reward_weight``. The adapter and tokenizer are saved under
    ``config.output_dir/adapter``; ``config.resume_from_checkpoint`` resumes a run saved with
    checkpoints. ``progress`` shows TRL's progress bar (``False``: nothing is printed per step). Raises :class:`TrainError` (no prompt,
    no reward function, too few prompts for a batch) and :class:`TrainConfigError` (batch not a
    multiple of ``num_generations``, wrong number of weights) before loading the model.
    """
    if not isinstance(config, GRPOTrainConfig):
        raise TypeError(f"config must be a GRPOTrainConfig, got {type(config).__name__}")
    funcs = _functions(reward_funcs)
    dataset = prompt_dataset(prompts)
    profile = hardware or apply_hardware_profile(config)
    check_batch(config, len(dataset))
    weights = _weights(config, funcs)
    resume = checkpoint_to_resume(config)

    from trl import GRPOConfig, GRPOTrainer

    started = time.perf_counter()
    model, tokenizer = load_model_and_tokenizer(config.model, config.allow_download)
    args = GRPOConfig(
        **config.trainer_arguments(),
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        top_p=config.top_p,
        beta=config.beta,
        epsilon=config.epsilon,
        epsilon_high=config.epsilon_high,
        loss_type=config.loss_type,
        scale_rewards=config.scale_rewards,
        num_iterations=config.num_iterations,
        mask_truncated_completions=config.mask_truncated_completions,
        reward_weights=weights,
        log_completions=config.log_completions,
        disable_tqdm=not progress,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=list(funcs),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=config.lora_config(),
    )
    if not progress:  # no bar, and no metrics dict printed per step either
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    output = trainer.train(resume_from_checkpoint=resume)
    adapter_path = save_adapter(trainer, config.output_dir)
    metrics, history = summarize_run(trainer, output)
    extra: dict[str, Any] = reward_curves(history)
    extra.update(
        reward_names=list(trainer.reward_func_names),
        reward_weights=weights,
        n_prompts=len(dataset),
        reward_stats={
            f.__name__: f.stats.to_dict() for f in funcs if hasattr(f, "stats") and hasattr(f.stats, "to_dict")
        },
    )
    return TrainResult(
        method="grpo",
        hardware=profile.to_dict(),
        resumed_from=resume,
        output_dir=config.output_dir,
        adapter_path=adapter_path,
        metrics=metrics,
        n_rows=len(dataset),
        global_step=trainer.state.global_step,
        seconds=time.perf_counter() - started,
        log_history=history,
        extra=extra,
    )


__all__ = ["check_batch", "prompt_dataset", "reward_curves", "train_grpo"]
