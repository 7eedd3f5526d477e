"""Tokenising a logged (prompt, completion) pair for offline policy-gradient training: token ids
plus a per-token ``loss_mask`` that says which tokens the policy is trained on.

Contract of :func:`tokenize_completion`:

* **Conversational** (``prompt`` and/or ``completion`` are lists of chat messages; a plain
  string prompt becomes one ``user`` message, a plain string completion one ``assistant``
  message): the text is ``tokenizer.apply_chat_template(prompt + completion, tokenize=False)``.
  The character span of each completion message is found by rendering prefixes of the
  conversation (``prompt + completion[:k]``, and for an assistant message also with
  ``add_generation_prompt=True``) and checking that each rendering is a prefix of the full
  text. An assistant message's trained span starts after its generation header (e.g.
  ``<|im_start|>assistant\\n``, which belongs to the prompt side) and ends with its end-of-turn
  token (e.g. ``<|im_end|>``, trained: the model must learn to stop); trailing whitespace after
  it (the template's newline) is not trained. When a template breaks the prefix property for a
  message (some templates re-render earlier turns) the message's content is searched in the
  full text after the previous span, plus an end-of-turn token that directly follows it; a
  message that cannot be found this way (e.g. only tool calls) is left untrained and counted in
  ``unaligned_messages``.
* Tool results and ``user``/``system``/other non-assistant messages inside the completion are
  masked out, unless ``train_tool_tokens`` (then their whole rendered segment, header included,
  is trained).
* **Plain text** (both strings): the text is ``prompt + completion`` tokenised with the
  tokenizer's special tokens; the completion's characters are trained. No end-of-sequence
  token is added.
* Tokens are marked through ``return_offsets_mapping`` (fast tokenizers): a token is trained
  when its characters overlap a trained span. Slow tokenizers (no offsets) tokenise each
  segment separately and concatenate the ids.
* The first token is never trained (nothing predicts it).
* **Truncation** to ``max_length`` drops tokens from the left of the prompt and keeps the
  completion. When the completion alone (with one token of context) is longer than
  ``max_length``, the completion's beginning is kept (one context token, then the first
  ``max_length - 1`` completion tokens) and ``completion_truncated`` is set.
* ``assistant_mask`` marks the assistant-generated tokens (``loss_mask`` without tool tokens):
  the tokens behaviour log-probs logged by the serving engine belong to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from agent_rl_plugin.train.common import TrainError

Message = Mapping[str, Any]


@dataclass
class TokenizedCompletion:
    """One tokenised (prompt, completion) pair (see the module doc)."""

    input_ids: list[int]
    loss_mask: list[int]
    assistant_mask: list[int]
    prompt_truncated: int = 0
    completion_truncated: bool = False
    unaligned_messages: int = 0

    @property
    def n_trained(self) -> int:
        """Number of trained tokens (``sum(loss_mask)``)."""
        return sum(self.loss_mask)

    @property
    def n_assistant(self) -> int:
        """Number of assistant-generated tokens (``sum(assistant_mask)``): the length logged
        behaviour log-probs must have to be used."""
        return sum(self.assistant_mask)


# A span of characters of the rendered text: (start, end, is_assistant).
Span = tuple[int, int, bool]


def _content_text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, list):  # multimodal-style content parts: keep the text parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def _as_messages(value: Any, role: str, what: str) -> list[dict]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, Sequence) and all(isinstance(m, Mapping) and "role" in m for m in value):
        return [dict(m) for m in value]
    raise TrainError(
        f"the {what} must be a string or a list of chat messages with a 'role', got {type(value).__name__}"
    )


def _render(tokenizer: Any, messages: list[dict], generation: bool = False) -> str | None:
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
    except Exception:  # a template that refuses a partial conversation: fall back to searching
        return None


def _end_token_length(tokenizer: Any, text: str, at: int) -> int:
    """Length of a special (end-of-turn) token starting at ``text[at]``, else 0."""
    candidates = [tokenizer.eos_token] + list(getattr(tokenizer, "all_special_tokens", []) or [])
    for token in sorted({t for t in candidates if t}, key=len, reverse=True):
        if text.startswith(token, at):
            return len(token)
    return 0


def _searched_span(tokenizer: Any, full: str, message: Message, cursor: int, assistant: bool) -> Span | None:
    content = _content_text(message)
    if not content:
        return None
    start = full.find(content, cursor)
    if start < 0:
        return None
    end = start + len(content)
    if assistant:
        end += _end_token_length(tokenizer, full, end)
    return start, end, assistant


def conversation_spans(
    tokenizer: Any, prompt: list[dict], completion: list[dict], *, train_tool_tokens: bool = False
) -> tuple[str, list[Span], int]:
    """``(full_text, trained_spans, unaligned_messages)`` of a conversational pair (see the
    module doc); spans are ``(start, end, is_assistant)`` character ranges of ``full_text``."""
    full = _render(tokenizer, prompt + completion)
    if full is None:
        raise TrainError("the tokenizer's chat template cannot render this conversation")
    spans: list[Span] = []
    unaligned = 0
    before = _render(tokenizer, prompt)
    cursor = len(before) if before is not None and full.startswith(before) else 0
    for k, message in enumerate(completion):
        assistant = message.get("role") == "assistant"
        after = _render(tokenizer, prompt + completion[: k + 1])
        aligned = after is not None and full.startswith(after)
        if assistant or train_tool_tokens:
            head = _render(tokenizer, prompt + completion[:k], generation=True) if assistant else before
            span: Span | None = None
            if aligned and after is not None and head is not None and after.startswith(head):
                start, end = len(head), len(after.rstrip()) if assistant else len(after)
                if end > start:
                    span = (start, end, assistant)
            if span is None:
                span = _searched_span(tokenizer, full, message, cursor, assistant)
            if span is None:
                unaligned += 1
            else:
                spans.append(span)
                cursor = span[1]
        if aligned and after is not None:
            cursor = max(cursor, len(after))
        before = after
    return full, spans, unaligned


def _mask_tokens(
    tokenizer: Any, text: str, spans: list[Span], add_special_tokens: bool
) -> tuple[list[int], list[int], list[int]]:
    """``(input_ids, loss_mask, assistant_mask)`` of ``text`` with tokens overlapping ``spans``."""
    if getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
        ids = list(encoded["input_ids"])
        loss = [0] * len(ids)
        assistant = [0] * len(ids)
        ordered = sorted(spans)
        j = 0
        for i, (s, e) in enumerate(encoded["offset_mapping"]):
            if e <= s:
                continue
            while j < len(ordered) and ordered[j][1] <= s:
                j += 1
            k = j
            while k < len(ordered) and ordered[k][0] < e:
                loss[i] = 1
                if ordered[k][2]:
                    assistant[i] = 1
                k += 1
        return ids, loss, assistant
    # slow tokenizer: tokenise the pieces between span boundaries one by one
    cuts = sorted({0, len(text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    ids, loss, assistant = [], [], []
    if add_special_tokens:
        ids = list(tokenizer("", add_special_tokens=True)["input_ids"])
        loss, assistant = [0] * len(ids), [0] * len(ids)
    for a, b in zip(cuts, cuts[1:]):
        piece = tokenizer(text[a:b], add_special_tokens=False)["input_ids"]
        inside = [sp for sp in spans if sp[0] <= a and b <= sp[1]]
        ids.extend(piece)
        loss.extend([1 if inside else 0] * len(piece))
        assistant.extend([1 if any(sp[2] for sp in inside) else 0] * len(piece))
    return ids, loss, assistant


def _truncate(result: TokenizedCompletion, max_length: int | None) -> TokenizedCompletion:
    n = len(result.input_ids)
    if max_length is None or n <= max_length:
        return result
    first = next((i for i, m in enumerate(result.loss_mask) if m), n)
    if n - max(first - 1, 0) <= max_length:
        start, stop = n - max_length, n
    else:  # the completion alone does not fit: keep one context token and its beginning
        start, stop = max(first - 1, 0), max(first - 1, 0) + max_length
        result.completion_truncated = True
    result.input_ids = result.input_ids[start:stop]
    result.loss_mask = result.loss_mask[start:stop]
    result.assistant_mask = result.assistant_mask[start:stop]
    result.prompt_truncated = start
    return result


def tokenize_completion(
    tokenizer: Any,
    prompt: str | Sequence[Message],
    completion: str | Sequence[Message],
    *,
    max_length: int | None = None,
    train_tool_tokens: bool = False,
) -> TokenizedCompletion:
    """Token ids and masks of ``prompt + completion`` (see the module doc for the rules).
    Raises :class:`~agent_rl_plugin.train.common.TrainError` for values that are neither text
    nor chat messages, or a conversation the chat template cannot render."""
    if isinstance(prompt, str) and isinstance(completion, str):
        text = prompt + completion
        spans: list[Span] = [(len(prompt), len(text), True)] if completion else []
        ids, loss, assistant = _mask_tokens(tokenizer, text, spans, add_special_tokens=True)
        unaligned = 0
    else:
        if getattr(tokenizer, "chat_template", None) is None:
            raise TrainError(
                "conversational rows need a tokenizer with a chat template (tokenizer.chat_template is None)"
            )
        prompt_messages = _as_messages(prompt, "user", "prompt")
        completion_messages = _as_messages(completion, "assistant", "completion")
        text, spans, unaligned = conversation_spans(
            tokenizer, prompt_messages, completion_messages, train_tool_tokens=train_tool_tokens
        )
        ids, loss, assistant = _mask_tokens(tokenizer, text, spans, add_special_tokens=False)
    if loss:
        loss[0] = assistant[0] = 0
    result = TokenizedCompletion(input_ids=ids, loss_mask=loss, assistant_mask=assistant, unaligned_messages=unaligned)
    return _truncate(result, max_length)


__all__ = ["TokenizedCompletion", "conversation_spans", "tokenize_completion"]
