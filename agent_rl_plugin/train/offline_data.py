"""From a dataset of logged completions with advantages to tokenised training examples, and the
data collator that pads them (for :mod:`agent_rl_plugin.train.offline`).

Accepted inputs (detected from the column names, :func:`dataset_format`):

* ``"groups"``: GRPO group rows from :func:`agent_rl_plugin.data.build_grpo_dataset`:
  ``prompt``, ``completions`` (one completion per rollout), ``advantages`` (one float per
  completion); each completion becomes one example with its advantage.
* ``"completions"``: per-completion rows, e.g. GiGPO step rows from
  :func:`agent_rl_plugin.data.build_step_dataset`: ``prompt``, ``completion``, ``advantage``
  and optionally ``old_logprobs`` (the behaviour policy's log-probs of the completion's
  tokens, or null).

Prompts and completions are chat message lists or plain strings (see
:mod:`agent_rl_plugin.train.tokenize`). Other columns are ignored. Rows whose advantage is
exactly 0 carry no policy-gradient signal and are left out by default (``skip_zero_advantage``;
kept, they still count in the loss normalisation and the KL and entropy terms). When every
advantage is 0, or the dataset is empty, or an advantage is missing or not finite,
:class:`TrainError` is raised.

An example is a dict of lists: ``input_ids``, ``loss_mask``, ``advantages`` (the row's
advantage on every trained token, 0 elsewhere), ``old_logprobs`` and ``old_mask`` (the logged
log-prob and 1 on the tokens it is used for, 0 elsewhere). Logged ``old_logprobs`` are used
only when ``use_behaviour_logprobs`` and their length equals the number of assistant tokens of
the example (:attr:`TokenizedCompletion.n_assistant`); otherwise they are ignored and counted.

**Choice sets** (``choices``, a :class:`~agent_rl_plugin.train.choices.ChoiceSet`): the
assistant tokens of each completion must be one of the choices followed by the end-of-turn
token (:meth:`ChoiceSet.align`); a completion that is not is left out, counted in
``not_a_choice`` and logged as a warning. An aligned example also has ``allowed``: a
``(position, token ids)`` pair for each position of the answer (the ids allowed there; other
positions have no allowed set), and its ``loss_mask`` is 1 only on the answer's positions with
more than one allowed token: **forced** positions (one
allowed token, e.g. the end-of-turn token after a complete choice) are not trained. Logged
``old_logprobs`` still have one value per assistant token, forced ones included (0.0 there).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from agent_rl_plugin.train.choices import ChoiceSet
from agent_rl_plugin.train.common import TrainError
from agent_rl_plugin.train.tokenize import TokenizedCompletion, tokenize_completion

logger = logging.getLogger(__name__)

GROUP_COLUMNS = ("prompt", "completions", "advantages")
COMPLETION_COLUMNS = ("prompt", "completion", "advantage")
EXAMPLE_KEYS = ("input_ids", "loss_mask", "advantages", "old_logprobs", "old_mask")
#: The extra key of an example built with a choice set (see the module doc).
ALLOWED_KEY = "allowed"


def _column_names(dataset: Any) -> list[str]:
    names = getattr(dataset, "column_names", None)
    if names is not None:
        return list(names)
    rows = list(dataset[:1]) if isinstance(dataset, Sequence) else []
    return list(rows[0].keys()) if rows and isinstance(rows[0], Mapping) else []


def dataset_format(column_names: Iterable[str]) -> str:
    """``"groups"`` or ``"completions"`` for these columns (see the module doc); raises
    :class:`TrainError` naming the columns when neither set is complete."""
    names = list(column_names)
    if all(c in names for c in GROUP_COLUMNS):
        return "groups"
    if all(c in names for c in COMPLETION_COLUMNS):
        return "completions"
    raise TrainError(
        f"offline GRPO needs GRPO group rows ({', '.join(GROUP_COLUMNS)}; build_grpo_dataset) or "
        f"per-completion / step rows ({', '.join(COMPLETION_COLUMNS)}[, old_logprobs]; build_step_dataset); "
        f"the dataset has columns {names}"
    )


def check_offline_dataset(dataset: Any, advantage_level: str = "episode") -> str:
    """The dataset's format (:func:`dataset_format`), after checking that it has rows and that
    ``advantage_level='step'`` gets per-completion rows; raises :class:`TrainError`."""
    if dataset is None or len(dataset) == 0:
        raise TrainError("the dataset is empty: nothing to train on")
    fmt = dataset_format(_column_names(dataset))
    if advantage_level == "step" and fmt == "groups":
        raise TrainError(
            "advantage_level='step' (GiGPO) needs one row per LLM call (prompt, completion, advantage; "
            "build_step_dataset); these are GRPO group rows with one advantage per episode: use "
            "advantage_level='episode'"
        )
    return fmt


def _advantage(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TrainError(f"{where}: the advantage must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise TrainError(f"{where}: the advantage is {number}; advantages must be finite")
    return number


def iter_completions(dataset: Any, fmt: str | None = None) -> Iterator[dict[str, Any]]:
    """One ``{"prompt", "completion", "advantage", "old_logprobs"}`` dict per completion of
    ``dataset`` (group rows are exploded)."""
    fmt = fmt or dataset_format(_column_names(dataset))
    for i, row in enumerate(dataset):
        if fmt == "groups":
            completions, advantages = row["completions"], row["advantages"]
            if completions is None or advantages is None or len(completions) != len(advantages):
                raise TrainError(
                    f"group row {i}: {0 if completions is None else len(completions)} completions but "
                    f"{0 if advantages is None else len(advantages)} advantages; they must pair up"
                )
            for j, (completion, advantage) in enumerate(zip(completions, advantages)):
                yield {
                    "prompt": row["prompt"],
                    "completion": completion,
                    "advantage": _advantage(advantage, f"group row {i} completion {j}"),
                    "old_logprobs": None,
                }
        else:
            yield {
                "prompt": row["prompt"],
                "completion": row["completion"],
                "advantage": _advantage(row["advantage"], f"row {i}"),
                "old_logprobs": row.get("old_logprobs"),
            }


@dataclass
class OfflineExamples:
    """Tokenised examples and what building them counted (merged into ``TrainResult.extra``)."""

    examples: list[dict[str, list]]
    format: str
    stats: dict[str, int] = field(default_factory=dict)


def constrain_to_choices(
    input_ids: Sequence[int], assistant_mask: Sequence[int], choices: ChoiceSet
) -> tuple[list[int], list[tuple[int, list[int]]]] | None:
    """``(loss_mask, allowed)`` of a tokenised completion under ``choices`` (see the module doc):
    the assistant tokens must be one choice and its end token; ``None`` when they are not.
    ``loss_mask`` is 1 on the answer's unforced positions; ``allowed`` holds a
    ``(position, allowed token ids)`` pair for each of the answer's positions."""
    positions = [i for i, m in enumerate(assistant_mask) if m]
    aligned = choices.align([input_ids[i] for i in positions]) if positions else None
    if aligned is None:
        return None
    loss_mask = [0] * len(input_ids)
    allowed: list[tuple[int, list[int]]] = []
    for i, tokens in zip(positions, aligned):
        allowed.append((i, list(tokens)))
        loss_mask[i] = int(len(tokens) > 1)
    return loss_mask, allowed


