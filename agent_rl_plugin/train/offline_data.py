"""From a dataset of logged completions with advantages to tokenised training examples, and the
data collator that pads them (for :mod:`agent_rl_plugin.train.offline`).

Accepted inputs (detected from the column names, :func:`dataset_format`):

* ``"groups"``: GRPO group rows from :func:`agent_rl_plugin.data.build_grpo_dataset`:
  ``prompt``, ``completions`` (one completion per rollout), ``advantages`` (one float per
  completion); each completion becomes one example with its advantage.
* ``"completions"``: per-completion rows, e.g. GiGPO step rows from
  :func:`agent_rl_plugin.data.build_step_dataset`: ``prompt``, ``completion``, ``advantage``
  and optionally ``old_logprobs`` (the behaviour policy's log-probs of the completion's
  tokens, or null), ``completion_token_ids`` and ``prompt_token_ids`` (the token ids the
  serving engine sampled and saw, or null).

**Stored token ids** (``token_ids='auto'``, the default): a row with ``completion_token_ids``
is tokenised as its prompt tokens followed by exactly those ids, ``prompt_token_ids`` being the
prompt tokens when present (no chat template); see :mod:`agent_rl_plugin.train.stored_tokens`.
Ids that are not valid (negative, not integers, >= ``vocab_size``, not decoding to the row's
completion text, or with a choice set not one choice) are not used: the row is re-tokenised from its text and the reason counted. Other rows
(and every row with ``token_ids='ignore'``) are re-tokenised from their text as below.

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
A single logged value outside :data:`BEHAVIOUR_LOGPROB_RANGE` ``[-100, 0]`` (or NaN) is unusable:
a log-prob is never above 0, and servers write ``-inf`` as a large finite stand-in (vLLM
``-9999.0``) that would make the ratio ``exp(logp - old)`` overflow. That token gets no
behaviour log-prob (``old_mask`` 0: trained on-policy, ``old = logp.detach()``) and is counted
in ``old_logprobs_unusable_tokens``; the row's other tokens keep theirs.

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
import numbers
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from agent_rl_plugin.data.health_tokens import end_token_ids
from agent_rl_plugin.train.choices import ChoiceSet
from agent_rl_plugin.train.common import TrainError
from agent_rl_plugin.train.stored_tokens import (
    COMPLETION_IDS_KEY,
    PROMPT_IDS_KEY,
    REJECT_REASONS,
    TOKEN_IDS_MODES,
    check_stored_ids,
    decodes_to_completion,
    stored_example_tokens,
)
from agent_rl_plugin.train.tokenize import TokenizedCompletion, tokenize_completion

logger = logging.getLogger(__name__)

GROUP_COLUMNS = ("prompt", "completions", "advantages")
COMPLETION_COLUMNS = ("prompt", "completion", "advantage")
EXAMPLE_KEYS = ("input_ids", "loss_mask", "advantages", "old_logprobs", "old_mask")
#: The extra key of an example built with a choice set (see the module doc).
ALLOWED_KEY = "allowed"
#: Logged behaviour log-probs outside ``[low, high]`` (or not finite) are not used (see the module doc).
BEHAVIOUR_LOGPROB_RANGE = (-100.0, 0.0)
#: At most this many examples built from stored ids are also re-tokenised to count drift.
DRIFT_LIMIT = 256


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
    """One ``{"prompt", "completion", "advantage", "old_logprobs", "completion_token_ids",
    "prompt_token_ids"}`` dict per completion of ``dataset`` (group rows are exploded; they
    carry no logged log-probs or token ids)."""
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
                    COMPLETION_IDS_KEY: None,
                    PROMPT_IDS_KEY: None,
                }
        else:
            yield {
                "prompt": row["prompt"],
                "completion": row["completion"],
                "advantage": _advantage(row["advantage"], f"row {i}"),
                "old_logprobs": row.get("old_logprobs"),
                COMPLETION_IDS_KEY: row.get(COMPLETION_IDS_KEY),
                PROMPT_IDS_KEY: row.get(PROMPT_IDS_KEY),
            }


@dataclass
class OfflineExamples:
    """Tokenised examples and what building them counted (merged into ``TrainResult.extra``);
    ``rejected_token_ids``: rows whose stored token ids were not used, by reason."""

    examples: list[dict[str, list]]
    format: str
    stats: dict[str, int] = field(default_factory=dict)
    rejected_token_ids: dict[str, int] = field(default_factory=dict)


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


def usable_behaviour_logprob(value: Any) -> bool:
    """Whether a logged behaviour log-prob can enter the importance ratio: a number (not a
    bool, not null) within :data:`BEHAVIOUR_LOGPROB_RANGE` (NaN is not; see the module doc)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    low, high = BEHAVIOUR_LOGPROB_RANGE
    return low <= float(value) <= high


