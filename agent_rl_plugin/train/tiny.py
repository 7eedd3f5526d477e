"""A tiny Qwen2 causal LM and a byte-level BPE tokenizer with a ChatML chat template, built
offline in about a second, for demos and tests that run TRL trainers on CPU.

    path = build_tiny_model(tmp_path / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)

The chat template renders ``tool_calls`` (OpenAI form ``{"function": {"name", "arguments"}}``
or flat ``{"name", "arguments"}``) as ``<tool_call>{...}</tool_call>`` lines and tool results
as ``tool`` turns, like Qwen2.5's template.

The weight init std (``initializer_range``) sets how a fresh model explores. With the
transformers default (0.02) its logits are about 0.01 in size: the next-token distribution is
nearly uniform (entropy ~ ln(vocab), 5.98 nats of 5.99 at 400 tokens) and it barely learns.
With 0.4 the logits are so large that the random policy is nearly deterministic (mean entropy
2.5-2.9 nats): it samples the same few completions, a group's rollouts often get equal rewards
and GRPO has no signal (in a prototype closed loop 4 of 6 runs never learned). The default,
:data:`DEFAULT_INITIALIZER_RANGE` = 0.2, sits between: 4.7-4.8 nats, varied samples, logits
large enough to learn in a few seconds (every run of that prototype learned).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from agent_rl_plugin.train.common import TrainError

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{%- if message['content'] -%}{{ message['content'] }}{%- endif -%}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set f = call['function'] if call['function'] is defined and call['function'] else call -%}"
    "{%- if message['content'] or not loop.first -%}{{ '\n' }}{%- endif -%}"
    "{{ '<tool_call>{\"name\": \"' + f['name'] + '\", \"arguments\": ' }}"
    "{%- if f['arguments'] is string -%}{{ f['arguments'] }}{%- else -%}{{ f['arguments'] | tojson }}{%- endif -%}"
    "{{ '}</tool_call>' }}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{ '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

#: The weight init std of :func:`build_tiny_model` (see the module docstring for why 0.2).
DEFAULT_INITIALIZER_RANGE = 0.2
#: The BPE vocabulary size :func:`build_tiny_model` and :func:`build_tokenizer` aim for.
DEFAULT_VOCAB_SIZE = 400
#: The smallest vocabulary: the 256 byte-level symbols and the special tokens.
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)

SENTENCES = [
    "How much do 3 notebooks and 2 pens cost in total?",
    "The total is 15.00. The price of a pen is 1.5 and a notebook costs 4.0.",
    "<|im_start|>user\nWhat is the weather like today?<|im_end|>\n",
    '<|im_start|>assistant\n<tool_call>{"name": "lookup", "arguments": {"item": "apple"}}</tool_call><|im_end|>\n',
    "<|im_start|>tool\n0.5<|im_end|>\n<|im_start|>system\nYou are a helpful assistant.<|im_end|>",
    "calculate expression 6 * 0.5 + 1 * 3.25 = 6.25 apples coffee stamps",
    "The quick brown fox jumps over the lazy dog, every evening, again and again.",
]


def build_tokenizer(path: str | Path, sentences: Iterable[str] = SENTENCES, vocab_size: int = DEFAULT_VOCAB_SIZE):
    """Train a byte-level BPE tokenizer on ``sentences``, wrap it in ``PreTrainedTokenizerFast``
    with the ChatML template, save it to ``path`` and return it.

    ``vocab_size`` is the BPE target: the vocabulary has exactly that many tokens when the
    sentences allow that many merges, fewer when they run out (the built-in sentences stop at
    about 450; add texts for more). Raises :class:`~agent_rl_plugin.train.common.TrainError`
    below :data:`MIN_VOCAB_SIZE`."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < MIN_VOCAB_SIZE:
        raise TrainError(
            f"vocab_size must be an integer >= {MIN_VOCAB_SIZE} (256 bytes and {len(SPECIAL_TOKENS)} special "
            f"tokens), got {vocab_size!r}"
        )
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(list(sentences), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(str(path))
    return tokenizer


def build_tiny_model(
    path: str | Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    initializer_range: float | None = DEFAULT_INITIALIZER_RANGE,
    vocab_texts: Iterable[str] | None = None,
    seed: int = 0,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    intermediate_size: int | None = None,
    heads: int = 4,
    kv_heads: int = 2,
    max_position_embeddings: int = 1024,
) -> str:
    """Save a tiny Qwen2 and its tokenizer under ``path`` and return the path as a string.

    ``hidden_size``/``layers``: model size; ``heads``/``kv_heads``: attention and key/value
    heads (``hidden_size`` a multiple of ``heads``, ``heads`` of ``kv_heads``);
    ``intermediate_size``: MLP width (``None``: ``2 * hidden_size``);
    ``max_position_embeddings``: the longest sequence;
    ``initializer_range``: weight init std, 0.2 by default (``None``: the transformers default,
    0.02; larger values make the fresh model more deterministic, see the module docstring);
    ``vocab_size``: the tokenizer's BPE target (:func:`build_tokenizer`), the model's embedding
    matches the tokenizer; ``vocab_texts``: extra texts the tokenizer is trained on besides the
    built-in sentences; ``seed``: torch seed for the weights. Load with
    ``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained``. Raises
    :class:`~agent_rl_plugin.train.common.TrainError` for sizes that do not fit together.
    """
    for name, value in (("hidden_size", hidden_size), ("layers", layers), ("heads", heads), ("kv_heads", kv_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TrainError(f"{name} must be an integer >= 1, got {value!r}")
    if hidden_size % heads or heads % kv_heads:
        raise TrainError(
            f"hidden_size ({hidden_size}) must be a multiple of heads ({heads}), and heads of kv_heads ({kv_heads})"
        )
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    sentences = list(SENTENCES) + list(vocab_texts or [])
    tokenizer = build_tokenizer(path, sentences, vocab_size=vocab_size)
    extra: dict[str, Any] = {} if initializer_range is None else {"initializer_range": initializer_range}
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **extra,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    model.save_pretrained(str(path))
    return str(path)


__all__ = [
    "CHAT_TEMPLATE",
    "DEFAULT_INITIALIZER_RANGE",
    "DEFAULT_VOCAB_SIZE",
    "MIN_VOCAB_SIZE",
    "SENTENCES",
    "SPECIAL_TOKENS",
    "build_tiny_model",
    "build_tokenizer",
]
