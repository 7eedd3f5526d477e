"""Tokenising logged completions for offline GRPO (``tokenize_completion``): the loss mask covers
exactly the assistant's tokens (content, tool calls and end-of-turn token; not the generation
header), tool results and other turns are masked unless ``train_tool_tokens``, plain text
works, truncation keeps the completion, and templates without the prefix property fall back to
finding the content."""

from __future__ import annotations

import pytest

from agent_rl_plugin.train import build_tiny_model
from agent_rl_plugin.train.tokenize import tokenize_completion

END = "<|im_end|>"
PROMPT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "How much do 3 notebooks cost?"},
]
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"function": {"name": "lookup", "arguments": {"item": "notebook"}}}],
}
RESULT = {"role": "tool", "content": "4.0"}
ANSWER = {"role": "assistant", "content": "The total is 12.00."}
CALL_TEXT = '<tool_call>{"name": "lookup", "arguments": {"item": "notebook"}}</tool_call>'


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2"))


def trained_text(tokenizer, tokens, mask=None) -> str:
    mask = tokens.loss_mask if mask is None else mask
    return tokenizer.decode([t for t, m in zip(tokens.input_ids, mask) if m])


def test_single_answer_mask_is_the_content_and_the_end_token(tokenizer):
    tokens = tokenize_completion(tokenizer, PROMPT, [ANSWER])
    assert trained_text(tokenizer, tokens) == "The total is 12.00." + END
    assert tokens.input_ids == tokenizer(
        tokenizer.apply_chat_template(PROMPT + [ANSWER], tokenize=False), add_special_tokens=False
    )["input_ids"]
    # everything before the answer (its generation header included) is the prompt side
    first = tokens.loss_mask.index(1)
    header = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(tokens.input_ids[:first]) == header
    assert tokens.assistant_mask == tokens.loss_mask and tokens.n_trained == tokens.n_assistant


def test_tool_results_are_masked_unless_train_tool_tokens(tokenizer):
    completion = [CALL, RESULT, ANSWER]
    tokens = tokenize_completion(tokenizer, PROMPT, completion)
    assert trained_text(tokenizer, tokens) == CALL_TEXT + END + "The total is 12.00." + END
    assert "4.0" not in trained_text(tokenizer, tokens)

    with_tools = tokenize_completion(tokenizer, PROMPT, completion, train_tool_tokens=True)
    assert with_tools.input_ids == tokens.input_ids
    tool_turn = "<|im_start|>tool\n4.0" + END + "\n"
    assert trained_text(tokenizer, with_tools) == CALL_TEXT + END + tool_turn + "The total is 12.00." + END
    # behaviour log-probs belong to the assistant's tokens only
    assert with_tools.assistant_mask == tokens.loss_mask and with_tools.n_trained > with_tools.n_assistant


def test_user_turns_inside_a_multi_turn_completion_are_masked(tokenizer):
    completion = [
        {"role": "assistant", "content": "Which notebooks?"},
        {"role": "user", "content": "The blue ones."},
        {"role": "assistant", "content": "They cost 4.0 each."},
    ]
    tokens = tokenize_completion(tokenizer, PROMPT, completion)
    assert trained_text(tokenizer, tokens) == "Which notebooks?" + END + "They cost 4.0 each." + END
    assert tokens.unaligned_messages == 0


def test_plain_text_and_mixed_rows(tokenizer):
    tokens = tokenize_completion(tokenizer, "The quick brown fox", " jumps over the lazy dog.")
    assert trained_text(tokenizer, tokens) == " jumps over the lazy dog."
    assert tokenizer.decode(tokens.input_ids) == "The quick brown fox jumps over the lazy dog."
    # a plain string completion after chat messages is one assistant message
    assert trained_text(tokenizer, tokenize_completion(tokenizer, PROMPT, "Twelve.")) == "Twelve." + END
    # a plain string prompt is one user message
    text = tokenizer.decode(tokenize_completion(tokenizer, "Hi?", [ANSWER]).input_ids)
    assert text.startswith("<|im_start|>user\nHi?" + END)


def test_truncation_drops_the_prompt_from_the_left_and_keeps_the_completion(tokenizer):
    long_prompt = [{"role": "user", "content": "The quick brown fox jumps over the lazy dog. " * 20}]
    full = tokenize_completion(tokenizer, long_prompt, [ANSWER])
    cut = tokenize_completion(tokenizer, long_prompt, [ANSWER], max_length=32)
    assert len(cut.input_ids) == 32 and cut.prompt_truncated == len(full.input_ids) - 32
    assert cut.input_ids == full.input_ids[-32:] and not cut.completion_truncated
    assert trained_text(tokenizer, cut) == "The total is 12.00." + END

    # a completion longer than max_length: one token of context, then its beginning; reported
    long_answer = {"role": "assistant", "content": "again and again " * 30}
    cut = tokenize_completion(tokenizer, PROMPT, [long_answer], max_length=16)
    assert cut.completion_truncated and len(cut.input_ids) == 16 and cut.n_trained == 15
    assert trained_text(tokenizer, cut) == tokenizer.decode(
        tokenizer("again and again " * 30, add_special_tokens=False)["input_ids"][:15]
    )


def test_templates_without_the_prefix_property_fall_back_to_the_content(tokenizer):
    import copy

    # a template that marks the last message differently, so prefixes render differently
    odd = copy.deepcopy(tokenizer)
    odd.chat_template = (
        "{%- for m in messages -%}{{ '<|im_start|>' + m['role'] + '\n' + (m['content'] or '') }}"
        "{%- if loop.last -%}{{ ' (last)' }}{%- endif -%}{{ '<|im_end|>\n' }}{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
    )
    completion = [{"role": "assistant", "content": "Which notebooks?"}, {"role": "user", "content": "Blue."}, ANSWER]
    tokens = tokenize_completion(odd, PROMPT, completion)
    assert trained_text(odd, tokens) == "Which notebooks?" + END + "The total is 12.00."
    assert tokens.unaligned_messages == 0
    # a message with nothing to find (tool calls only, not rendered by this template) is counted
    assert tokenize_completion(odd, PROMPT, [CALL, RESULT, ANSWER]).unaligned_messages == 1


def test_slow_tokenizers_tokenise_segment_by_segment(tokenizer):
    class Slow:
        """A tokenizer without offsets: the same vocabulary, ``is_fast`` False."""

        is_fast = False

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def __call__(self, text, add_special_tokens=True):
            return self.inner(text, add_special_tokens=add_special_tokens)

    completion = [CALL, RESULT, ANSWER]
    fast = tokenize_completion(tokenizer, PROMPT, completion)
    slow = tokenize_completion(Slow(tokenizer), PROMPT, completion)
    assert trained_text(tokenizer, slow) == trained_text(tokenizer, fast)
    assert tokenizer.decode(slow.input_ids) == tokenizer.decode(fast.input_ids)
