"""A closed set of answers (action words) a policy must choose from, as token sequences: what the
local policy samples under and what the offline trainer renormalises over, so the logged
behaviour log-probs and the trainer's log-probs are the same numbers.

    choices = ChoiceSet(tokenizer, ["up", "down", "left", "right"])
    choices.allowed([])                 # first tokens of every choice
    choices.allowed(ids_of("up"))       # (end_id,): the end-of-turn token is forced
    choices.align(completion_ids)       # allowed set at every position of a logged answer

Contract:

* Each choice is tokenised alone (``add_special_tokens=False``) and followed by ``end_id``
  (the tokenizer's end-of-sequence token unless given): that is the token sequence the policy
  generates and the trainer sees inside the assistant turn (ChatML: ``up<|im_end|>``).
* At each position the *allowed* tokens are the next tokens of the choices that continue the
  prefix generated so far. The constrained policy's distribution there is the softmax of the
  logits over the allowed tokens only (:func:`masked_logprob`).
* A position with exactly one allowed token is **forced**: its constrained log-prob is 0, it
  carries no choice and no gradient; the trainer does not train it (the end-of-turn token after
  a complete choice is always forced).
* Choices must be distinct non-empty strings whose token sequences differ; a completion that is
  not one of the choices does not align (:meth:`ChoiceSet.align` returns ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_rl_plugin.train.common import TrainError

__all__ = ["ChoiceError", "ChoiceSet", "masked_logprob"]


class ChoiceError(TrainError):
    """A choice set that cannot constrain a policy (empty, duplicate or untokenisable choices)."""


class ChoiceSet:
    """The token sequences of ``choices`` under ``tokenizer`` (see the module doc)."""

    def __init__(self, tokenizer: Any, choices: Sequence[str], *, end_id: int | None = None) -> None:
        if isinstance(choices, str) or not choices:
            raise ChoiceError(
                f"choices must be a non-empty list of strings, got {choices!r}",
                hint='give the answers the policy may produce, e.g. ["up", "down", "left", "right"]',
            )
        if any(not isinstance(choice, str) or not choice for choice in choices):
            raise ChoiceError(f"every choice must be a non-empty string, got {list(choices)!r}")
        if len(set(choices)) != len(choices):
            raise ChoiceError(f"choices must be distinct, got {list(choices)!r}")
        end = tokenizer.eos_token_id if end_id is None else end_id
        if end is None:
            raise ChoiceError("the tokenizer has no end-of-sequence token to end a choice with", hint="pass end_id=")
        self.choices: tuple[str, ...] = tuple(choices)
        self.end_id = int(end)
        self.sequences: tuple[tuple[int, ...], ...] = tuple(
            (*tokenizer(choice, add_special_tokens=False)["input_ids"], self.end_id) for choice in self.choices
        )
        if len(set(self.sequences)) != len(self.sequences):
            raise ChoiceError(f"two choices tokenise to the same tokens: {list(choices)!r}")
        self._by_sequence = {sequence[:-1]: choice for sequence, choice in zip(self.sequences, self.choices)}

    def __len__(self) -> int:
        return len(self.choices)

    @property
    def single_token(self) -> bool:
        """Whether every choice is one token (then each answer is one sampled token)."""
        return all(len(sequence) == 2 for sequence in self.sequences)

    def allowed(self, prefix: Sequence[int]) -> tuple[int, ...]:
        """The tokens that may follow ``prefix`` (sorted, distinct); ``()`` when ``prefix`` is a
        complete choice (end token included) or continues none."""
        prefix = tuple(prefix)
        n = len(prefix)
        return tuple(sorted({s[n] for s in self.sequences if len(s) > n and s[:n] == prefix}))

    def choice_of(self, token_ids: Sequence[int]) -> str | None:
        """The choice whose tokens are ``token_ids`` (with or without the end token), else ``None``."""
        ids = tuple(token_ids)
        if ids and ids[-1] == self.end_id:
            ids = ids[:-1]
        return self._by_sequence.get(ids)

    def align(self, completion_ids: Sequence[int]) -> list[tuple[int, ...]] | None:
        """The allowed tokens at each position of ``completion_ids`` (a choice's tokens, the end
        token included or not), or ``None`` when they are not one of the choices."""
        ids = tuple(completion_ids)
        if self.choice_of(ids) is None:
            return None
        return [self.allowed(ids[:i]) for i in range(len(ids))]


def masked_logprob(logits: Any, token_id: int, allowed: Sequence[int]) -> float:
    """``log softmax(logits restricted to allowed)[token_id]`` for one position (a 1-D tensor
    of logits): 0.0 when ``allowed`` is that one token (forced)."""
    import torch

    if len(allowed) == 1:
        return 0.0
    index = torch.tensor(list(allowed), device=logits.device)
    subset = logits.float().index_select(0, index)
    position = list(allowed).index(token_id)
    return float(subset[position] - torch.logsumexp(subset, dim=0))