def _example(
    tokens: TokenizedCompletion, loss_mask: list[int], advantage: float, logged: Any, use_behaviour_logprobs: bool
) -> tuple[dict[str, list], bool | None]:
    """The example dict, and whether logged behaviour log-probs were used (``None``: none logged)."""
    n = len(tokens.input_ids)
    old_logprobs, old_mask = [0.0] * n, [0] * n
    used = None
    if logged is not None and len(logged) > 0:
        used = use_behaviour_logprobs and len(logged) == tokens.n_assistant
        if used:
            values = iter(float(x) for x in logged)
            for i, is_assistant in enumerate(tokens.assistant_mask):
                if is_assistant:
                    old_logprobs[i], old_mask[i] = next(values), 1
    example: dict[str, list] = {
        "input_ids": tokens.input_ids,
        "loss_mask": loss_mask,
        "advantages": [advantage if m else 0.0 for m in loss_mask],
        "old_logprobs": old_logprobs,
        "old_mask": old_mask,
    }
    return example, used


def build_examples(
    dataset: Any,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    train_tool_tokens: bool = False,
    use_behaviour_logprobs: bool = True,
    choices: ChoiceSet | None = None,
    skip_zero_advantage: bool = True,
) -> OfflineExamples:
    """Tokenised examples of the dataset's completions (see the module doc).

    ``stats`` counts: ``rows`` (dataset rows), ``completions``, ``zero_advantage`` (completions
    with advantage 0), ``zero_advantage_skipped`` (those left out: all of them with
    ``skip_zero_advantage``, else none), ``no_trained_tokens`` (left out: e.g. a completion of
    tool messages only), ``not_a_choice`` (left out: not one of ``choices``), ``examples``,
    ``positive`` / ``negative`` (examples by advantage sign), ``trained_tokens``,
    ``truncated_prompts``, ``truncated_completions``, ``unaligned_messages``,
    ``old_logprobs_used``, ``old_logprobs_ignored`` (present but unused: misaligned, or
    ``use_behaviour_logprobs`` off). Raises :class:`TrainError` when every advantage is 0 or no
    completion is left to train on.
    """
    fmt = check_offline_dataset(dataset)
    names = (
        "rows",
        "completions",
        "zero_advantage",
        "zero_advantage_skipped",
        "no_trained_tokens",
        "not_a_choice",
        "examples",
        "positive",
        "negative",
        "trained_tokens",
        "truncated_prompts",
        "truncated_completions",
        "unaligned_messages",
        "old_logprobs_used",
        "old_logprobs_ignored",
    )
    stats = dict.fromkeys(names, 0)
    stats["rows"] = len(dataset)
    rows = list(iter_completions(dataset, fmt))
    stats["completions"] = len(rows)
    stats["zero_advantage"] = sum(r["advantage"] == 0.0 for r in rows)
    if stats["zero_advantage"] == len(rows):
        raise TrainError(
            f"every advantage is 0 ({len(rows)} completions): nothing to learn",
            hint="advantages are 0 when every completion of a group got the same reward; log more varied "
            "rollouts (e.g. more samples per task or a higher temperature) or use a reward that tells them apart",
        )
    kept = [r for r in rows if r["advantage"] != 0.0] if skip_zero_advantage else rows
    stats["zero_advantage_skipped"] = len(rows) - len(kept)
    examples: list[dict[str, list]] = []
    not_a_choice: list[Any] = []
    for row in kept:
        tokens = tokenize_completion(
            tokenizer, row["prompt"], row["completion"], max_length=max_length, train_tool_tokens=train_tool_tokens
        )
        stats["unaligned_messages"] += tokens.unaligned_messages
        loss_mask, allowed = tokens.loss_mask, None
        if choices is not None:
            constrained = constrain_to_choices(tokens.input_ids, tokens.assistant_mask, choices)
            if constrained is None:
                not_a_choice.append(row["completion"])
                continue
            loss_mask, allowed = constrained
        if sum(loss_mask) == 0:
            stats["no_trained_tokens"] += 1
            continue
        stats["truncated_prompts"] += int(tokens.prompt_truncated > 0)
        stats["truncated_completions"] += int(tokens.completion_truncated)
        advantage = row["advantage"]
        example, used = _example(tokens, loss_mask, advantage, row["old_logprobs"], use_behaviour_logprobs)
        if used is not None:
            stats["old_logprobs_used" if used else "old_logprobs_ignored"] += 1
        if allowed is not None:
            example[ALLOWED_KEY] = allowed
        examples.append(example)
        if advantage:
            stats["positive" if advantage > 0 else "negative"] += 1
        stats["trained_tokens"] += sum(loss_mask)
    stats["examples"] = len(examples)
    stats["not_a_choice"] = len(not_a_choice)
    if not_a_choice:
        logger.warning(
            "%d of %d completions are not one of the choices %s and were left out (first: %r)",
            len(not_a_choice),
            len(kept),
            list(choices.choices) if choices is not None else [],
            not_a_choice[0],
        )
    if not examples:
        if not_a_choice and len(not_a_choice) + stats["no_trained_tokens"] == len(kept):
            raise TrainError(
                f"none of the {len(kept)} completions to train on is one of the choices "
                f"{list(choices.choices) if choices is not None else []}",
                hint="the assistant turn must be exactly one choice (e.g. 'up', then the end-of-turn token); "
                "check that the policy sampled under the same choice set, or leave choices unset",
            )
        raise TrainError(
            f"none of the {len(kept)} completions to train on has a token to train on",
            hint="check the completion column (completions without assistant messages?), or set train_tool_tokens",
        )
    return OfflineExamples(examples=examples, format=fmt, stats=stats)


