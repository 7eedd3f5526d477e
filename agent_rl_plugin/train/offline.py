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
* Per-token log-probs use TRL's ``trl.trainer.utils.selective_log_softmax`` (full vocabulary;
  constrained ones and entropies: :mod:`agent_rl_plugin.train.offline_logprobs`) and padding its
  ``pad`` (:class:`~agent_rl_plugin.train.offline_data.OfflineCollator`).
* LoRA is PEFT's ``get_peft_model``, or with ``adapter=PATH`` a saved adapter continued
  (``PeftModel.from_pretrained(base, PATH, is_trainable=True)``, :mod:`agent_rl_plugin.train.adapters`);
  the reference model for the KL term is the same model with the adapter disabled
  (``model.disable_adapter()``), as in TRL: the base model, in every round of a loop.
* Tokenisation and masks: :mod:`agent_rl_plugin.train.tokenize`; dataset rows to examples:
  :mod:`agent_rl_plugin.train.offline_data`. Rows with stored token ids (``completion_token_ids``
  and optionally ``prompt_token_ids``, recorded by the serving engine) are trained on exactly
  those ids instead of re-tokenised text (``token_ids='auto'``;
  :mod:`agent_rl_plugin.train.stored_tokens`), so logged ``old_logprobs`` align 1:1 with them.

The loss, per trained token :math:`t` (``loss_mask`` 1: the completion's assistant tokens,
end-of-turn token included; tool results only with ``train_tool_tokens``; with ``choices``
only the answer's unforced tokens, see below) of row :math:`i` with advantage :math:`A_i` (one
per completion for ``advantage_level='episode'``, one per LLM call for ``'step'``)::

    logp_t  = log pi_theta(token_t | tokens_<t)                 (policy: base + LoRA)
    old_t   = logged behaviour log-prob if used, else logp_t.detach()
    ratio_t = exp(clamp(logp_t - old_t, -20, 20))                 (LOG_RATIO_BOUND)
    pg_t    = -min(ratio_t * A_i, clip(ratio_t, 1 - epsilon, 1 + epsilon_high) * A_i)
    pg_t    = min(pg_t, -dual_clip * A_i)      when A_i < 0 and dual_clip is set (default 3)
    kl_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1        (k3 estimator; ref: adapter disabled)
    H_t     = entropy of pi_theta(. | tokens_<t)                (only computed when used)
    l_t     = pg_t + beta * kl_t - entropy_coef * H_t           (each term only when its coefficient > 0)

**Choice sets** (``choices``, :class:`~agent_rl_plugin.train.choices.ChoiceSet`): every
completion's assistant tokens must be one choice and the end-of-turn token (others are dropped
and counted in ``not_a_choice``). Log-probs are then the *constrained* ones,
``logp_t = logit[token_t] - logsumexp(logits[allowed_t])`` over the tokens ``allowed_t``
allowed at that position (the same numbers as :func:`~agent_rl_plugin.train.choices.masked_logprob`;
:mod:`agent_rl_plugin.train.offline_logprobs`), for the policy, the behaviour log-probs it is
compared with and the KL reference alike, and ``H_t`` is the entropy over ``allowed_t``.
**Forced** positions (one allowed token, e.g. the end-of-turn token after a complete choice)
have log-prob 0 and ``loss_mask`` 0: they are never trained. Logged ``old_logprobs`` hold one
value per assistant token in the same constrained form (0.0 on forced tokens), so the rule below
(length equal to the assistant tokens) is unchanged. Without ``choices``, ``H_t`` is over the
vocabulary, computed at the trained positions only and only when ``entropy_coef > 0``.

Without behaviour log-probs the ratio is 1 with gradient ``grad logp`` (on-policy, a single
pass), so ``pg_t`` is the REINFORCE term ``-A_i * logp_t`` in value and gradient and nothing is
clipped. With logged behaviour log-probs (``old_logprobs``, used when
``use_behaviour_logprobs`` and their length equals the row's assistant tokens) the ratio
corrects for the policy having moved since the rollouts were logged, and clipping stops
updates that would move it further than ``epsilon`` / ``epsilon_high``.

**Guards against extreme numbers.** A logged behaviour log-prob outside ``[-100, 0]`` (vLLM
writes ``-inf`` as ``-9999.0``) is not used: that token is trained on-policy and counted in
``old_logprobs_unusable_tokens`` (:mod:`agent_rl_plugin.train.offline_data`). The log-ratio is
clamped to ``[-20, 20]`` before ``exp`` so the ratio stays finite, and dual clipping (Ye et al.
2020, ``dual_clip`` c > 1) bounds a negative-advantage token's term by ``-c * A_i`` (PPO's
``min`` alone leaves it unbounded as the ratio grows). A micro-batch whose loss is still not
finite is skipped (no gradient, a warning, counted in ``nonfinite_losses_skipped``), and after
training any NaN or inf trainable parameter raises :class:`TrainError` before the adapter is
saved: a run never silently produces NaN weights.

