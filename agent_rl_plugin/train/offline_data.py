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
exactly 0 carry no policy-gradient signal and are left out; when that leaves nothing, or the
dataset is empty, or an advantage is missing or not finite, :class:`TrainError` is raised.

An example is a dict of lists: ``input_ids``, ``loss_mask``, ``advantages`` (the row's
advantage on every trained token, 0 elsewhere), ``old_logprobs`` and ``old_mask`` (the logged
log-prob and 1 on the tokens it is used for, 0 elsewhere). Logged ``old_logprobs`` are used
only when ``use_behaviour_logprobs`` and their length equals the number of assistant tokens of
the example (:attr:`TokenizedCompletion.n_assistant`); otherwise they are ignored and counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from agent_rl_plugin.train.common import TrainError
from agent_rl_plugin.train.tokenize import tokenize_completion

GROUP_COLUMNS = ("prompt", "completions", "advantages")
COMPLETION_COLUMNS = ("prompt", "completion", "advantage")
EXAMPLE_KEYS = ("input_ids", "loss_mask", "advantages", "old_logprobs", "old_mask")


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


def build_examples(
    dataset: Any,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    train_tool_tokens: bool = False,
    use_behaviour_logprobs: bool = True,
) -> OfflineExamples:
    """Tokenised examples of every completion with a non-zero advantage (see the module doc).

    ``stats`` counts: ``rows`` (dataset rows), ``completions``, ``zero_advantage`` (left out),
    ``no_trained_tokens`` (left out: e.g. a completion of tool messages only),
    ``examples``, ``positive`` / ``negative`` (examples by advantage sign), ``trained_tokens``,
    ``truncated_prompts``, ``truncated_completions``, ``unaligned_messages``,
    ``old_logprobs_used``, ``old_logprobs_ignored`` (present but unused: misaligned, or
    ``use_behaviour_logprobs`` off).
    """
    fmt = check_offline_dataset(dataset)
    stats = dict.fromkeys(
        (
            "rows",
            "completions",
            "zero_advantage",
            "no_trained_tokens",
            "examples",
            "positive",
            "negative",
            "trained_tokens",
            "truncated_prompts",
            "truncated_completions",
            "unaligned_messages",
            "old_logprobs_used",
            "old_logprobs_ignored",
        ),
        0,
    )
    stats["rows"] = len(dataset)
    rows = list(iter_completions(dataset, fmt))
    stats["completions"] = len(rows)
    kept = [r for r in rows if r["advantage"] != 0.0]
    stats["zero_advantage"] = len(rows) - len(kept)
    if not kept:
        raise TrainError(
            f"every advantage is 0 ({len(rows)} completions): nothing to learn. Advantages are 0 when every "
            "completion of a group got the same reward; log more varied rollouts or use another reward"
        )
    examples: list[dict[str, list]] = []
    for row in kept:
        tokens = tokenize_completion(
            tokenizer, row["prompt"], row["completion"], max_length=max_length, train_tool_tokens=train_tool_tokens
        )
        stats["unaligned_messages"] += tokens.unaligned_messages
        if tokens.n_trained == 0:
            stats["no_trained_tokens"] += 1
            continue
        stats["truncated_prompts"] += int(tokens.prompt_truncated > 0)
        stats["truncated_completions"] += int(tokens.completion_truncated)
        advantage = row["advantage"]
        n = len(tokens.input_ids)
        old_logprobs, old_mask = [0.0] * n, [0] * n
        logged = row["old_logprobs"]
        if logged is not None and len(logged) > 0:
            if use_behaviour_logprobs and len(logged) == tokens.n_assistant:
                values = iter(float(x) for x in logged)
                for i, is_assistant in enumerate(tokens.assistant_mask):
                    if is_assistant:
                        old_logprobs[i], old_mask[i] = next(values), 1
                stats["old_logprobs_used"] += 1
            else:
                stats["old_logprobs_ignored"] += 1
        examples.append(
            {
                "input_ids": tokens.input_ids,
                "loss_mask": tokens.loss_mask,
                "advantages": [advantage if m else 0.0 for m in tokens.loss_mask],
                "old_logprobs": old_logprobs,
                "old_mask": old_mask,
            }
        )
        stats["positive" if advantage > 0 else "negative"] += 1
        stats["trained_tokens"] += tokens.n_trained
    stats["examples"] = len(examples)
    if not examples:
        raise TrainError(
            f"none of the {len(kept)} completions with a non-zero advantage has a token to train on "
            "(completions without assistant messages?); check the completion column, or set train_tool_tokens"
        )
    return OfflineExamples(examples=examples, format=fmt, stats=stats)


class OfflineCollator:
    """Pads examples on the right into tensors: ``input_ids`` (with ``pad_token_id``),
    ``attention_mask``, ``loss_mask``, ``advantages``, ``old_logprobs``, ``old_mask``
    (zeros on padding). ``pad_to_multiple_of`` rounds the length up (tensor cores)."""

    def __init__(self, pad_token_id: int, pad_to_multiple_of: int | None = None) -> None:
        self.pad_token_id = int(pad_token_id)
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: list[Mapping[str, list]]) -> dict[str, Any]:
        import torch
        from trl.trainer.utils import pad

        def stacked(key: str, dtype: Any, value: int) -> Any:
            return pad(
                [torch.tensor(f[key], dtype=dtype) for f in features],
                padding_value=value,
                padding_side="right",
                pad_to_multiple_of=self.pad_to_multiple_of,
            )

        return {
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


__all__ = [
    "COMPLETION_COLUMNS",
    "GROUP_COLUMNS",
    "OfflineCollator",
    "OfflineExamples",
    "build_examples",
    "check_offline_dataset",
    "dataset_format",
    "iter_completions",
]
