r"""Offline GRPO / GiGPO: train a LoRA adapter on *logged* completions with precomputed
advantages, as a small extension of ``transformers.Trainer`` (transformers 5.23, TRL 1.16,
PEFT 0.21 at the time of writing).

Why not TRL's ``GRPOTrainer``: it always generates its own completions during training and
cannot take pre-generated ones (TRL issues #3663 and #2680); its experimental ``rollout_func``
replaces generation but still needs exactly ``num_generations`` completions per prompt, and
``_generate_and_score_completions`` is private and changes between releases. Logged agent
rollouts are already generated and scored (GRPO groups from
:func:`agent_rl_plugin.data.build_grpo_dataset`, GiGPO steps from
:func:`agent_rl_plugin.data.build_step_dataset`), so we only need the loss.

What is ours and what is reused:

* :class:`OfflineGRPOTrainer` subclasses ``transformers.Trainer`` and overrides only
  ``compute_loss`` (the loss below) and ``log`` (merges our metrics into the trainer's log).
  Optimiser, scheduler, gradient accumulation, mixed precision, logging, checkpoints, resuming
  and multi-device (accelerate) are the Trainer's. ``loss_is_scaled_for_ga = False``: the
  Trainer divides the loss by the accumulation steps.
* Per-token log-probs use TRL's ``trl.trainer.utils.selective_log_softmax`` and padding its
  ``pad`` (:class:`~agent_rl_plugin.train.offline_data.OfflineCollator`).
* LoRA is PEFT's ``get_peft_model``, or with ``adapter=PATH`` a saved adapter continued
  (``PeftModel.from_pretrained(base, PATH, is_trainable=True)``, :mod:`agent_rl_plugin.train.adapters`);
  the reference model for the KL term is the same model with the adapter disabled
  (``model.disable_adapter()``), as in TRL: the base model, in every round of a loop.
* Tokenisation and masks: :mod:`agent_rl_plugin.train.tokenize`; dataset rows to examples:
  :mod:`agent_rl_plugin.train.offline_data`.

The loss, per trained token :math:`t` (``loss_mask`` 1: the completion's assistant tokens,
end-of-turn token included; tool results only with ``train_tool_tokens``) of row :math:`i`
with advantage :math:`A_i` (one per completion for ``advantage_level='episode'``, one per LLM
call for ``'step'``)::

    logp_t  = log pi_theta(token_t | tokens_<t)                 (policy: base + LoRA)
    old_t   = logged behaviour log-prob if used, else logp_t.detach()
    ratio_t = exp(logp_t - old_t)
    pg_t    = -min(ratio_t * A_i, clip(ratio_t, 1 - epsilon, 1 + epsilon_high) * A_i)
    kl_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1        (k3 estimator; ref: adapter disabled)
    l_t     = pg_t + beta * kl_t                                (the KL term only when beta > 0)

Without behaviour log-probs the ratio is 1 with gradient ``grad logp`` (on-policy, a single
pass), so ``pg_t`` is the REINFORCE term ``-A_i * logp_t`` in value and gradient and nothing is
clipped. With logged behaviour log-probs (``old_logprobs``, used when
``use_behaviour_logprobs`` and their length equals the row's assistant tokens) the ratio
corrects for the policy having moved since the rollouts were logged, and clipping stops
updates that would move it further than ``epsilon`` / ``epsilon_high``.

Normalisation over a micro-batch (:math:`M` the trained tokens, :math:`M_i` those of row
:math:`i`, :math:`R` the rows with trained tokens):

* ``loss_normalization='token'`` (DAPO): ``loss = sum_{t in M} l_t / |M|``;
* ``'sequence'`` (GRPO): ``loss = mean_{i in R} ( sum_{t in M_i} l_t / |M_i| )``.

With gradient accumulation the Trainer averages the micro-batch losses; on several devices
each normalises its own micro-batch and gradients are averaged.

Logged metrics (per logging step, averaged over its micro-batches; from the main process):
``loss`` (the Trainer's), ``policy_loss`` (the normalised ``pg`` part), ``kl`` (mean ``kl_t``
over trained tokens; only when ``beta > 0``), ``clip_ratio`` (share of trained tokens whose
clipped term was taken: ``ratio < 1 - epsilon`` with ``A < 0`` or ``ratio > 1 + epsilon_high``
with ``A > 0``), ``ratio_mean``, ``behaviour_share`` (share of trained tokens whose ``old`` is a
logged log-prob), ``advantage_mean`` (mean advantage of the rows), ``logp/positive`` and
``logp/negative`` (mean ``logp_t`` over trained tokens of positive / negative-advantage rows,
when there are any), ``trained_tokens`` (trained tokens per optimizer step).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections import defaultdict
from typing import Any, Sequence

from agent_rl_plugin.train.adapters import adopt_adapter_settings, prepare_policy, read_adapter
from agent_rl_plugin.train.common import (
    TrainError,
    TrainResult,
    checkpoint_to_resume,
    load_model_and_tokenizer,
    save_adapter,
    summarize_run,
)
from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.grpo_config import OfflineGRPOTrainConfig
from agent_rl_plugin.train.hardware import HardwareProfile, apply_hardware_profile
from agent_rl_plugin.train.offline_data import OfflineCollator, build_examples, check_offline_dataset
from agent_rl_plugin.train.tokenize import tokenize_completion

#: Metric names this trainer adds to the Trainer's log.
METRICS = (
    "policy_loss",
    "kl",
    "clip_ratio",
    "ratio_mean",
    "behaviour_share",
    "advantage_mean",
    "logp/positive",
    "logp/negative",
    "trained_tokens",
)


def token_logprobs(model: Any, input_ids: Any, attention_mask: Any) -> Any:
    """Log-probs ``(batch, length - 1)`` of ``input_ids[:, 1:]`` under ``model`` (float32),
    through TRL's ``selective_log_softmax``."""
    from trl.trainer.utils import selective_log_softmax

    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    return selective_log_softmax(logits[:, :-1, :], input_ids[:, 1:]).float()


