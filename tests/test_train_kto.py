"""KTO with LoRA learns (the training issue's learning test): on a synthetic logged dataset whose
desirable completions share a pattern, the held-out implicit-reward preference accuracy goes
from ties (0.5, LoRA B starts at zero so policy == reference) to >= 0.9; only LoRA weights move;
one-class labels and batch size 1 are refused with clear errors."""

from __future__ import annotations

import random
import time

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.train import (  # noqa: E402
    KTOTrainConfig,
    TrainConfigError,
    TrainError,
    balanced_weights,
    build_tiny_model,
    implicit_reward_accuracy,
    train_kto,
)

GOOD = ["yes", "sure", "good", "right"]
BAD = ["no", "never", "bad", "wrong"]
TOPICS = ["apples", "coffee", "stamps", "pens", "notebooks", "weather", "dogs", "trains"]


def _prompt(rng: random.Random) -> list[dict]:
    return [{"role": "user", "content": f"Question {rng.randint(0, 999)} about {rng.choice(TOPICS)}?"}]


def _completion(rng: random.Random, words: list[str]) -> list[dict]:
    return [{"role": "assistant", "content": " ".join(rng.choice(words) for _ in range(rng.randint(3, 6)))}]


def _rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        good = i % 2 == 0
        rows.append({"prompt": _prompt(rng), "completion": _completion(rng, GOOD if good else BAD), "label": good})
    return rows


def _pairs(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"prompt": _prompt(rng), "desirable": _completion(rng, GOOD), "undesirable": _completion(rng, BAD)}
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    texts = [" ".join(GOOD + BAD + TOPICS), "Question about"]
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", vocab_texts=texts)


def _dataset(rows):
    from datasets import Dataset

    return Dataset.from_list(rows)


def _config(tiny, tmp_path, **overrides) -> KTOTrainConfig:
    values = dict(
        model=tiny, output_dir=str(tmp_path / "kto"), learning_rate=5e-3, epochs=3, batch_size=8,
        lora_r=8, lora_alpha=16, beta=0.1, max_length=128, seed=0, use_cpu=True, report_to=[],
    )
    values.update(overrides)
    return KTOTrainConfig(**values)


def test_kto_lora_learns_the_desirable_pattern(tiny, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    held_out = _pairs(40, seed=1)
    before = implicit_reward_accuracy(tiny, None, held_out)
    assert before == pytest.approx(0.5)

    started = time.perf_counter()
    result = train_kto(_config(tiny, tmp_path), _dataset(_rows(128, seed=0)))
    seconds = time.perf_counter() - started
    after = implicit_reward_accuracy(tiny, result.adapter_path, held_out)
    print(f"implicit-reward accuracy before {before:.2f} after {after:.2f} in {seconds:.1f} s")
    assert after >= 0.9

    assert result.n_rows == 128 and result.n_desirable == result.n_undesirable == 64
    assert (result.desirable_weight, result.undesirable_weight) == (1.0, 1.0)
    assert result.global_step == 3 * 128 // 8
    assert "train_loss" in result.metrics and result.log_history
    assert any(k.startswith("rewards/") for k in result.metrics)

    base = AutoModelForCausalLM.from_pretrained(tiny)
    base_before = {n: p.detach().clone() for n, p in base.named_parameters()}
    trained = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), result.adapter_path)
    lora = {n: p for n, p in trained.named_parameters() if "lora_B" in n}
    assert lora and any(p.abs().sum() > 0 for p in lora.values())  # B started at zero
    for name, param in trained.get_base_model().named_parameters():
        if "lora_" in name:
            continue
        key = name.replace(".base_layer", "")
        assert torch.equal(param.detach(), base_before[key]), name


def test_one_class_labels_are_refused(tiny, tmp_path):
    rows = [dict(r, label=True) for r in _rows(16, seed=2)]
    with pytest.raises(TrainError, match="16 desirable, 0 undesirable; change the label rule"):
        train_kto(_config(tiny, tmp_path), _dataset(rows))


def test_batch_size_one_is_refused(tiny, tmp_path):
    with pytest.raises(TrainConfigError, match="batch_size must be > 1 for KTO"):
        _config(tiny, tmp_path, batch_size=1)


def test_balanced_weights_follow_the_recommended_ratio():
    assert balanced_weights(10, 10) == (1.0, 1.0)
    assert balanced_weights(12, 10) == (1.0, 1.0)
    for n_good, n_bad in [(10, 40), (90, 10), (1, 7)]:
        good, bad = balanced_weights(n_good, n_bad)
        assert bad == 1.0
        assert 1.0 <= good * n_good / (bad * n_bad) <= 4 / 3


def test_config_fields_have_help_and_validate(tmp_path):
    import dataclasses

    for f in dataclasses.fields(KTOTrainConfig):
        assert f.metadata.get("help"), f.name
    with pytest.raises(TrainConfigError, match="learning_rate"):
        KTOTrainConfig(model="m", output_dir=str(tmp_path), learning_rate=0)
    with pytest.raises(TrainConfigError, match="lora_dropout"):
        KTOTrainConfig(model="m", output_dir=str(tmp_path), lora_dropout=1.5)
