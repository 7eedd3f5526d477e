"""Training on the token ids a serving engine recorded instead of re-tokenised text.

A logged completion's text does not always tokenise back to the tokens the policy sampled: a
sampler may pick a non-canonical split (``"u" "p"`` where the tokenizer writes ``"up"``), the
server's chat template may differ from the tokenizer's, and detokenisation may normalise
whitespace. Behaviour log-probs belong to the *sampled* tokens, so re-tokenising breaks their
alignment and trains tokens the policy never produced. When an LLM call was recorded with
``record_llm_call(..., token_ids=, prompt_token_ids=)`` the step dataset carries them as
``completion_token_ids`` / ``prompt_token_ids`` (:mod:`agent_rl_plugin.data.steps`).

Contract of :func:`stored_example_tokens` (used by
:func:`~agent_rl_plugin.train.offline_data.build_examples` when ``token_ids='auto'``):

* A row **has stored ids** when its ``completion_token_ids`` is a non-empty list. Then the
  example's tokens are the prompt tokens followed by exactly ``completion_token_ids``:
  ``prompt_token_ids`` as given when the row has them (no chat template), else the prompt
  rendered as :func:`prompt_ids` does (the chat template with its generation prompt, as the
  text path renders the prompt side). Every completion id is an assistant token (trained; the
  first token of an example never is), so logged ``old_logprobs`` align 1:1 with the ids.
  ``prompt_token_ids`` without ``completion_token_ids`` are not used.
* The ids are checked first; a row that fails falls back to the text path and is counted under
  one reason of :data:`REJECT_REASONS`: ``invalid`` (not a list of integers >= 0),
  ``out_of_vocab`` (an id >= the model's vocabulary size: it would index past the embedding),
  ``decode_mismatch`` (the ids do not decode to the row's recorded completion text with this
  tokenizer, :func:`decodes_to_completion`: ids of another model's tokenizer, or of another
  call), ``not_a_choice`` (with a choice set, the ids are not one choice and its end token). Nothing
  here raises for bad ids.
* ``max_length`` truncates as the text path does (prompt tokens from the left; a completion too
  long keeps its beginning).

:func:`retokenisation_drift` counts rows whose stored completion ids differ from what the text
path would train (the assistant tokens of the re-tokenised completion): why stored ids matter.
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping, Sequence

from agent_rl_plugin.data.health_tokens import comparable_text, ids_match_text
from agent_rl_plugin.train.common import TrainError
from agent_rl_plugin.train.tokenize import TokenizedCompletion, _as_messages, _truncate, tokenize_completion

#: The dataset columns holding stored token ids.
COMPLETION_IDS_KEY = "completion_token_ids"
PROMPT_IDS_KEY = "prompt_token_ids"
#: Values of ``OfflineGRPOTrainConfig.token_ids``: use stored ids when valid, or never.
TOKEN_IDS_MODES = ("auto", "ignore")
#: Why stored ids were not used (see the module doc).
REJECT_REASONS = ("invalid", "out_of_vocab", "decode_mismatch", "not_a_choice")


def _ids(value: Any) -> list[int] | None | str:
    """The ids of a column value: ``None`` when absent (null or empty), ``"invalid"`` when not
    a list of integers >= 0."""
    if value is None:
        return None
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        return "invalid"
    items = list(value)
    if not items:
        return None
    if any(isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 0 for x in items):
        return "invalid"
    return [int(x) for x in items]


def check_stored_ids(row: Mapping[str, Any], vocab_size: int) -> tuple[list[int], list[int] | None] | str | None:
    """``(completion_ids, prompt_ids or None)`` of a row with valid stored ids, a reason of
    :data:`REJECT_REASONS` (but ``not_a_choice``) when they are unusable, ``None`` when the row
    has no stored completion ids."""
    completion = _ids(row.get(COMPLETION_IDS_KEY))
    if completion is None:
        return None
    prompt = _ids(row.get(PROMPT_IDS_KEY))
    if isinstance(completion, str) or isinstance(prompt, str):
        return "invalid"
    if max(completion) >= vocab_size or (prompt is not None and max(prompt) >= vocab_size):
        return "out_of_vocab"
    return completion, prompt


def decodes_to_completion(tokenizer: Any, completion_ids: Sequence[int], completion: Any, end_ids: Any = None) -> bool:
    """Whether stored ``completion_ids`` belong to the recorded ``completion``: the rule of
    :func:`agent_rl_plugin.data.health_tokens.ids_match_text` (``tokenizer.decode`` of the ids,
    less one trailing end / special id, is exactly the completion's text), the one ``agent-rl
    doctor`` applies for ``token_ids_mismatch``. A completion whose text is not all that was
    sampled (tool calls, reasoning; :func:`~agent_rl_plugin.data.health_tokens.comparable_text`
    gives ``None``) is not compared: ``True``."""
    text = comparable_text(completion)
    return text is None or ids_match_text(tokenizer, completion_ids, text, end_ids)


def prompt_ids(tokenizer: Any, prompt: str | Sequence[Mapping[str, Any]], completion: Any = None) -> list[int]:
    """Token ids of the prompt side alone: for a plain-text pair (``prompt`` and ``completion``
    both strings) the prompt text with the tokenizer's special tokens; otherwise the prompt
    messages (a string becomes one ``user`` message) rendered by the chat template with the
    generation prompt (e.g. ``<|im_start|>assistant\\n``). Raises :class:`TrainError` when a
    conversational prompt meets a tokenizer without a chat template."""
    if isinstance(prompt, str) and (completion is None or isinstance(completion, str)):
        return list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    if getattr(tokenizer, "chat_template", None) is None:
        raise TrainError("conversational rows need a tokenizer with a chat template (tokenizer.chat_template is None)")
    messages = _as_messages(prompt, "user", "prompt")
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # jinja errors, templates that refuse roles
        raise TrainError(f"the tokenizer's chat template cannot render this prompt: {exc}") from None
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def stored_example_tokens(
    tokenizer: Any,
    prompt: Any,
    completion: Any,
    completion_ids: Sequence[int],
    stored_prompt_ids: Sequence[int] | None = None,
    *,
    max_length: int | None = None,
) -> TokenizedCompletion:
    """The example tokens ``prompt ids + completion_ids`` (see the module doc): ``loss_mask`` and
    ``assistant_mask`` are 1 on the completion ids (but on the first token of the example)."""
    head = list(stored_prompt_ids) if stored_prompt_ids else prompt_ids(tokenizer, prompt, completion)
    ids = head + list(completion_ids)
    mask = [0] * len(head) + [1] * len(completion_ids)
    if mask:
        mask[0] = 0
    result = TokenizedCompletion(input_ids=ids, loss_mask=list(mask), assistant_mask=list(mask))
    return _truncate(result, max_length)


def retokenised_completion_ids(
    tokenizer: Any, prompt: Any, completion: Any, *, train_tool_tokens: bool = False
) -> list[int]:
    """The completion tokens the text path trains for this row (its assistant tokens after
    re-tokenising the rendered text)."""
    tokens = tokenize_completion(tokenizer, prompt, completion, train_tool_tokens=train_tool_tokens)
    return [i for i, m in zip(tokens.input_ids, tokens.assistant_mask) if m]


def retokenisation_drift(dataset: Any, tokenizer: Any, *, limit: int | None = None) -> dict[str, int]:
    """How many rows' stored completion ids differ from the re-tokenised completion:
    ``{"rows_with_token_ids": n, "checked": c, "differ": d}`` over per-completion rows (e.g. the
    step dataset; rows without ``completion_token_ids`` are skipped), checking at most ``limit``
    rows with ids. A row whose text cannot be tokenised counts as differing."""
    counts = {"rows_with_token_ids": 0, "checked": 0, "differ": 0}
    for row in dataset:
        ids = _ids(row.get(COMPLETION_IDS_KEY))
        if ids is None:
            continue
        counts["rows_with_token_ids"] += 1
        if limit is not None and counts["checked"] >= limit:
            continue
        counts["checked"] += 1
        try:
            differs = ids != retokenised_completion_ids(tokenizer, row["prompt"], row["completion"])
        except TrainError:
            differs = True
        counts["differ"] += int(differs)
    return counts


__all__ = [
    "COMPLETION_IDS_KEY",
    "PROMPT_IDS_KEY",
    "REJECT_REASONS",
    "TOKEN_IDS_MODES",
    "check_stored_ids",
    "decodes_to_completion",
    "prompt_ids",
    "retokenisation_drift",
    "retokenised_completion_ids",
    "stored_example_tokens",
]