class OfflineCollator:
    """Pads examples on the right into tensors: ``input_ids`` (with ``pad_token_id``),
    ``attention_mask``, ``loss_mask``, ``advantages``, ``old_logprobs``, ``old_mask``
    (zeros on padding). ``pad_to_multiple_of`` rounds the length up (tensor cores).

    Examples built with a choice set add ``allowed``: a ``(batch, length, K)`` long tensor of
    the allowed token ids at each position, ``K`` the largest allowed set of the batch, padded
    with -1 (a row of -1: no allowed set). Never a vocabulary-sized mask."""

    def __init__(self, pad_token_id: int, pad_to_multiple_of: int | None = None) -> None:
        self.pad_token_id = int(pad_token_id)
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: Sequence[Mapping[str, list]]) -> dict[str, Any]:
        import torch
        from trl.trainer.utils import pad

        def stacked(key: str, dtype: Any, value: int) -> Any:
            return pad(
                [torch.tensor(f[key], dtype=dtype) for f in features],
                padding_value=value,
                padding_side="right",
                pad_to_multiple_of=self.pad_to_multiple_of,
            )

        batch = {
            "input_ids": stacked("input_ids", torch.long, self.pad_token_id),
            "attention_mask": pad(
                [torch.ones(len(f["input_ids"]), dtype=torch.long) for f in features],
                padding_value=0,
                padding_side="right",
                pad_to_multiple_of=self.pad_to_multiple_of,
            ),
            "loss_mask": stacked("loss_mask", torch.long, 0),
            "advantages": stacked("advantages", torch.float32, 0),
            "old_logprobs": stacked("old_logprobs", torch.float32, 0),
            "old_mask": stacked("old_mask", torch.long, 0),
        }
        if features and ALLOWED_KEY in features[0]:
            batch[ALLOWED_KEY] = allowed_tensor([f[ALLOWED_KEY] for f in features], batch["input_ids"].shape[1])
        return batch


def allowed_tensor(allowed: Sequence[Sequence[tuple[int, Sequence[int]]]], length: int) -> Any:
    """``(batch, length, K)`` long tensor of per-position allowed token ids padded with -1, from
    each example's ``(position, allowed ids)`` pairs (``allowed[b]``; see :class:`OfflineCollator`)."""
    import torch

    width = max((len(ids) for pairs in allowed for _, ids in pairs), default=1) or 1
    out = torch.full((len(allowed), length, width), -1, dtype=torch.long)
    for b, pairs in enumerate(allowed):
        for i, ids in pairs:
            out[b, i, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
    return out


__all__ = [
    "ALLOWED_KEY",
    "COMPLETION_COLUMNS",
    "GROUP_COLUMNS",
    "OfflineCollator",
    "OfflineExamples",
    "allowed_tensor",
    "build_examples",
    "check_offline_dataset",
    "constrain_to_choices",
    "dataset_format",
    "iter_completions",
]
