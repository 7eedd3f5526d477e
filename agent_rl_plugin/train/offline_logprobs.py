r"""Per-token log-probs and entropies for offline GRPO / GiGPO, over the full vocabulary or
constrained to a choice set, and the evaluation helpers built on them.

Tensor contract (positions in input coordinates, as ``input_ids``; the functions shift by one
themselves: the logits at position ``t - 1`` predict token ``t``):

* ``allowed``: ``None`` (full vocabulary) or a ``(batch, length, K)`` long tensor, at each
  position the ids of the tokens allowed there padded with -1
  (:func:`~agent_rl_plugin.train.offline_data.allowed_tensor`); never a vocabulary-sized mask.
* Full vocabulary: ``logp_t = log_softmax(logits)[token_t]`` (TRL's ``selective_log_softmax``).
* Constrained: ``logp_t = logit[token_t] - logsumexp(logits[allowed_t])``, the log-prob of the
  policy restricted to the allowed tokens (the same number as
  :func:`agent_rl_plugin.train.choices.masked_logprob`); exactly 0 at a **forced** position
  (one allowed token) and at a position without an allowed set (neither is ever trained).
* Entropy at a position: over the allowed tokens when constrained, else over the full
  vocabulary; the full-vocabulary entropy is computed only at the positions asked for
  (``mask``), since it needs a softmax over the vocabulary.

:func:`behaviour_logprobs` gives the per-assistant-token log-probs in the form a policy should
log as ``old_logprobs`` (forced tokens 0.0), :func:`completion_logprob` one completion's total,
:func:`measure_logprobs` the before/after summary of a training run.
"""

from __future__ import annotations

from typing import Any, Sequence

from agent_rl_plugin.train.choices import ChoiceSet
from agent_rl_plugin.train.common import TrainError
from agent_rl_plugin.train.offline_data import (
    ALLOWED_KEY,
    OfflineCollator,
    allowed_tensor,
    constrain_to_choices,
)
from agent_rl_plugin.train.tokenize import tokenize_completion


def shifted_logits(model: Any, input_ids: Any, attention_mask: Any) -> Any:
    """``(batch, length - 1, vocab)`` logits predicting ``input_ids[:, 1:]``."""
    return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1, :]


def _allowed_logits(logits: Any, allowed: Any) -> tuple[Any, Any]:
    """``(subset, valid)``: float32 logits of the allowed ids ``(batch, T, K)`` with -inf on
    padding, and the valid-slot mask. A position without any allowed id keeps slot 0 valid so
    that every value stays finite (those positions are zeroed by the callers)."""
    import torch

    valid = allowed >= 0
    first = torch.zeros_like(valid)
    first[..., 0] = True
    valid = valid | (first & ~valid.any(dim=-1, keepdim=True))
    subset = logits.gather(-1, allowed.clamp(min=0)).float()
    return subset.masked_fill(~valid, float("-inf")), valid


def logprobs_from_logits(logits: Any, targets: Any, allowed: Any = None) -> Any:
    """Float32 ``(batch, T)`` log-probs of ``targets`` under shifted ``logits`` ``(batch, T, V)``;
    ``allowed`` ``(batch, T, K)`` (already shifted) constrains them (see the module doc)."""
    import torch
    from trl.trainer.utils import selective_log_softmax

    if allowed is None:
        return selective_log_softmax(logits, targets).float()
    subset, _valid = _allowed_logits(logits, allowed)
    chosen = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1).float()
    logp = chosen - torch.logsumexp(subset, dim=-1)
    free = (allowed >= 0).sum(dim=-1) > 1  # a choice is made here
    return torch.where(free, logp, torch.zeros_like(logp))


def entropy_from_logits(logits: Any, allowed: Any = None, mask: Any = None) -> Any:
    """Float32 ``(batch, T)`` entropies of shifted ``logits``: over the ``allowed`` ids when
    given, else over the vocabulary; 0 where ``mask`` (``(batch, T)``) is 0."""
    import torch

    if allowed is not None:
        subset, valid = _allowed_logits(logits, allowed)
        logp = torch.log_softmax(subset, dim=-1)
        # -inf on padding: zero it before the product, or its gradient is 0 * inf = nan
        logp = torch.where(valid, logp, torch.zeros_like(logp))
        entropy = -(logp.exp() * logp * valid).sum(dim=-1)
        return entropy if mask is None else entropy * mask.to(entropy.dtype)
    if mask is None:
        logp = torch.log_softmax(logits.float(), dim=-1)
        return -(logp.exp() * logp).sum(dim=-1)
    picked = mask.bool()
    logp = torch.log_softmax(logits[picked].float(), dim=-1)  # only the asked-for positions: (M, V)
    values = -(logp.exp() * logp).sum(dim=-1)
    return torch.zeros(mask.shape, dtype=values.dtype, device=values.device).masked_scatter(picked, values)