**Early stop** (``target_kl``): over the trained tokens that have a behaviour log-prob,
``approx_kl = mean((ratio_t - 1) - log ratio_t)``, measured in the forward passes of each
optimizer step (the policy as it was when the step began; averaged over gradient-accumulation
micro-batches and devices). After a step whose ``approx_kl`` exceeds ``target_kl`` training
stops (a ``TrainerCallback`` sets ``control.should_training_stop``) and
``TrainResult.extra["stopped_early"]`` is ``{"step": n, "approx_kl": x}`` (``None`` when it did
not stop early). Without behaviour log-probs there is nothing to measure and it never stops.

Normalisation over a micro-batch (:math:`M` the trained tokens, :math:`M_i` those of row
:math:`i`, :math:`R` the rows with trained tokens):

* ``loss_normalization='token'`` (DAPO): ``loss = sum_{t in M} l_t / |M|``;
* ``'sequence'`` (GRPO): ``loss = mean_{i in R} ( sum_{t in M_i} l_t / |M_i| )``.

With gradient accumulation the Trainer averages the micro-batch losses; on several devices
each normalises its own micro-batch and gradients are averaged. Rows with advantage 0 are
left out unless ``skip_zero_advantage=False`` (then they add tokens to ``M`` and their KL and
entropy terms, but no policy gradient).