@functools.cache
def _trainer_class():
    from transformers import Trainer

    class OfflineGRPOTrainer(Trainer):
        """``transformers.Trainer`` with the clipped policy-gradient loss of the module doc.
        Batches come from :class:`~agent_rl_plugin.train.offline_data.OfflineCollator`."""

        loss_is_scaled_for_ga = False

        def __init__(
            self,
            *args: Any,
            epsilon: float = 0.2,
            epsilon_high: float | None = None,
            beta: float = 0.0,
            loss_normalization: str = "token",
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.epsilon_low = float(epsilon)
            self.epsilon_high = float(epsilon if epsilon_high is None else epsilon_high)
            self.beta = float(beta)
            self.loss_normalization = loss_normalization
            self._metrics: dict[str, list[float]] = defaultdict(list)
            self._window_tokens = 0.0
            self._window_batches = 0

        def _reference_logprobs(self, model: Any, inputs: dict[str, Any]) -> Any:
            import torch

            unwrapped = self.accelerator.unwrap_model(model)
            if not hasattr(unwrapped, "disable_adapter"):
                raise TrainError("beta > 0 needs a PEFT model: the reference is the model with its adapter disabled")
            with torch.no_grad(), unwrapped.disable_adapter():
                return token_logprobs(unwrapped, inputs["input_ids"], inputs["attention_mask"])

        def _normalise(self, per_token: Any, mask: Any) -> Any:
            if self.loss_normalization == "sequence":
                counts = mask.sum(dim=1)
                rows = counts > 0
                per_row = (per_token * mask).sum(dim=1) / counts.clamp(min=1.0)
                return per_row[rows].sum() / rows.sum().clamp(min=1)
            return (per_token * mask).sum() / mask.sum().clamp(min=1.0)

        def compute_loss(
            self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
        ) -> Any:
            import torch

            logp = token_logprobs(model, inputs["input_ids"], inputs["attention_mask"])
            mask = inputs["loss_mask"][:, 1:].to(logp.dtype)
            advantages = inputs["advantages"][:, 1:].to(logp.dtype)
            behaviour = inputs["old_mask"][:, 1:].bool() & mask.bool()
            old = torch.where(behaviour, inputs["old_logprobs"][:, 1:].to(logp.dtype), logp.detach())
            ratio = torch.exp(logp - old)
            clipped = torch.clamp(ratio, 1.0 - self.epsilon_low, 1.0 + self.epsilon_high)
            per_token = -torch.min(ratio * advantages, clipped * advantages)
            policy_loss = self._normalise(per_token, mask)
            kl = None
            if self.beta > 0:
                delta = self._reference_logprobs(model, inputs) - logp
                kl = torch.exp(delta) - delta - 1.0
                per_token = per_token + self.beta * kl
            loss = self._normalise(per_token, mask)
            self._record(logp, mask, advantages, ratio, behaviour, policy_loss, kl)
            return (loss, {"logp": logp}) if return_outputs else loss

        def _record(self, logp, mask, advantages, ratio, behaviour, policy_loss, kl) -> None:
            """Append this micro-batch's metrics (one device-to-host copy)."""
            import torch

            with torch.no_grad():
                trained = mask.bool()
                low = (ratio < 1.0 - self.epsilon_low) & (advantages < 0)
                high = (ratio > 1.0 + self.epsilon_high) & (advantages > 0)
                positive, negative = trained & (advantages > 0), trained & (advantages < 0)
                counts = mask.sum(dim=1)
                rows = counts > 0
                per_row_advantage = (advantages * mask).sum(dim=1) / counts.clamp(min=1.0)
                # name -> (sum, count); a metric with count 0 is not recorded
                parts = {
                    "policy_loss": (policy_loss.detach(), torch.ones_like(policy_loss)),
                    "clip_ratio": (((low | high) & trained).sum(), mask.sum()),
                    "ratio_mean": ((ratio.detach() * mask).sum(), mask.sum()),
                    "behaviour_share": (behaviour.sum(), mask.sum()),
                    "logp/positive": ((logp.detach() * positive).sum(), positive.sum()),
                    "logp/negative": ((logp.detach() * negative).sum(), negative.sum()),
                    # a row's advantage sits on each of its trained tokens
                    "advantage_mean": (per_row_advantage[rows].sum(), rows.sum()),
                }
                if kl is not None:
                    parts["kl"] = ((kl.detach() * mask).sum(), mask.sum())
                names = list(parts)
                numbers = torch.stack(
                    [torch.stack([total.float(), count.float()]) for total, count in parts.values()]
                    + [torch.stack([mask.sum().float(), torch.ones_like(mask.sum()).float()])]
                ).tolist()
            for name, (total, count) in zip(names, numbers):
                if count > 0:
                    self._metrics[name].append(total / count)
            self._window_tokens += numbers[-1][0]
            self._window_batches += 1

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            if "loss" in logs and self._window_batches:
                for key, values in self._metrics.items():
                    logs[key] = sum(values) / len(values)
                # micro-batches -> optimizer steps
                steps = self._window_batches / max(self.args.gradient_accumulation_steps, 1)
                logs["trained_tokens"] = self._window_tokens / steps
                self._metrics.clear()
                self._window_tokens = 0.0
                self._window_batches = 0
            super().log(logs, start_time)

    return OfflineGRPOTrainer


def __getattr__(name: str) -> Any:
    if name == "OfflineGRPOTrainer":  # built on first use: importing this module does not import torch
        cls = _trainer_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def train_offline_grpo(
    config: OfflineGRPOTrainConfig,
    dataset: Any,
    *,
    adapter: str | os.PathLike[str] | None = None,
    hardware: HardwareProfile | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train a LoRA adapter on logged completions with advantages (the loss of the module
    doc) and save it with the tokenizer under ``config.output_dir/adapter``.

    ``dataset``: a ``datasets.Dataset`` (or list of dicts) of GRPO group rows (``prompt``,
    ``completions``, ``advantages``) or per-completion / GiGPO step rows (``prompt``,
    ``completion``, ``advantage``[, ``old_logprobs``]); see
    :mod:`agent_rl_plugin.train.offline_data`. ``advantage_level='step'`` needs per-completion
    rows. Fields left ``None`` are filled by
    :func:`~agent_rl_plugin.train.hardware.apply_hardware_profile` (``hardware``: a profile
    already applied); ``config.resume_from_checkpoint`` resumes a run saved with checkpoints.

    ``adapter``: a LoRA adapter directory saved on the same base model (``adapter_path`` of an
    earlier result) to continue training instead of starting a fresh adapter; its rank and alpha
    are used (``lora_r`` / ``lora_alpha``, when set, must match), the KL reference stays the base
    model, and the adapter saved under ``output_dir/adapter`` has the same shape, so the next
    round can continue it. ``extra["continued_from"]`` is the path (``None`` for a fresh one).

    Returns a :class:`TrainResult` with ``method`` ``"offline_grpo"`` (episode level) or
    ``"gigpo"`` (step level), ``n_rows`` the examples trained on, ``n_desirable`` /
    ``n_undesirable`` the positive / negative-advantage examples, and in ``extra`` the
    counts of :func:`~agent_rl_plugin.train.offline_data.build_examples` plus ``format`` and
    ``advantage_level``. Raises :class:`TrainError` for data that cannot be trained on (wrong
    columns, empty, every advantage 0) and :class:`TrainConfigError` for a bad checkpoint or an
    adapter that is missing, not LoRA, of another rank or for another base model.
    """
    if not isinstance(config, OfflineGRPOTrainConfig):
        raise TypeError(f"config must be an OfflineGRPOTrainConfig, got {type(config).__name__}")
    check_offline_dataset(dataset, config.advantage_level)
    saved = read_adapter(adapter) if adapter is not None else None
    rank_set_by_user = config.lora_r is not None if hardware is None else "lora_r" in hardware.overridden
    profile = hardware or apply_hardware_profile(config)
    if saved is not None:
        adopt_adapter_settings(config, saved, rank_set_by_user=rank_set_by_user)
        profile = dataclasses.replace(profile, lora_r=saved.r)
    resume = checkpoint_to_resume(config)

    from transformers import TrainingArguments, set_seed

    started = time.perf_counter()
    model, tokenizer = load_model_and_tokenizer(config.model)
    built = build_examples(
        dataset,
        tokenizer,
        max_length=config.max_length,
        train_tool_tokens=config.train_tool_tokens,
        use_behaviour_logprobs=config.use_behaviour_logprobs,
    )
    if tokenizer.pad_token_id is None:
        raise TrainConfigError("the tokenizer has neither a pad token nor an end-of-sequence token to pad with")
    set_seed(config.seed)
    model = prepare_policy(model, config, saved)
    args = TrainingArguments(
        **config.trainer_arguments(),
        remove_unused_columns=False,
        label_names=[],
        disable_tqdm=not progress,
    )
    trainer = _trainer_class()(
        model=model,
        args=args,
        train_dataset=built.examples,
        data_collator=OfflineCollator(tokenizer.pad_token_id),
        processing_class=tokenizer,
        epsilon=config.epsilon,
        epsilon_high=config.epsilon_high,
        beta=config.beta,
        loss_normalization=config.loss_normalization,
    )
    output = trainer.train(resume_from_checkpoint=resume)
    adapter_path = save_adapter(trainer, config.output_dir)
    metrics, history = summarize_run(trainer, output)
    stats: dict[str, Any] = dict(built.stats)  # counts, plus the "logprobs" measurements
    if config.measure_examples:
        stats["logprobs"] = measure_logprobs(trainer.model, built.examples, config.measure_examples)
    return TrainResult(
        method="gigpo" if config.advantage_level == "step" else "offline_grpo",
        hardware=profile.to_dict(),
        resumed_from=resume,
        output_dir=config.output_dir,
        adapter_path=adapter_path,
        metrics=metrics,
        n_rows=stats["examples"],
        n_desirable=stats["positive"],
        n_undesirable=stats["negative"],
        global_step=trainer.state.global_step,
        seconds=time.perf_counter() - started,
        log_history=history,
        extra={
            "format": built.format,
            "advantage_level": config.advantage_level,
            "continued_from": saved.path if saved else None,
            **stats,
        },
    )


def measure_logprobs(model: Any, examples: Sequence[dict[str, list]], limit: int) -> dict[str, dict[str, float]]:
    """Mean log-prob per trained token of the positive- and of the negative-advantage examples
    (the first ``limit`` of each sign), under the base (adapter disabled) and the trained
    policy: ``{"base": {"positive": .., "negative": ..}, "trained": {...}}`` (a sign with no
    example is left out). Offline GRPO/GiGPO should raise ``positive`` and lower ``negative``."""
    import torch

    picked: dict[str, list[dict[str, list]]] = {"positive": [], "negative": []}
    for example in examples:
        advantage = next((a for a, m in zip(example["advantages"], example["loss_mask"]) if m), 0.0)
        sign = "positive" if advantage > 0 else "negative" if advantage < 0 else None
        if sign and len(picked[sign]) < limit:
            picked[sign].append(example)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()

    def mean_logp(rows: list[dict[str, list]]) -> float:
        total, count = 0.0, 0
        for row in rows:
            ids = torch.tensor([row["input_ids"]], device=device)
            logp = token_logprobs(model, ids, torch.ones_like(ids))[0].float()
            mask = torch.tensor(row["loss_mask"][1:], device=device, dtype=logp.dtype)
            total += float((logp * mask).sum())
            count += int(mask.sum())
        return total / max(count, 1)

    result: dict[str, dict[str, float]] = {"base": {}, "trained": {}}
    try:
        with torch.no_grad():
            for sign, rows in picked.items():
                if not rows:
                    continue
                result["trained"][sign] = mean_logp(rows)
                with model.disable_adapter():
                    result["base"][sign] = mean_logp(rows)
    finally:
        model.train(was_training)
    return result


def completion_logprob(
    model: Any,
    tokenizer: Any,
    prompt: str | Sequence[dict],
    completion: str | Sequence[dict],
    *,
    train_tool_tokens: bool = False,
    max_length: int | None = None,
    mean: bool = False,
) -> float:
    """Sum (``mean=True``: mean) of the log-probs of the tokens of ``completion`` that offline
    GRPO trains (same tokenisation and mask), under ``model`` as it is (with its adapter, if
    any; wrap in ``model.disable_adapter()`` for the base). For evaluation and tests."""
    import torch

    tokens = tokenize_completion(
        tokenizer, prompt, completion, max_length=max_length, train_tool_tokens=train_tool_tokens
    )
    if tokens.n_trained == 0:
        raise TrainError("the completion has no token to score")
    device = next(model.parameters()).device
    ids = torch.tensor([tokens.input_ids], device=device)
    with torch.no_grad():
        logp = token_logprobs(model, ids, torch.ones_like(ids))[0]
    mask = torch.tensor(tokens.loss_mask[1:], device=device, dtype=logp.dtype)
    total = float((logp * mask).sum())
    return total / float(mask.sum()) if mean else total


__all__ = [  # noqa: F822 - OfflineGRPOTrainer comes from the module __getattr__ (built on first use)
    "METRICS",
    "OfflineGRPOTrainer",
    "completion_logprob",
    "measure_logprobs",
    "token_logprobs",
    "train_offline_grpo",
]