def token_logprobs(model: Any, input_ids: Any, attention_mask: Any, allowed: Any = None) -> Any:
    """Log-probs ``(batch, length - 1)`` of ``input_ids[:, 1:]`` under ``model`` (float32);
    ``allowed`` ``(batch, length, K)`` constrains them to a choice set (see the module doc)."""
    logits = shifted_logits(model, input_ids, attention_mask)
    return logprobs_from_logits(logits, input_ids[:, 1:], None if allowed is None else allowed[:, 1:])


def _choice_set(tokenizer: Any, choices: ChoiceSet | Sequence[str] | None) -> ChoiceSet | None:
    if choices is None or isinstance(choices, ChoiceSet):
        return choices
    return ChoiceSet(tokenizer, choices)


def _scored_tokens(
    tokenizer: Any,
    prompt: Any,
    completion: Any,
    choices: ChoiceSet | None,
    *,
    train_tool_tokens: bool = False,
    max_length: int | None = None,
) -> tuple[Any, list[int], list[tuple[int, list[int]]] | None]:
    """``(tokens, loss_mask, allowed)`` of one completion, constrained when ``choices``."""
    tokens = tokenize_completion(
        tokenizer, prompt, completion, max_length=max_length, train_tool_tokens=train_tool_tokens
    )
    if choices is None:
        return tokens, tokens.loss_mask, None
    constrained = constrain_to_choices(tokens.input_ids, tokens.assistant_mask, choices)
    if constrained is None:
        raise TrainError(
            f"the completion is not one of the choices {list(choices.choices)}",
            hint="score completions that are exactly one choice, or leave choices unset",
        )
    return tokens, constrained[0], constrained[1]


def _logprobs_of(model: Any, input_ids: list[int], allowed: list[tuple[int, list[int]]] | None) -> list[float]:
    import torch

    device = next(model.parameters()).device
    ids = torch.tensor([input_ids], device=device)
    allowed_ids = None if allowed is None else allowed_tensor([allowed], len(input_ids)).to(device)
    with torch.no_grad():
        return [0.0, *token_logprobs(model, ids, torch.ones_like(ids), allowed_ids)[0].tolist()]


def completion_logprob(
    model: Any,
    tokenizer: Any,
    prompt: str | Sequence[dict],
    completion: str | Sequence[dict],
    *,
    train_tool_tokens: bool = False,
    max_length: int | None = None,
    mean: bool = False,
    choices: ChoiceSet | Sequence[str] | None = None,
) -> float:
    """Sum (``mean=True``: mean) of the log-probs of the tokens of ``completion`` that offline
    GRPO trains (same tokenisation and mask), under ``model`` as it is (with its adapter, if
    any; wrap in ``model.disable_adapter()`` for the base). With ``choices`` (a
    :class:`ChoiceSet` or the list of answers) the log-probs are the constrained ones and forced
    tokens are left out, as in training; a completion that is not a choice raises
    :class:`TrainError`. For evaluation and tests."""
    tokens, loss_mask, allowed = _scored_tokens(
        tokenizer,
        prompt,
        completion,
        _choice_set(tokenizer, choices),
        train_tool_tokens=train_tool_tokens,
        max_length=max_length,
    )
    count = sum(loss_mask)
    if count == 0:
        raise TrainError("the completion has no token to score")
    logp = _logprobs_of(model, tokens.input_ids, allowed)
    total = sum(value for value, m in zip(logp, loss_mask) if m)
    return total / count if mean else total


