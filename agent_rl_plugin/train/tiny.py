"""A tiny Qwen2 causal LM and a byte-level BPE tokenizer with a ChatML chat template, built
offline in about a second, for demos and tests that run TRL trainers on CPU.

    path = build_tiny_model(tmp_path / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)

The chat template renders ``tool_calls`` (OpenAI form ``{"function": {"name", "arguments"}}``
or flat ``{"name", "arguments"}``) as ``<tool_call>{...}</tool_call>`` lines and tool results
as ``tool`` turns, like Qwen2.5's template.

With the transformers default ``initializer_range`` (0.02) a random tiny model's logits are
about 0.01 in size and it barely learns; the default here, 0.4, gives it logits large enough
to learn in a few seconds (see ``docs``/FACTS).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

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

SENTENCES = [
    "How much do 3 notebooks and 2 pens cost in total?",
    "The total is 15.00. The price of a pen is 1.5 and a notebook costs 4.0.",
    "<|im_start|>user\nWhat is the weather like today?<|im_end|>\n",
    '<|im_start|>assistant\n<tool_call>{"name": "lookup", "arguments": {"item": "apple"}}</tool_call><|im_end|>\n',
    "<|im_start|>tool\n0.5<|im_end|>\n<|im_start|>system\nYou are a helpful assistant.<|im_end|>",
    "calculate expression 6 * 0.5 + 1 * 3.25 = 6.25 apples coffee stamps",
    "The quick brown fox jumps over the lazy dog, every evening, again and again.",
]


def build_tokenizer(path: str | Path, sentences: Iterable[str] = SENTENCES, vocab_size: int = 400):
    """Train a byte-level BPE tokenizer on ``sentences``, wrap it in ``PreTrainedTokenizerFast``
    with the ChatML template, save it to ``path`` and return it."""
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
    initializer_range: float | None = 0.4,
    vocab_texts: Iterable[str] | None = None,
    seed: int = 0,
) -> str:
    """Save a tiny Qwen2 and its tokenizer under ``path`` and return the path as a string.

    ``hidden_size``/``layers``: model size (4 attention heads, 2 key/value heads);
    ``initializer_range``: weight init std (``None``: the transformers default, 0.02);
    ``vocab_texts``: extra texts the BPE tokenizer is trained on besides the built-in sentences;
    ``seed``: torch seed for the weights. Load with ``AutoModelForCausalLM.from_pretrained`` and
    ``AutoTokenizer.from_pretrained``.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    sentences = list(SENTENCES) + list(vocab_texts or [])
    tokenizer = build_tokenizer(path, sentences)
    extra: dict[str, Any] = {} if initializer_range is None else {"initializer_range": initializer_range}
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
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


__all__ = ["CHAT_TEMPLATE", "SENTENCES", "SPECIAL_TOKENS", "build_tiny_model", "build_tokenizer"]
