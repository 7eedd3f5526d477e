"""Offline GRPO / GiGPO with LoRA (``train_offline_grpo``): training on logged completions with
precomputed advantages raises the log-probs of positive-advantage completions and lowers those
of negative ones; GRPO group rows and GiGPO step rows from a real store train; logged behaviour
log-probs are used when aligned and counted when not; the KL term keeps the policy near the
base; runs resume from checkpoints; data without a learning signal is refused clearly. Every
training test checks that only LoRA weights moved."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.train import (  # noqa: E402
    OfflineGRPOTrainConfig,
    TrainError,
    build_tiny_model,
    train_offline_grpo,
)
from agent_rl_plugin.train.offline import METRICS, completion_logprob  # noqa: E402
from agent_rl_plugin.train.tokenize import tokenize_completion  # noqa: E402

GOOD = ["yes", "sure", "good", "right"]
BAD = ["no", "never", "bad", "wrong"]
TOPICS = ["apples", "coffee", "stamps", "pens", "notebooks", "weather", "dogs", "trains"]


def _prompt(rng: random.Random) -> list[dict]:
    return [{"role": "user", "content": f"Question {rng.randint(0, 999)} about {rng.choice(TOPICS)}?"}]


def _answer(rng: random.Random, words: list[str]) -> list[dict]:
    return [{"role": "assistant", "content": " ".join(rng.choice(words) for _ in range(rng.randint(3, 6)))}]


def step_rows(n_prompts: int, seed: int) -> list[dict]:
    """Per-completion rows: for each prompt a GOOD answer (advantage +1) and a BAD one (-1)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n_prompts):
        prompt = _prompt(rng)
        rows.append({"prompt": prompt, "completion": _answer(rng, GOOD), "advantage": 1.0, "old_logprobs": None})
        rows.append({"prompt": prompt, "completion": _answer(rng, BAD), "advantage": -1.0, "old_logprobs": None})
    return rows


def group_rows(n_groups: int, seed: int) -> list[dict]:
    """Rows shaped like ``build_grpo_dataset``'s: one prompt, four completions, their advantages;
    every fourth group has equal rewards (advantages all 0)."""
    rng = random.Random(seed)
    rows = []
    for g in range(n_groups):
        equal = g % 4 == 3
        words = [GOOD, BAD, GOOD, BAD]
        rewards = [0.5] * 4 if equal else [1.0, 0.0, 1.0, 0.0]
        mean = sum(rewards) / 4
        advantages = [0.0 if equal else (r - mean) / 0.5 for r in rewards]
        rows.append(
            {
                "prompt": _prompt(rng),
                "completions": [_answer(rng, w) for w in words],
                "rewards": rewards,
                "advantages": advantages,
            }
        )
    return rows


def _dataset(rows):
    from datasets import Dataset

    return Dataset.from_list(rows)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [" ".join(GOOD + BAD + TOPICS), "Question about"]
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", vocab_texts=texts)


def _config(tiny: str, tmp_path: Path, **overrides) -> OfflineGRPOTrainConfig:
    values = dict(
        model=tiny, output_dir=str(tmp_path / "offline"), learning_rate=5e-3, max_steps=16, batch_size=8,
        lora_r=8, lora_alpha=16, max_length=128, seed=0, use_cpu=True, report_to=[],
    )
    values.update(overrides)
    return OfflineGRPOTrainConfig(**values)


def _trained(tiny: str, adapter_path: str):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), adapter_path).eval()


def assert_only_lora_changed(tiny: str, adapter_path: str) -> None:
    """LoRA B (initialised to zero) moved; every base weight equals the one on disk."""
    import torch
    from transformers import AutoModelForCausalLM

    base = dict(AutoModelForCausalLM.from_pretrained(tiny).named_parameters())
    trained = _trained(tiny, adapter_path)
    lora_b = [p for n, p in trained.named_parameters() if "lora_B" in n]
    assert lora_b and any(p.abs().sum() > 0 for p in lora_b)
    for name, param in trained.get_base_model().named_parameters():
        if "lora_" not in name:
            assert torch.equal(param.detach(), base[name.replace(".base_layer", "")].detach()), name


def mean_logps(model, tokenizer, rows) -> tuple[float, float]:
    """Mean per-token log-prob of the positive- and of the negative-advantage completions."""
    def mean(sign: float) -> float:
        values = [
            completion_logprob(model, tokenizer, r["prompt"], r["completion"], mean=True)
            for r in rows
            if r["advantage"] * sign > 0
        ]
        return sum(values) / len(values)

    return mean(1.0), mean(-1.0)


