"""KTO with LoRA on logged rollouts: :func:`train_kto` wraps ``trl.KTOTrainer`` and
``peft.LoraConfig`` (no training loop of our own), and :func:`implicit_reward_accuracy` evaluates
a trained adapter on held-out (prompt, desirable, undesirable) pairs.

The reference model is the base model with the adapter disabled (TRL does this when it is given
a fresh ``peft_config``), so before training (LoRA ``B`` initialised to zero) policy and reference
agree and every pair is a tie.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable, Mapping, Sequence

from agent_rl_plugin.train.common import (
    TrainError,
    TrainResult,
    checkpoint_to_resume,
    load_model_and_tokenizer,
    save_adapter,
    summarize_run,
)
from agent_rl_plugin.train.config import KTOTrainConfig, TrainConfigError
from agent_rl_plugin.train.hardware import HardwareProfile, apply_hardware_profile


def _label_counts(dataset) -> tuple[int, int]:
    if "label" not in dataset.column_names:
        raise TrainError(f"the KTO dataset needs a 'label' column; it has {dataset.column_names}")
    for column in ("prompt", "completion"):
        if column not in dataset.column_names:
            raise TrainError(f"the KTO dataset needs a {column!r} column; it has {dataset.column_names}")
    labels = [bool(x) for x in dataset["label"]]
    n_desirable = sum(labels)
    return n_desirable, len(labels) - n_desirable


def check_kto_dataset(dataset) -> tuple[int, int]:
    """``(n_desirable, n_undesirable)``; raises :class:`TrainError` unless both are > 0."""
    n_desirable, n_undesirable = _label_counts(dataset)
    if n_desirable == 0 or n_undesirable == 0:
        raise TrainError(
            f"KTO needs both desirable and undesirable examples: {n_desirable} desirable, "
            f"{n_undesirable} undesirable; change the label rule (quantile or group)"
        )
    return n_desirable, n_undesirable


def load_kto_trainer() -> tuple[Any, Any]:
    """``(trl.KTOConfig, trl.KTOTrainer)``: importing them loads the training stack (torch,
    transformers, PEFT); :func:`~agent_rl_plugin.train.runs.run_kto` does it before the
    collector is turned back on (see :mod:`agent_rl_plugin.train.heap`)."""
    from trl import KTOConfig, KTOTrainer

    return KTOConfig, KTOTrainer


def train_kto(
    config: KTOTrainConfig, dataset, *, hardware: HardwareProfile | None = None, progress: bool = True
) -> TrainResult:
    """Train a LoRA adapter on ``dataset`` (``prompt``, ``completion``, ``label`` rows, plain or
    conversational, e.g. from :func:`agent_rl_plugin.data.build_kto_dataset`) with
    ``trl.KTOTrainer``; the adapter (and tokenizer) are saved with ``trainer.save_model`` under
    ``config.output_dir/adapter``. Fields left ``None`` are filled by
    :func:`~agent_rl_plugin.train.hardware.apply_hardware_profile` (``hardware``: a profile
    already applied). ``config.resume_from_checkpoint`` resumes a run saved with checkpoints."""
    if not isinstance(config, KTOTrainConfig):
        raise TypeError(f"config must be a KTOTrainConfig, got {type(config).__name__}")
    profile = hardware or apply_hardware_profile(config)
    if config.batch_size is None:  # hardware= given, but the profile was not applied to this config
        raise TrainConfigError("batch_size not set: call apply_hardware_profile(config) first")
    if config.batch_size <= 1:  # a config mutated after construction
        raise TrainConfigError(
            f"batch_size must be > 1 for KTO (got {config.batch_size}): KTO estimates its KL term by "
            "pairing completions within a batch; use 2 or more"
        )
    n_desirable, n_undesirable = check_kto_dataset(dataset)
    if len(dataset) < config.batch_size:
        raise TrainError(
            f"the dataset has {len(dataset)} rows, fewer than batch_size={config.batch_size}; "
            "lower batch_size or log more rollouts"
        )
    desirable_weight, undesirable_weight = config.weights_for(n_desirable, n_undesirable)

    KTOConfig, KTOTrainer = load_kto_trainer()
    started = time.perf_counter()
    resume = checkpoint_to_resume(config)
    model, tokenizer = load_model_and_tokenizer(config.model, config.allow_download)
    args = KTOConfig(
        **config.trainer_arguments(),
        beta=config.beta,
        desirable_weight=desirable_weight,
        undesirable_weight=undesirable_weight,
        max_length=config.max_length,
        disable_tqdm=not progress,
    )
    trainer = KTOTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=config.lora_config(),
    )
    output = trainer.train(resume_from_checkpoint=resume)
    adapter_path = save_adapter(trainer, config.output_dir)
    metrics, history = summarize_run(trainer, output)
    return TrainResult(
        method="kto",
        hardware=profile.to_dict(),
        resumed_from=resume,
        output_dir=config.output_dir,
        adapter_path=adapter_path,
        metrics=metrics,
        n_rows=len(dataset),
        n_desirable=n_desirable,
        n_undesirable=n_undesirable,
        desirable_weight=desirable_weight,
        undesirable_weight=undesirable_weight,
        global_step=trainer.state.global_step,
        seconds=time.perf_counter() - started,
        log_history=history,
    )


# ---------------------------------------------------------------------------------------------
# evaluation


def _pair_fields(pair) -> tuple[Any, Any, Any]:
    if isinstance(pair, Mapping):
        prompt = pair["prompt"]
        good = pair.get("desirable", pair.get("chosen"))
        bad = pair.get("undesirable", pair.get("rejected"))
        if good is None or bad is None:
            raise TrainError("a pair needs 'desirable'/'undesirable' (or 'chosen'/'rejected') completions")
        return prompt, good, bad
    prompt, good, bad = pair
    return prompt, good, bad


def _completion_ids(tokenizer, prompt, completion) -> tuple[list[int], list[int]]:
    """Token ids of the prompt and of prompt + completion (conversational or plain text)."""
    if isinstance(prompt, list):
        completion = completion if isinstance(completion, list) else [{"role": "assistant", "content": completion}]
        prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        full = tokenizer.apply_chat_template(prompt + completion, tokenize=False)
        prompt_ids = tokenizer(prompt_ids, add_special_tokens=False)["input_ids"]
        full_ids = tokenizer(full, add_special_tokens=False)["input_ids"]
    else:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        full_ids = prompt_ids + tokenizer(completion, add_special_tokens=False)["input_ids"]
    if full_ids[: len(prompt_ids)] != prompt_ids or len(full_ids) <= len(prompt_ids):
        raise TrainError("the completion's tokens do not extend the prompt's tokens")
    return prompt_ids, full_ids


def _sequence_logp(model, prompt_ids: list[int], full_ids: list[int]) -> float:
    import torch

    device = next(model.parameters()).device
    ids = torch.tensor([full_ids], device=device)
    logits = model(input_ids=ids).logits[0, :-1].float()
    logps = torch.log_softmax(logits, dim=-1)
    targets = ids[0, 1:]
    token_logps = logps.gather(-1, targets[:, None])[:, 0]
    return float(token_logps[len(prompt_ids) - 1 :].sum())


def implicit_reward_accuracy(
    model_path_or_model,
    adapter_path: str | os.PathLike | None,
    dataset_pairs: Iterable[Mapping[str, Any] | Sequence[Any]],
    *,
    tokenizer=None,
    tie_tolerance: float = 1e-6,
) -> float:
    """Share of held-out pairs whose implicit reward ``log p_policy(c|p) - log p_ref(c|p)`` is
    higher for the desirable completion than for the undesirable one; ties count 0.5.

    ``model_path_or_model``: a base model path/name or model object (a ``PeftModel`` is used as
    is); ``adapter_path``: the LoRA adapter to load on top (``None``: the model as given, so
    without an adapter policy == reference and the result is 0.5). The reference is the same
    model with its adapter disabled. Pairs are mappings with ``prompt`` and ``desirable`` /
    ``undesirable`` (or ``chosen``/``rejected``) or ``(prompt, desirable, undesirable)`` tuples;
    prompts and completions are text or chat messages.
    """
    import torch

    from agent_rl_plugin.train.loading import load_causal_lm, load_tokenizer

    model: Any  # a transformers model, or a PeftModel wrapping one
    if isinstance(model_path_or_model, (str, os.PathLike)):
        model = load_causal_lm(model_path_or_model)
        if tokenizer is None:
            tokenizer = load_tokenizer(model_path_or_model, pad=False)
    else:
        model = model_path_or_model
    if tokenizer is None:
        source = adapter_path if adapter_path is not None else getattr(model, "name_or_path", None)
        if not source:
            raise TrainError("pass tokenizer= when giving a model object without a path")
        tokenizer = load_tokenizer(source, pad=False)
    if adapter_path is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, os.fspath(adapter_path))
    has_adapter = hasattr(model, "disable_adapter")
    was_training = model.training
    model.eval()
    pairs = list(dataset_pairs)
    if not pairs:
        raise TrainError("implicit_reward_accuracy needs at least one pair")
    score = 0.0
    try:
        with torch.no_grad():
            for pair in pairs:
                prompt, good, bad = _pair_fields(pair)
                rewards = []
                for completion in (good, bad):
                    prompt_ids, full_ids = _completion_ids(tokenizer, prompt, completion)
                    policy = _sequence_logp(model, prompt_ids, full_ids)
                    if has_adapter:
                        with model.disable_adapter():
                            reference = _sequence_logp(model, prompt_ids, full_ids)
                    else:
                        reference = policy
                    rewards.append(policy - reference)
                margin = rewards[0] - rewards[1]
                score += 0.5 if abs(margin) <= tie_tolerance else float(margin > 0)
    finally:
        model.train(was_training)
    return score / len(pairs)


__all__ = [
    "TrainError",
    "TrainResult",
    "check_kto_dataset",
    "implicit_reward_accuracy",
    "load_kto_trainer",
    "train_kto",
]