def _example(
    tokens: TokenizedCompletion, loss_mask: list[int], advantage: float, logged: Any, use_behaviour_logprobs: bool
) -> tuple[dict[str, list], bool | None, int]:
    """The example dict, whether logged behaviour log-probs were used (``None``: none logged),
    and how many of its trained tokens had an unusable one (:func:`usable_behaviour_logprob`)."""
    n = len(tokens.input_ids)
    old_logprobs, old_mask = [0.0] * n, [0] * n
    used, unusable = None, 0
    if logged is not None and len(logged) > 0:
        used = use_behaviour_logprobs and len(logged) == tokens.n_assistant
        if used:
            values = iter(logged)
            for i, is_assistant in enumerate(tokens.assistant_mask):
                if is_assistant:
                    value = next(values)
                    if usable_behaviour_logprob(value):
                        old_logprobs[i], old_mask[i] = float(value), 1
                    else:  # on-policy for this token (old = logp.detach())
                        unusable += int(bool(loss_mask[i]))
    example: dict[str, list] = {
        "input_ids": tokens.input_ids,
        "loss_mask": loss_mask,
        "advantages": [advantage if m else 0.0 for m in loss_mask],
        "old_logprobs": old_logprobs,
        "old_mask": old_mask,
    }
    return example, used, unusable


class _TokenSource:
    """Picks each row's tokens: its stored ids when usable (``token_ids='auto'``), else its
    re-tokenised text; counts what it picked and why stored ids were rejected."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        token_ids: str,
        vocab_size: int | None,
        max_length: int | None,
        train_tool_tokens: bool,
        choices: ChoiceSet | None,
        drift_limit: int,
    ) -> None:
        if token_ids not in TOKEN_IDS_MODES:
            raise TrainError(f"token_ids must be one of {', '.join(TOKEN_IDS_MODES)}, got {token_ids!r}")
        self.tokenizer = tokenizer
        self.use_stored = token_ids == "auto"
        self.vocab_size = int(vocab_size) if vocab_size is not None else len(tokenizer)
        self.max_length = max_length
        self.train_tool_tokens = train_tool_tokens
        self.choices = choices
        self.drift_limit = drift_limit
        self.rejected = dict.fromkeys(REJECT_REASONS, 0)
        self.end_ids = end_token_ids(tokenizer)
        self.ignored = 0
        self.checked = 0
        self.differ = 0

    def text(self, row: Mapping[str, Any]) -> TokenizedCompletion:
        return tokenize_completion(
            self.tokenizer,
            row["prompt"],
            row["completion"],
            max_length=self.max_length,
            train_tool_tokens=self.train_tool_tokens,
        )

    def stored(self, row: Mapping[str, Any]) -> tuple[TokenizedCompletion, Any] | None:
        """``(tokens, constrained or None)`` from the row's stored ids, or ``None`` (no usable ids)."""
        checked = check_stored_ids(row, self.vocab_size)
        if checked is None:
            return None
        if not self.use_stored:
            self.ignored += 1
            return None
        if isinstance(checked, str):
            self.rejected[checked] += 1
            return None
        completion_ids, prompt_ids = checked
        if not decodes_to_completion(self.tokenizer, completion_ids, row["completion"], self.end_ids):
            self.rejected["decode_mismatch"] += 1
            return None
        tokens = stored_example_tokens(
            self.tokenizer, row["prompt"], row["completion"], completion_ids, prompt_ids, max_length=self.max_length
        )
        constrained = None
        if self.choices is not None:
            constrained = constrain_to_choices(tokens.input_ids, tokens.assistant_mask, self.choices)
            if constrained is None:
                self.rejected["not_a_choice"] += 1
                return None
        if self.checked < self.drift_limit:
            self.checked += 1
            try:
                text = self.text(row)
                retokenised = [i for i, m in zip(text.input_ids, text.assistant_mask) if m]
            except TrainError:  # the text cannot be tokenised: the stored ids are all there is
                retokenised = None
            self.differ += int(completion_ids != retokenised)
        return tokens, constrained


