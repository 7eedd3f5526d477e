"""A training loop continues the same LoRA adapter (``train_offline_grpo(..., adapter=PATH)``):
round 2 starts from the weights round 1 saved, the KL reference stays the base model (not
round 1's policy), base weights never change, the saved adapter has the same shape so round 3
could continue it, and an adapter that does not fit is refused with its path and the fix."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.train import OfflineGRPOTrainConfig, build_tiny_model, train_offline_grpo  # noqa: E402
from agent_rl_plugin.train.adapters import prepare_policy, read_adapter  # noqa: E402
from agent_rl_plugin.train.config import TrainConfigError  # noqa: E402

GOOD = ["yes", "sure", "good", "right"]
BAD = ["no", "never", "bad", "wrong"]


def rows(n_prompts: int, seed: int) -> list[dict]:
    """For each prompt a GOOD answer (advantage +1) and a BAD one (-1)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_prompts):
        prompt = [{"role": "user", "content": f"Question {rng.randint(0, 999)}?"}]
        for words, advantage in ((GOOD, 1.0), (BAD, -1.0)):
            answer = " ".join(rng.choice(words) for _ in range(rng.randint(3, 6)))
            out.append({"prompt": prompt, "completion": [{"role": "assistant", "content": answer}], "advantage": advantage})
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", vocab_texts=[" ".join(GOOD + BAD), "Question"])


def config(tiny: str, out: Path, **overrides) -> OfflineGRPOTrainConfig:
    values = dict(
        model=tiny, output_dir=str(out), learning_rate=5e-3, max_steps=4, batch_size=8, lora_r=6,
        max_length=64, seed=0, use_cpu=True, report_to=[], measure_examples=0,
    )
    values.update(overrides)
    return OfflineGRPOTrainConfig(**values)


def adapter_weights(adapter_path: str) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(adapter_path, "adapter_model.safetensors")))


def policy_weights(policy) -> dict:
    """The LoRA weights of a PEFT model, named as in the saved file."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(policy)


def digest(model_dir: str) -> str:
    h = hashlib.sha256()
    for file in sorted(Path(model_dir).rglob("*")):
        if file.is_file():
            h.update(file.name.encode() + file.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def round_1(tiny, tmp_path_factory):
    """Round 1: a fresh adapter trained and saved."""
    return train_offline_grpo(config(tiny, tmp_path_factory.mktemp("round1")), rows(16, seed=0), progress=False)


def test_round_2_starts_from_round_1s_adapter_and_the_reference_stays_the_base(tiny, round_1):
    import torch
    from transformers import AutoModelForCausalLM

    saved = read_adapter(round_1.adapter_path)
    assert (saved.r, saved.lora_alpha) == (6, 12.0)

    # the policy round 2 trains, as train_offline_grpo builds it, before its first step
    policy = prepare_policy(AutoModelForCausalLM.from_pretrained(tiny), config(tiny, Path("unused")), saved)
    start, on_disk = policy_weights(policy), adapter_weights(round_1.adapter_path)
    assert start.keys() == on_disk.keys()
    assert all(torch.equal(start[k], on_disk[k]) for k in on_disk)
    # only the LoRA weights train
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)

    # the KL reference (adapter disabled) is the base model, not round 1's policy
    base = AutoModelForCausalLM.from_pretrained(tiny).eval()
    policy.eval()
    ids = torch.tensor([[1, 5, 9, 14, 20, 3]])
    with torch.no_grad():
        with policy.disable_adapter():
            reference = policy(input_ids=ids).logits
        round_1_policy = policy(input_ids=ids).logits
        assert torch.equal(reference, base(input_ids=ids).logits)
        assert not torch.allclose(round_1_policy, reference)


def test_two_rounds_train_the_same_adapter_against_the_same_base(tiny, round_1, tmp_path):
    import torch

    base_before = digest(tiny)
    round_2 = train_offline_grpo(
        config(tiny, tmp_path / "round2", beta=1.0, lora_r=None), rows(16, seed=1), adapter=round_1.adapter_path,
        progress=False,
    )
    assert round_2.extra["continued_from"] == round_1.adapter_path and round_1.extra["continued_from"] is None
    assert round_2.hardware["lora_r"] == 6  # the adapter's rank, not the hardware profile's
    # the first step's KL is measured before any update: round 1's policy against the base, so > 0
    # (a fresh adapter, or a reference that were round 1's policy, would give 0)
    kls = [entry["kl"] for entry in round_2.log_history if "kl" in entry]
    assert kls[0] > 1e-4

    # same shape, new values: round 3 could continue it
    first, second = adapter_weights(round_1.adapter_path), adapter_weights(round_2.adapter_path)
    assert {k: v.shape for k, v in first.items()} == {k: v.shape for k, v in second.items()}
    assert any(not torch.equal(first[k], second[k]) for k in first)
    assert read_adapter(round_2.adapter_path).base_model == tiny
    assert digest(tiny) == base_before  # base weights unchanged on disk

    # a round with a vanishing learning rate hands back the adapter it was given
    still = train_offline_grpo(
        config(tiny, tmp_path / "still", learning_rate=1e-30, max_steps=1), rows(4, seed=2),
        adapter=round_2.adapter_path, progress=False,
    )
    kept = adapter_weights(still.adapter_path)
    assert all(torch.equal(kept[k], second[k]) for k in second)


def test_an_adapter_that_does_not_fit_is_refused(tiny, round_1, tmp_path):
    data = rows(2, seed=3)

    def train(adapter, **overrides):
        return train_offline_grpo(config(tiny, tmp_path / "out", **overrides), data, adapter=adapter, progress=False)

    missing = tmp_path / "nowhere"
    with pytest.raises(TrainConfigError, match=f"adapter: {missing} does not exist") as error:
        train(missing)
    assert "<output_dir>/adapter" in error.value.hint and "fresh adapter" in error.value.hint

    with pytest.raises(TrainConfigError, match=rf"adapter: {tiny} is not a saved adapter \(no adapter_config.json\)"):
        train(tiny)  # the base model's directory, not an adapter

    with pytest.raises(TrainConfigError, match="has LoRA rank 6, but lora_r is 4") as error:
        train(round_1.adapter_path, lora_r=4)
    assert "set lora_r to 6" in error.value.hint

    wider = build_tiny_model(tmp_path / "wider", vocab_texts=[" ".join(GOOD + BAD), "Question"], hidden_size=48)
    with pytest.raises(TrainConfigError, match=f"does not fit the base model {wider}: layer .* has weight shape") as error:
        train(round_1.adapter_path, model=str(wider))
    assert f"trained on {tiny}" in error.value.hint