def behaviour_logprobs(
    model: Any,
    tokenizer: Any,
    prompt: str | Sequence[dict],
    completion: str | Sequence[dict],
    *,
    max_length: int | None = None,
    choices: ChoiceSet | Sequence[str] | None = None,
) -> list[float]:
    """One log-prob per assistant token of ``completion`` under ``model``: what a policy logs as
    ``old_logprobs`` so that the trainer uses them (their length is the example's
    :attr:`~agent_rl_plugin.train.tokenize.TokenizedCompletion.n_assistant`). With ``choices``
    they are the constrained log-probs, 0.0 on forced tokens (the end-of-turn token after a
    choice)."""
    tokens, _loss_mask, allowed = _scored_tokens(
        tokenizer, prompt, completion, _choice_set(tokenizer, choices), max_length=max_length
    )
    logp = _logprobs_of(model, tokens.input_ids, allowed)
    return [value for value, m in zip(logp, tokens.assistant_mask) if m]


def measure_logprobs(
    model: Any,
    examples: Sequence[dict[str, list]],
    limit: int,
    *,
    choices: ChoiceSet | None = None,
    batch_size: int = 32,
) -> dict[str, dict[str, float]]:
    """Mean log-prob per trained token of the positive- and of the negative-advantage examples
    (the first ``limit`` of each sign), under the base (adapter disabled) and the trained
    policy: ``{"base": {"positive": .., "negative": ..}, "trained": {...}}`` (a sign with no
    example is left out). Offline GRPO/GiGPO should raise ``positive`` and lower ``negative``.

    Examples built with a choice set (an ``allowed`` key) are scored with the constrained
    log-probs on their trained tokens; ``choices`` constrains examples built without one (their
    trained tokens must be a choice and its end token; others are left out). Examples are
    scored ``batch_size`` at a time (right-padded)."""
    import torch

    picked: dict[str, list[dict[str, list]]] = {"positive": [], "negative": []}
    for example in examples:
        advantage = next((a for a, m in zip(example["advantages"], example["loss_mask"]) if m), 0.0)
        sign = "positive" if advantage > 0 else "negative" if advantage < 0 else None
        if sign and len(picked[sign]) < limit:
            if choices is not None and ALLOWED_KEY not in example:
                aligned = constrain_to_choices(example["input_ids"], example["loss_mask"], choices)
                if aligned is None:
                    continue
                example = {**example, "loss_mask": aligned[0], ALLOWED_KEY: aligned[1]}
            picked[sign].append(example)
    rows = picked["positive"] + picked["negative"]
    signs = ["positive"] * len(picked["positive"]) + ["negative"] * len(picked["negative"])
    device = next(model.parameters()).device
    collate = OfflineCollator(pad_token_id=0)
    if any(ALLOWED_KEY in row for row in rows):
        rows = [row if ALLOWED_KEY in row else {**row, ALLOWED_KEY: []} for row in rows]
    step = max(batch_size, 1)
    batches = [{k: v.to(device) for k, v in collate(rows[i : i + step]).items()} for i in range(0, len(rows), step)]

    def per_sign_means() -> dict[str, float]:
        sums: dict[str, list[float]] = {}
        for start, batch in zip(range(0, len(rows), step), batches):
            logp = token_logprobs(model, batch["input_ids"], batch["attention_mask"], batch.get(ALLOWED_KEY))
            mask = batch["loss_mask"][:, 1:].to(logp.dtype)
            totals = torch.stack([(logp * mask).sum(dim=1), mask.sum(dim=1)], dim=1).tolist()
            for sign, (total, count) in zip(signs[start : start + step], totals):
                acc = sums.setdefault(sign, [0.0, 0.0])
                acc[0], acc[1] = acc[0] + total, acc[1] + count
        return {sign: total / max(count, 1.0) for sign, (total, count) in sums.items()}

    result: dict[str, dict[str, float]] = {"base": {}, "trained": {}}
    if not rows:
        return result
    was_training = model.training
    model.eval()
    try:  # one pass with the adapter, one without (toggling a PEFT adapter walks every layer)
        with torch.no_grad():
            result["trained"] = per_sign_means()
            with model.disable_adapter():
                result["base"] = per_sign_means()
    finally:
        model.train(was_training)
    return result


__all__ = [
    "behaviour_logprobs",
    "completion_logprob",
    "entropy_from_logits",
    "logprobs_from_logits",
    "measure_logprobs",
    "shifted_logits",
    "token_logprobs",
]