def build_examples(
    dataset: Any,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    train_tool_tokens: bool = False,
    use_behaviour_logprobs: bool = True,
    choices: ChoiceSet | None = None,
    skip_zero_advantage: bool = True,
    token_ids: str = "auto",
    vocab_size: int | None = None,
    drift_limit: int = DRIFT_LIMIT,
) -> OfflineExamples:
    """Tokenised examples of the dataset's completions (see the module doc).

    ``stats`` counts: ``rows`` (dataset rows), ``completions``, ``zero_advantage`` (completions
    with advantage 0), ``zero_advantage_skipped`` (those left out: all of them with
    ``skip_zero_advantage``, else none), ``no_trained_tokens`` (left out: e.g. a completion of
    tool messages only), ``not_a_choice`` (left out: not one of ``choices``), ``examples``,
    ``positive`` / ``negative`` (examples by advantage sign), ``trained_tokens``,
    ``truncated_prompts``, ``truncated_completions``, ``unaligned_messages``,
    ``old_logprobs_used``, ``old_logprobs_ignored`` (present but unused: misaligned, or
    ``use_behaviour_logprobs`` off), ``old_logprobs_unusable_tokens`` (trained tokens of used
    rows whose logged log-prob is outside :data:`BEHAVIOUR_LOGPROB_RANGE`: trained on-policy),
    ``examples_with_stored_token_ids`` and
    ``examples_retokenised`` (examples by token source; they add up to ``examples``),
    ``stored_token_ids_rejected`` (rows whose stored ids were unusable and re-tokenised instead;
    by reason in ``rejected_token_ids``), ``stored_token_ids_ignored`` (rows with stored ids and
    ``token_ids='ignore'``), ``retokenisation_checked`` / ``retokenisation_differs`` (of up to
    ``drift_limit`` examples built from stored ids, how many were re-tokenised too and how many
    of those differ from the stored ids). ``vocab_size`` (default ``len(tokenizer)``): ids at
    or above it are rejected as ``out_of_vocab``. Raises :class:`TrainError` when every
    advantage is 0 or no completion is left to train on.
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
        "old_logprobs_unusable_tokens",
        "examples_with_stored_token_ids",
        "examples_retokenised",
        "stored_token_ids_rejected",
        "stored_token_ids_ignored",
        "retokenisation_checked",
        "retokenisation_differs",
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
    source = _TokenSource(
        tokenizer,
        token_ids=token_ids,
        vocab_size=vocab_size,
        max_length=max_length,
        train_tool_tokens=train_tool_tokens,
        choices=choices,
        drift_limit=drift_limit,
    )
    for row in kept:
        stored = source.stored(row)
        tokens = stored[0] if stored is not None else source.text(row)
        stats["unaligned_messages"] += tokens.unaligned_messages
        loss_mask, allowed = tokens.loss_mask, None
        if choices is not None:
            if stored is not None:  # already checked to be a choice
                constrained = stored[1]
            else:
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
        example, used, unusable = _example(tokens, loss_mask, advantage, row["old_logprobs"], use_behaviour_logprobs)
        stats["old_logprobs_unusable_tokens"] += unusable
        if used is not None:
            stats["old_logprobs_used" if used else "old_logprobs_ignored"] += 1
        if allowed is not None:
            example[ALLOWED_KEY] = allowed
        examples.append(example)
        stats["examples_with_stored_token_ids" if stored is not None else "examples_retokenised"] += 1
        if advantage:
            stats["positive" if advantage > 0 else "negative"] += 1
        stats["trained_tokens"] += sum(loss_mask)
    stats["examples"] = len(examples)
    stats["not_a_choice"] = len(not_a_choice)
    stats["stored_token_ids_rejected"] = sum(source.rejected.values())
    stats["stored_token_ids_ignored"] = source.ignored
    stats["retokenisation_checked"], stats["retokenisation_differs"] = source.checked, source.differ
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
    rejected = {reason: n for reason, n in source.rejected.items() if n}
    return OfflineExamples(examples=examples, format=fmt, stats=stats, rejected_token_ids=rejected)


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
    "BEHAVIOUR_LOGPROB_RANGE",
    "allowed_tensor",
    "build_examples",
    "check_offline_dataset",
    "constrain_to_choices",
    "dataset_format",
    "iter_completions",
    "usable_behaviour_logprob",
]
