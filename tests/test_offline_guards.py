"""Offline GRPO / GiGPO against extreme numbers: a logged behaviour log-prob of -9999.0 (vLLM's
stand-in for -inf) or -150, a log-ratio too large for ``exp``, a negative advantage whose ratio
grows without bound, a loss that overflows, and a run that diverges anyway. Each must end in
finite LoRA weights and a counted metric, or a clear :class:`TrainError`; never NaN weights
reported as a fine run. Real tiny models, two optimizer steps each."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.train import OfflineGRPOTrainConfig, TrainError, build_tiny_model, train_offline_grpo  # noqa: E402
from agent_rl_plugin.train.common import check_finite_weights  # noqa: E402
from agent_rl_plugin.train.config import TrainConfigError  # noqa: E402
from agent_rl_plugin.train.offline_data import build_examples, usable_behaviour_logprob  # noqa: E402

QUESTION = [{"role": "user", "content": "Which way now?"}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = ["up\ndown\nleft\nright\n" * 10, "Which way now?"]
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "q", vocab_texts=texts, hidden_size=32, layers=1)


@pytest.fixture(scope="module")
def tokenizer(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def rows(tokenizer, negative_logprob: float, *, negative_advantage: float = -1.0) -> list[dict]:
    """The red-team scenario: "up" (negative advantage) logged with an extreme behaviour
    log-prob on every token, "down" (positive) with an ordinary one; stored ids for both."""
    up, down = ids(tokenizer, "up"), ids(tokenizer, "down")
    return [
        {
            "prompt": QUESTION,
            "completion": "up",
            "advantage": negative_advantage,
            "old_logprobs": [negative_logprob] * len(up),
            "completion_token_ids": up,
            "prompt_token_ids": None,
        },
        {
            "prompt": QUESTION,
            "completion": "down",
            "advantage": 1.0,
            "old_logprobs": [-1.0] * len(down),
            "completion_token_ids": down,
            "prompt_token_ids": None,
        },
    ]


def train(tiny, tmp_path, data, **overrides):
    values = dict(
        model=tiny,
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        batch_size=2,
        lora_r=4,
        use_cpu=True,
        report_to=[],
        measure_examples=0,
        advantage_level="step",
        logging_steps=1,
    )
    values.update(overrides)
    return train_offline_grpo(OfflineGRPOTrainConfig(**values), data, progress=False)


def adapter_non_finite(result) -> tuple[int, int]:
    import torch
    from safetensors.torch import load_file

    weights = load_file(f"{result.adapter_path}/adapter_model.safetensors")
    bad = sum(int((~torch.isfinite(v)).sum()) for v in weights.values())
    return bad, sum(v.numel() for v in weights.values())


@pytest.mark.parametrize("logged", [-9999.0, -150.0])
def test_extreme_logged_logprob_is_trained_on_policy_and_weights_stay_finite(tiny, tokenizer, tmp_path, logged):
    data = rows(tokenizer, logged)
    result = train(tiny, tmp_path, data)
    bad, total = adapter_non_finite(result)
    assert bad == 0 and total > 0
    n_up = len(data[0]["completion_token_ids"])
    # every token of "up" had an unusable log-prob: counted, trained on-policy; "down" kept its own
    assert result.extra["old_logprobs_unusable_tokens"] == n_up
    assert result.metrics["old_logprobs_unusable_tokens"] == n_up
    assert result.extra["old_logprobs_used"] == 2
    assert result.metrics["nonfinite_losses_skipped"] == 0
    losses = [entry["loss"] for entry in result.log_history if "loss" in entry]
    assert losses and all(math.isfinite(x) and x != 0.0 for x in losses)


def test_behaviour_logprob_outside_minus_100_to_0_is_not_used(tokenizer):
    assert usable_behaviour_logprob(-100.0) and usable_behaviour_logprob(0.0) and usable_behaviour_logprob(-3)
    for value in (-100.5, -9999.0, 1e-3, 0.5, math.nan, -math.inf, None, True, "x"):
        assert not usable_behaviour_logprob(value), value
    up = ids(tokenizer, "up")
    logged = [-0.5, 0.3, math.nan, -9999.0, -2.0][: len(up)] + [-1.0] * max(0, len(up) - 5)
    row = {"prompt": QUESTION, "completion": "up", "advantage": 1.0, "old_logprobs": logged}
    row.update(completion_token_ids=up, prompt_token_ids=None)
    built = build_examples([row], tokenizer)
    example = built.examples[0]
    used = [(v, m) for v, m, t in zip(example["old_logprobs"], example["old_mask"], example["loss_mask"]) if t]
    assert len(used) == len(up)
    expected = [usable_behaviour_logprob(v) for v in logged]
    assert [bool(m) for _, m in used] == expected
    assert built.stats["old_logprobs_unusable_tokens"] == expected.count(False) > 0


def test_log_ratio_is_clamped_before_exp(tiny, tokenizer, tmp_path):
    # -99 is a usable log-prob, but exp(logp + 99) overflows float32: the clamp keeps the ratio
    # finite, so no micro-batch is skipped (dual clip off: only the clamp is at work)
    result = train(tiny, tmp_path, rows(tokenizer, -99.0), dual_clip=None)
    assert result.metrics["old_logprobs_unusable_tokens"] == 0
    assert result.metrics["nonfinite_losses_skipped"] == 0
    assert adapter_non_finite(result)[0] == 0
    policy = [entry["policy_loss"] for entry in result.log_history if "policy_loss" in entry]
    assert policy and all(math.isfinite(x) for x in policy)
    assert max(policy) > 1e6  # exp(20) * |A| on the "up" tokens: unbounded without the dual clip


def test_dual_clip_bounds_a_negative_advantage_term(tiny, tokenizer, tmp_path):
    result = train(tiny, tmp_path, rows(tokenizer, -99.0))  # dual_clip defaults to 3
    policy = [entry["policy_loss"] for entry in result.log_history if "policy_loss" in entry]
    # per token at most 3 * |A| = 3 ("up"), and at most ratio * A <= 0 for "down": the mean is <= 3
    assert policy and all(0 < x <= 3.0 + 1e-6 for x in policy)
    shares = [entry["dual_clip_ratio"] for entry in result.log_history if "dual_clip_ratio" in entry]
    assert shares and all(x > 0 for x in shares)


def test_non_finite_loss_skips_the_micro_batch_and_weights_stay_finite(tiny, tokenizer, tmp_path):
    # a finite advantage so large that the loss overflows float32 (the sum over tokens is inf)
    result = train(tiny, tmp_path, rows(tokenizer, -1.0, negative_advantage=-3e38), batch_size=2)
    assert result.metrics["nonfinite_losses_skipped"] == 2  # both steps' only micro-batch
    assert adapter_non_finite(result)[0] == 0


def test_a_diverged_model_raises_instead_of_saving_nan_weights():
    import torch

    layer = torch.nn.Linear(2, 2)
    check_finite_weights(layer)  # finite: nothing to say
    with torch.no_grad():
        layer.weight[0, 0] = math.nan
    with pytest.raises(TrainError, match="diverged.*weight.*3 micro-batches") as caught:
        check_finite_weights(layer, 3)
    assert "dual_clip" in (caught.value.hint or "")
    layer.weight.requires_grad_(False)  # frozen parameters (the base model) are not the adapter's
    check_finite_weights(layer)


def test_dual_clip_option():
    assert OfflineGRPOTrainConfig(model="m", output_dir="o").dual_clip == 3.0
    assert OfflineGRPOTrainConfig(model="m", output_dir="o", dual_clip=None).dual_clip is None
    assert OfflineGRPOTrainConfig(model="m", output_dir="o", dual_clip=5).dual_clip == 5.0
    for bad in (1.0, 0.5, math.inf, True, "3"):
        with pytest.raises(TrainConfigError, match="dual_clip"):
            OfflineGRPOTrainConfig(model="m", output_dir="o", dual_clip=bad)