Logged metrics (per logging step, averaged over its micro-batches; from the main process):
``loss`` (the Trainer's), ``policy_loss`` (the normalised ``pg`` part), ``kl`` (mean ``kl_t``
over trained tokens; only when ``beta > 0``), ``clip_ratio`` (share of trained tokens whose
clipped term was taken: ``ratio < 1 - epsilon`` with ``A < 0`` or ``ratio > 1 + epsilon_high``
with ``A > 0``), ``ratio_mean``, ``behaviour_share`` (share of trained tokens whose ``old`` is a
logged log-prob), ``advantage_mean`` (mean advantage of the rows), ``logp/positive`` and
``logp/negative`` (mean ``logp_t`` over trained tokens of positive / negative-advantage rows,
when there are any), ``trained_tokens`` (trained tokens per optimizer step); and, when computed
(:data:`CONTROL_METRICS`), ``entropy`` (mean ``H_t`` over trained tokens; with ``choices`` or
``entropy_coef > 0``), ``approx_kl`` (when behaviour log-probs are used) and
``dual_clip_ratio`` (share of trained tokens whose term the dual clip bounded; with ``dual_clip``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from agent_rl_plugin.train.adapters import adopt_adapter_settings, prepare_policy, read_adapter
from agent_rl_plugin.train.choices import ChoiceSet
from agent_rl_plugin.train.common import (
    TrainError,
    TrainResult,
    check_finite_weights,
    checkpoint_to_resume,
    load_model_and_tokenizer,
    save_adapter,
    summarize_run,
)
from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.grpo_config import OfflineGRPOTrainConfig
from agent_rl_plugin.train.hardware import HardwareProfile, apply_hardware_profile
from agent_rl_plugin.train.offline_data import ALLOWED_KEY, OfflineCollator, build_examples, check_offline_dataset
from agent_rl_plugin.train.offline_logprobs import (
    behaviour_logprobs,
    completion_logprob,
    entropy_from_logits,
    logprobs_from_logits,
    measure_logprobs,
    shifted_logits,
    token_logprobs,
)

logger = logging.getLogger(__name__)

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
#: Counts of where examples' tokens came from, copied into ``TrainResult.metrics``.
TOKEN_SOURCE_COUNTS = ("examples_with_stored_token_ids", "examples_retokenised", "stored_token_ids_rejected")
#: Counts of what the loss guards did (see the module doc), also copied into ``TrainResult.metrics``.
SAFETY_COUNTS = ("old_logprobs_unusable_tokens", "nonfinite_losses_skipped")
#: Metrics logged only when computed: ``entropy`` (with ``entropy_coef > 0`` or a choice set),
#: ``approx_kl`` (when logged behaviour log-probs are used) and ``dual_clip_ratio`` (with ``dual_clip``).
CONTROL_METRICS = ("entropy", "approx_kl", "dual_clip_ratio")
#: ``logp - old`` is clamped to ``[-LOG_RATIO_BOUND, LOG_RATIO_BOUND]`` before ``exp`` (see the module doc).
LOG_RATIO_BOUND = 20.0
#: Default dual-clip constant ``c`` for negative advantages (``OfflineGRPOTrainConfig.dual_clip``).
DUAL_CLIP = 3.0


def _approx_kl_stop_callback(trainer: Any, target_kl: float) -> Any:
    """A ``TrainerCallback`` that stops training after an optimizer step whose mean
    ``approx_kl`` exceeds ``target_kl`` and records it in ``trainer.stopped_early``."""
    from transformers import TrainerCallback

    class ApproxKLStop(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            approx_kl = trainer.take_step_approx_kl()
            if approx_kl is not None and approx_kl > target_kl:
                control.should_training_stop = True
                trainer.stopped_early = {"step": state.global_step, "approx_kl": approx_kl}
            return control

    return ApproxKLStop()


@functools.cache
def _trainer_class():
    from transformers import Trainer

    class OfflineGRPOTrainer(Trainer):
        """``transformers.Trainer`` with the clipped policy-gradient loss of the module doc.
        Batches come from :class:`~agent_rl_plugin.train.offline_data.OfflineCollator`.
        ``target_kl``: stop after an optimizer step whose mean ``approx_kl`` exceeds it
        (``stopped_early`` then holds ``{"step", "approx_kl"}``, else ``None``)."""

        loss_is_scaled_for_ga = False

        def __init__(
            self,
            *args: Any,
            epsilon: float = 0.2,
            epsilon_high: float | None = None,
            beta: float = 0.0,
            loss_normalization: str = "token",
            entropy_coef: float = 0.0,
            target_kl: float | None = None,
            dual_clip: float | None = DUAL_CLIP,
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.epsilon_low = float(epsilon)
            self.epsilon_high = float(epsilon if epsilon_high is None else epsilon_high)
            self.beta = float(beta)
            self.loss_normalization = loss_normalization
            self.entropy_coef = float(entropy_coef)
            self.dual_clip = None if dual_clip is None else float(dual_clip)
            self.nonfinite_losses = 0  # micro-batches skipped for a non-finite loss
            self.stopped_early: dict[str, float] | None = None
            self._metrics: dict[str, list[float]] = defaultdict(list)
            self._window_tokens = 0.0
            self._window_batches = 0
            self._step_kl = [0.0, 0.0]  # approx_kl (sum, count) of the current optimizer step
            if target_kl is not None:
                self.add_callback(_approx_kl_stop_callback(self, float(target_kl)))

        def train(self, *args: Any, **kwargs: Any) -> Any:
            # A fresh trainer's accelerator holds nothing to free, yet the training loop starts with
            # accelerator.free_memory(), a full gc.collect() (0.25 s in a process with torch and
            # transformers loaded). On CPU there is no device cache behind it: skip it there.
            accelerator = self.accelerator
            if self.args.device.type != "cpu" or "free_memory" in vars(accelerator):
                return super().train(*args, **kwargs)
            release = accelerator.free_memory
            accelerator.free_memory = lambda *objects: release(*objects) if objects else []
            try:
                return super().train(*args, **kwargs)
            finally:
                del accelerator.free_memory

        def take_step_approx_kl(self) -> float | None:
            """Mean ``approx_kl`` of the optimizer step just taken (over every process), then
            reset; ``None`` when no token of the step had a behaviour log-prob."""
            total, count = self._step_kl
            self._step_kl = [0.0, 0.0]
            if self.accelerator.num_processes > 1:
                import torch

                summed = self.accelerator.reduce(
                    torch.tensor([total, count], device=self.accelerator.device), reduction="sum"
                )
                total, count = summed.tolist()
            return total / count if count > 0 else None

        def _logprobs(self, model: Any, inputs: dict[str, Any], entropy_mask: Any = None) -> tuple[Any, Any]:
            """``(logp, entropy)`` ``(batch, length - 1)``; entropy only with ``entropy_mask``."""
            allowed = inputs.get(ALLOWED_KEY)
            allowed = None if allowed is None else allowed[:, 1:]
            logits = shifted_logits(model, inputs["input_ids"], inputs["attention_mask"])
            logp = logprobs_from_logits(logits, inputs["input_ids"][:, 1:], allowed)
            entropy = None if entropy_mask is None else entropy_from_logits(logits, allowed, entropy_mask)
            return logp, entropy

        def _reference_logprobs(self, model: Any, inputs: dict[str, Any]) -> Any:
            import torch

            unwrapped = self.accelerator.unwrap_model(model)
            if not hasattr(unwrapped, "disable_adapter"):
                raise TrainError("beta > 0 needs a PEFT model: the reference is the model with its adapter disabled")
            with torch.no_grad(), unwrapped.disable_adapter():
                return self._logprobs(unwrapped, inputs)[0]

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

            loss_mask = inputs["loss_mask"][:, 1:]
            # entropy over a choice set costs K values a position: always; over the vocabulary only when used
            wants_entropy = self.entropy_coef > 0 or ALLOWED_KEY in inputs
            logp, entropy = self._logprobs(model, inputs, loss_mask if wants_entropy else None)
            mask = loss_mask.to(logp.dtype)
            advantages = inputs["advantages"][:, 1:].to(logp.dtype)
            behaviour = inputs["old_mask"][:, 1:].bool() & mask.bool()
            old = torch.where(behaviour, inputs["old_logprobs"][:, 1:].to(logp.dtype), logp.detach())
            ratio = torch.exp(torch.clamp(logp - old, -LOG_RATIO_BOUND, LOG_RATIO_BOUND))
            clipped = torch.clamp(ratio, 1.0 - self.epsilon_low, 1.0 + self.epsilon_high)
            objective = torch.min(ratio * advantages, clipped * advantages)
            if self.dual_clip is not None:  # A < 0: the term is at most -dual_clip * A
                objective = torch.where(advantages < 0, torch.max(objective, self.dual_clip * advantages), objective)
            per_token = -objective
            policy_loss = self._normalise(per_token, mask)
            kl = None
            if self.beta > 0:
                delta = self._reference_logprobs(model, inputs) - logp
                kl = torch.exp(delta) - delta - 1.0
                per_token = per_token + self.beta * kl
            if self.entropy_coef > 0:
                per_token = per_token - self.entropy_coef * entropy
            loss = self._normalise(per_token, mask)
            if not bool(torch.isfinite(loss)):  # skip the micro-batch: no gradient rather than NaN weights
                self.nonfinite_losses += 1
                logger.warning("non-finite loss (%s) in a micro-batch: skipped (no gradient from it)", loss.item())
                loss = (logp * 0.0).sum()
            else:
                self._record(logp, old, mask, advantages, ratio, behaviour, policy_loss, kl, entropy)
            return (loss, {"logp": logp}) if return_outputs else loss

        def _record(self, logp, old, mask, advantages, ratio, behaviour, policy_loss, kl, entropy) -> None:
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
                log_ratio = (logp - old).detach()
                approx_kl = torch.where(behaviour, torch.expm1(log_ratio) - log_ratio, torch.zeros_like(log_ratio))
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
                    "approx_kl": (approx_kl.sum(), behaviour.sum()),
                }
                if self.dual_clip is not None:
                    dual = trained & (advantages < 0) & (ratio > self.dual_clip)
                    parts["dual_clip_ratio"] = (dual.sum(), mask.sum())
                if kl is not None:
                    parts["kl"] = ((kl.detach() * mask).sum(), mask.sum())
                if entropy is not None:
                    parts["entropy"] = ((entropy.detach() * mask).sum(), mask.sum())
                names = list(parts)
                numbers = torch.stack(
                    [torch.stack([total.float(), count.float()]) for total, count in parts.values()]
                    + [torch.stack([mask.sum().float(), torch.ones_like(mask.sum()).float()])]
                ).tolist()
            for name, (total, count) in zip(names, numbers):
                if count > 0:
                    self._metrics[name].append(total / count)
            kl_total, kl_count = numbers[names.index("approx_kl")]
            self._step_kl[0] += kl_total
            self._step_kl[1] += kl_count
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


def _write_model_card(config: OfflineGRPOTrainConfig, method: str) -> None:
    """A short model card (``README.md``) for the adapter directory, unless it has one. PEFT
    adds its metadata to an existing card; without one it renders the Hub's full template with
    jinja (about 0.05 s a save)."""
    card = Path(config.output_dir) / "adapter" / "README.md"
    if card.exists():
        return
    card.parent.mkdir(parents=True, exist_ok=True)
    card.write_text(
        f"---\nlibrary_name: peft\n---\n# LoRA adapter ({method})\n\n"
        f"Trained by agent_rl_plugin's train_offline_grpo on logged completions with advantages, "
        f"on the base model `{config.model}`.\n\n",
        encoding="utf-8",
    )


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
    counts of :func:`~agent_rl_plugin.train.offline_data.build_examples` (``not_a_choice``,
    ``zero_advantage_skipped``, ``examples_with_stored_token_ids``, ``examples_retokenised``,
    ``stored_token_ids_rejected``, ``old_logprobs_unusable_tokens``, ...; those four also in
    ``metrics``, with ``nonfinite_losses_skipped``) plus
    ``stored_token_ids_rejected_reasons`` (reason -> rows), ``format``, ``advantage_level``, ``stopped_early``
    (``target_kl``: ``{"step", "approx_kl"}`` or ``None``) and, unless ``measure_examples`` is 0,
    ``logprobs`` (:func:`measure_logprobs`). Raises :class:`TrainError` for data that cannot be
    trained on (wrong columns, empty, every advantage 0, no completion one of ``choices``) or a
    run that diverged (a NaN / inf trainable parameter; nothing is saved) and :class:`TrainConfigError` for a bad checkpoint or an
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
    model, tokenizer = load_model_and_tokenizer(config.model, config.allow_download)
    choices = ChoiceSet(tokenizer, config.choices) if config.choices else None
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    built = build_examples(
        dataset,
        tokenizer,
        max_length=config.max_length,
        train_tool_tokens=config.train_tool_tokens,
        use_behaviour_logprobs=config.use_behaviour_logprobs,
        choices=choices,
        skip_zero_advantage=config.skip_zero_advantage,
        token_ids=config.token_ids,
        vocab_size=getattr(embeddings, "num_embeddings", None),
    )
    if config.target_kl is not None and not built.stats["old_logprobs_used"]:
        logger.warning("target_kl is set but no example has usable behaviour log-probs: training will not stop early")
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
        entropy_coef=config.entropy_coef,
        target_kl=config.target_kl,
        dual_clip=config.dual_clip,
    )
    if not progress:  # no bar, and no metrics dict printed per step either
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    output = trainer.train(resume_from_checkpoint=resume)
    check_finite_weights(trainer.model, trainer.nonfinite_losses)
    method = "gigpo" if config.advantage_level == "step" else "offline_grpo"
    if trainer.args.should_save:
        _write_model_card(config, method)
    adapter_path = save_adapter(trainer, config.output_dir)
    metrics, history = summarize_run(trainer, output)
    stats: dict[str, Any] = dict(built.stats)  # counts, plus the "logprobs" measurements
    stats["stored_token_ids_rejected_reasons"] = dict(built.rejected_token_ids)
    stats["nonfinite_losses_skipped"] = trainer.nonfinite_losses
    for name in TOKEN_SOURCE_COUNTS + SAFETY_COUNTS:  # also in training_runs.final_metrics
        metrics[name] = stats[name]
    if config.measure_examples:
        stats["logprobs"] = measure_logprobs(trainer.model, built.examples, config.measure_examples)
    return TrainResult(
        method=method,
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
            "stopped_early": trainer.stopped_early,
            **stats,
        },
    )


__all__ = [  # noqa: F822 - OfflineGRPOTrainer comes from the module __getattr__ (built on first use)
    "CONTROL_METRICS",
    "DUAL_CLIP",
    "LOG_RATIO_BOUND",
    "METRICS",
    "OfflineGRPOTrainer",
    "SAFETY_COUNTS",
    "TOKEN_SOURCE_COUNTS",
    "behaviour_logprobs",
    "completion_logprob",
    "measure_logprobs",
    "token_logprobs",
    "train_offline_grpo",
]
