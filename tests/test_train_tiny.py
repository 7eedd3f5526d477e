"""``build_tiny_model``: a fresh tiny model explores (its next-token distribution is spread out),
and its sizes are the caller's to choose."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from agent_rl_plugin.train import build_tiny_model  # noqa: E402
from agent_rl_plugin.train.common import TrainError  # noqa: E402
from agent_rl_plugin.train.tiny import DEFAULT_INITIALIZER_RANGE, MIN_VOCAB_SIZE  # noqa: E402

PROMPT = [{"role": "user", "content": "How much do 3 notebooks and 2 pens cost in total?"}]


def mean_next_token_entropy(path: str) -> float:
    """The entropy (nats) of the model's next-token distribution, averaged over the positions
    of a chat prompt."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    text = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        log_p = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    return float(-(log_p.exp() * log_p).sum(-1).mean())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_fresh_tiny_model_explores(tmp_path, seed):
    # measured over seeds 0-5 with the built-in 400-token vocabulary (uniform: ln 400 = 5.99):
    # default (0.2) 4.68-4.83 nats; 0.4 2.48-2.88; the transformers default 0.02: 5.98
    default = mean_next_token_entropy(build_tiny_model(tmp_path / "default", seed=seed))
    sharp = mean_next_token_entropy(build_tiny_model(tmp_path / "sharp", seed=seed, initializer_range=0.4))
    assert DEFAULT_INITIALIZER_RANGE == 0.2
    assert 4.2 < default < 5.5  # spread out, yet not the near-uniform noise that barely learns
    assert sharp < 3.3
    assert default - sharp > 1.0


def test_sizes_are_honoured(tmp_path):
    path = build_tiny_model(
        tmp_path / "m", vocab_size=300, hidden_size=48, layers=1, heads=6, kv_heads=3, intermediate_size=80
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert len(tokenizer) == 300 and config["vocab_size"] == 300
    assert (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]) == (48, 1, 80)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (6, 3)
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    assert model.get_input_embeddings().weight.shape == (300, 48)
    # the default vocabulary is 400 tokens, and the untrained model is near ln(400) at 0.02
    default = build_tiny_model(tmp_path / "d", initializer_range=None)
    assert len(transformers.AutoTokenizer.from_pretrained(default)) == 400
    assert mean_next_token_entropy(default) == pytest.approx(math.log(400), abs=0.05)


@pytest.mark.parametrize(
    "sizes, message",
    [
        ({"vocab_size": MIN_VOCAB_SIZE - 1}, "vocab_size must be an integer >= 259"),
        ({"hidden_size": 64, "heads": 3}, "must be a multiple of heads"),
        ({"heads": 4, "kv_heads": 3}, "must be a multiple of heads"),
        ({"layers": 0}, "layers must be an integer >= 1"),
    ],
)
def test_sizes_that_do_not_fit_are_refused(tmp_path, sizes, message):
    with pytest.raises(TrainError, match=message):
        build_tiny_model(tmp_path / "m", **sizes)