def test_positive_completions_rise_and_negative_ones_fall(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    held_out = step_rows(12, seed=1)
    pos_before, neg_before = mean_logps(AutoModelForCausalLM.from_pretrained(tiny).eval(), tokenizer, held_out)

    started = time.perf_counter()
    result = train_offline_grpo(_config(tiny, tmp_path), _dataset(step_rows(64, seed=0)), progress=False)
    seconds = time.perf_counter() - started
    pos_after, neg_after = mean_logps(_trained(tiny, result.adapter_path), tokenizer, held_out)
    print(
        f"held-out mean token logp: positive {pos_before:.2f} -> {pos_after:.2f}, "
        f"negative {neg_before:.2f} -> {neg_after:.2f} in {seconds:.1f} s"
    )
    assert pos_after > pos_before + 1.0
    assert neg_after < neg_before - 1.0

    assert result.method == "offline_grpo" and result.global_step == 16
    assert result.n_rows == 128 and result.n_desirable == result.n_undesirable == 64
    assert result.extra["format"] == "completions" and result.extra["zero_advantage"] == 0
    assert Path(result.adapter_path, "adapter_config.json").is_file()
    logged = [entry for entry in result.log_history if "loss" in entry]
    assert len(logged) == 16
    for name in set(METRICS) - {"kl"}:
        assert all(math.isfinite(entry[name]) for entry in logged), name
    assert "kl" not in result.metrics  # beta = 0: no reference pass
    assert result.metrics["clip_ratio"] == 0.0 and result.metrics["ratio_mean"] == pytest.approx(1.0)
    # the trainer's own view agrees: positive tokens end far more likely than negative ones
    assert result.metrics["logp/positive"] > result.metrics["logp/negative"] + 2.0
    assert_only_lora_changed(tiny, result.adapter_path)


def test_grpo_group_rows_train_and_zero_advantages_are_left_out(tiny, tmp_path):
    # per-sequence normalisation, two micro-batches of 4 per optimizer step
    config = _config(
        tiny, tmp_path, max_steps=3, batch_size=4, gradient_accumulation_steps=2, loss_normalization="sequence"
    )
    result = train_offline_grpo(config, _dataset(group_rows(8, seed=0)), progress=False)
    assert result.extra["format"] == "groups"
    assert result.extra["completions"] == 32 and result.extra["zero_advantage"] == 8
    assert result.n_rows == 24 and result.n_desirable == result.n_undesirable == 12
    assert result.global_step == 3 and math.isfinite(result.metrics["train_loss"])
    tokens_per_example = result.extra["trained_tokens"] / result.n_rows
    assert 4 * tokens_per_example < result.metrics["trained_tokens"] < 16 * tokens_per_example  # 8 examples a step
    assert_only_lora_changed(tiny, result.adapter_path)


def test_aligned_behaviour_logprobs_are_used_and_misaligned_ones_ignored(tiny, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    rows = step_rows(16, seed=3)
    for i, row in enumerate(rows):
        n = tokenize_completion(tokenizer, row["prompt"], row["completion"]).n_assistant
        # far below the policy's log-probs: ratio >> 1 + epsilon, so positive-advantage tokens are clipped
        row["old_logprobs"] = [-30.0] * (n if i % 4 < 2 else n + 1)
    result = train_offline_grpo(_config(tiny, tmp_path, max_steps=4), _dataset(rows), progress=False)
    assert result.extra["old_logprobs_used"] == 16 and result.extra["old_logprobs_ignored"] == 16
    logged = [entry for entry in result.log_history if "loss" in entry]
    assert max(entry["clip_ratio"] for entry in logged) > 0
    assert max(entry["ratio_mean"] for entry in logged) > 1e3
    assert 0 < result.metrics["behaviour_share"] < 1
    assert_only_lora_changed(tiny, result.adapter_path)

    off = train_offline_grpo(
        _config(tiny, tmp_path / "off", max_steps=2, use_behaviour_logprobs=False), _dataset(rows), progress=False
    )
    assert off.extra["old_logprobs_used"] == 0 and off.extra["old_logprobs_ignored"] == 32
    assert off.metrics["behaviour_share"] == 0 and off.metrics["clip_ratio"] == 0


def _drift(tiny: str, adapter_path: str, rows) -> float:
    """Mean |token logp with adapter - without| over the completions of ``rows``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = _trained(tiny, adapter_path)
    total = 0.0
    for row in rows:
        policy = completion_logprob(model, tokenizer, row["prompt"], row["completion"], mean=True)
        with model.disable_adapter():
            base = completion_logprob(model, tokenizer, row["prompt"], row["completion"], mean=True)
        total += abs(policy - base)
    return total / len(rows)


def test_kl_term_keeps_the_policy_closer_to_the_base(tiny, tmp_path):
    rows = step_rows(32, seed=4)
    free = train_offline_grpo(_config(tiny, tmp_path / "free", max_steps=12), _dataset(rows), progress=False)
    held = train_offline_grpo(_config(tiny, tmp_path / "kl", max_steps=12, beta=2.0), _dataset(rows), progress=False)
    kls = [entry["kl"] for entry in held.log_history if "kl" in entry]
    assert len(kls) == 12 and all(math.isfinite(k) and k >= 0 for k in kls) and kls[-1] > 0
    assert kls[0] == pytest.approx(0.0, abs=1e-6)  # LoRA B starts at zero: policy == reference
    free_drift, held_drift = _drift(tiny, free.adapter_path, rows), _drift(tiny, held.adapter_path, rows)
    print(f"mean |logp - base logp|: beta 0 {free_drift:.3f}, beta 2 {held_drift:.3f}")
    assert held_drift < 0.8 * free_drift
    assert_only_lora_changed(tiny, held.adapter_path)


def test_resume_continues_from_the_latest_checkpoint(tiny, tmp_path):
    rows = _dataset(step_rows(32, seed=5))
    first = train_offline_grpo(
        _config(tiny, tmp_path, max_steps=4, save_strategy="steps", save_steps=2), rows, progress=False
    )
    assert first.global_step == 4 and first.resumed_from is None
    assert {p.name for p in Path(first.output_dir).glob("checkpoint-*")} == {"checkpoint-2", "checkpoint-4"}
    second = train_offline_grpo(
        _config(tiny, tmp_path, max_steps=6, save_strategy="steps", save_steps=2, resume_from_checkpoint=True),
        rows,
        progress=False,
    )
    assert second.resumed_from == str(Path(first.output_dir) / "checkpoint-4")
    assert second.global_step == 6
    assert [entry["step"] for entry in second.log_history if "loss" in entry] == [1, 2, 3, 4, 5, 6]
    assert_only_lora_changed(tiny, second.adapter_path)


def test_data_without_a_learning_signal_is_refused(tiny, tmp_path):
    config = _config(tiny, tmp_path)
    zero = [dict(row, advantage=0.0) for row in step_rows(4, seed=6)]
    with pytest.raises(TrainError, match=r"every advantage is 0 \(8 completions\): nothing to learn"):
        train_offline_grpo(config, _dataset(zero), progress=False)
    equal_groups = [dict(row, advantages=[0.0] * 4) for row in group_rows(2, seed=6)]
    with pytest.raises(TrainError, match="every advantage is 0"):
        train_offline_grpo(config, _dataset(equal_groups), progress=False)
    with pytest.raises(TrainError, match=r"columns \['prompt', 'completion', 'label'\]"):
        train_offline_grpo(config, _dataset([{"prompt": "q", "completion": "a", "label": True}]), progress=False)
    with pytest.raises(TrainError, match="the dataset is empty"):
        train_offline_grpo(config, [], progress=False)
    with pytest.raises(TrainError, match="advantage_level='step' .* needs one row per LLM call"):
        train_offline_grpo(_config(tiny, tmp_path, advantage_level="step"), _dataset(group_rows(2, 6)), progress=False)
    with pytest.raises(TrainError, match="row 1: the advantage is nan"):
        rows = step_rows(1, seed=6)
        rows[1]["advantage"] = float("nan")
        train_offline_grpo(config, rows, progress=False)


def test_gigpo_steps_from_a_duckdb_store_train(tiny, tmp_path, plugin_manager):
    from agent_rl_plugin.data import build_step_dataset
    from agent_rl_plugin.data.synthetic import synthesize_store

    store = tmp_path / "rollouts.duckdb"
    synthesize_store(store, rollouts=8, llm_calls=3, group_size=4, n_tasks=2)
    steps = build_step_dataset(store)
    assert steps.num_rows == 24
    result = train_offline_grpo(
        _config(tiny, tmp_path, advantage_level="step", max_steps=3, max_length=512), steps, progress=False
    )
    assert result.method == "gigpo" and result.global_step == 3
    assert result.extra["format"] == "completions" and result.extra["unaligned_messages"] == 0
    assert result.n_rows == 24 - result.extra["zero_advantage"] > 0
    assert Path(result.adapter_path, "adapter_config.json").is_file()
    assert_only_lora_changed(tiny, result.adapter_path)
