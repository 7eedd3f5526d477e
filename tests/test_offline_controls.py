"""Stability controls of offline GRPO / GiGPO on a closed answer set: with ``choices`` the trainer's
log-probs are the choice set's renormalised ones (the numbers ``masked_logprob`` gives, and that a
policy sampling under the set logs), forced tokens are not trained and other answers are dropped
and counted; ``entropy_coef`` keeps the policy less certain; ``target_kl`` stops training once the
policy has moved away from the behaviour log-probs; ``skip_zero_advantage`` decides whether rows
without a learning signal become examples. Real tiny models, a few optimizer steps each."""

from __future__ import annotations

import logging
import math
import random

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.train import OfflineGRPOTrainConfig, TrainError, build_tiny_model, train_offline_grpo  # noqa: E402
from agent_rl_plugin.train.choices import ChoiceSet, masked_logprob  # noqa: E402
from agent_rl_plugin.train.config import TrainConfigError  # noqa: E402
from agent_rl_plugin.train.offline_data import allowed_tensor, build_examples  # noqa: E402
from agent_rl_plugin.train.offline_logprobs import (  # noqa: E402
    behaviour_logprobs,
    completion_logprob,
    entropy_from_logits,
    measure_logprobs,
    shifted_logits,
)
from agent_rl_plugin.train.tokenize import tokenize_completion  # noqa: E402

DIRECTIONS = ["up", "down", "left", "right"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    # one word a line: each direction becomes a single token; "north" stays several
    texts = ["\n".join(DIRECTIONS * 10), "Which way now?"]
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", vocab_texts=texts, hidden_size=32, layers=1)


@pytest.fixture(scope="module")
def tokenizer(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


def base_model(tiny: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny).eval()


def prompt(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Which way now? {i}"}]


def direction_rows(n_prompts: int, seed: int = 0) -> list[dict]:
    """Per prompt: "up" (advantage +1) and one other direction (-1)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n_prompts):
        rows.append({"prompt": prompt(i), "completion": "up", "advantage": 1.0, "old_logprobs": None})
        rows.append(
            {"prompt": prompt(i), "completion": rng.choice(DIRECTIONS[1:]), "advantage": -1.0, "old_logprobs": None}
        )
    return rows


def config(tiny: str, out, **overrides) -> OfflineGRPOTrainConfig:
    values = dict(
        model=tiny,
        output_dir=str(out),
        learning_rate=2e-2,
        max_steps=4,
        batch_size=8,
        lora_r=4,
        max_length=64,
        seed=0,
        use_cpu=True,
        report_to=[],
        measure_examples=0,
        choices=DIRECTIONS,
    )
    values.update(overrides)
    return OfflineGRPOTrainConfig(**values)


def logged(result, name: str) -> list[float]:
    return [entry[name] for entry in result.log_history if name in entry]


def test_constrained_logprobs_are_the_choice_sets_masked_logprobs(tiny, tokenizer):
    import torch

    model = base_model(tiny)
    choices = ChoiceSet(tokenizer, [*DIRECTIONS, "north"])
    for answer in ("left", "north"):
        tokens = tokenize_completion(tokenizer, prompt(7), answer)
        ids = torch.tensor([tokens.input_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0]
        positions = [i for i, m in enumerate(tokens.assistant_mask) if m]
        allowed = choices.align([tokens.input_ids[i] for i in positions])
        expected = [masked_logprob(logits[i - 1], tokens.input_ids[i], a) for i, a in zip(positions, allowed)]

        logged_values = behaviour_logprobs(model, tokenizer, prompt(7), answer, choices=choices)
        assert logged_values == pytest.approx(expected, abs=1e-5)
        assert logged_values[-1] == 0.0  # the end-of-turn token after a complete choice is forced
        free = sum(len(a) > 1 for a in allowed)
        assert free == 1 and len(logged_values) == (2 if answer == "left" else 5)

        constrained = completion_logprob(model, tokenizer, prompt(7), answer, choices=choices)
        assert constrained == pytest.approx(sum(expected), abs=1e-5)
        assert -math.log(len(choices)) * 3 < constrained < 0  # a choice among five, not among 400 tokens
        assert completion_logprob(model, tokenizer, prompt(7), answer) < constrained - 2.0  # full vocabulary
    with pytest.raises(TrainError, match="not one of the choices"):
        completion_logprob(model, tokenizer, prompt(7), "sideways", choices=DIRECTIONS)


def test_forced_tokens_are_untrained_and_other_answers_are_dropped_and_counted(tiny, tokenizer, tmp_path, caplog):
    rows = direction_rows(8)
    rows.append({"prompt": prompt(99), "completion": "sideways", "advantage": 1.0, "old_logprobs": None})
    rows.append({"prompt": prompt(98), "completion": "up down", "advantage": -1.0, "old_logprobs": None})
    choices = ChoiceSet(tokenizer, DIRECTIONS)
    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin.train.offline_data"):
        built = build_examples(rows, tokenizer, choices=choices)
    assert built.stats["not_a_choice"] == 2 and built.stats["examples"] == 16
    assert "2 of 18 completions are not one of the choices" in caplog.text and "sideways" in caplog.text
    for example in built.examples:
        assert [len(ids) for _, ids in example["allowed"]] == [4, 1]  # the choice, then the forced end token
        assert sum(example["loss_mask"]) == 1  # only the choice is trained
    assert built.stats["trained_tokens"] == 16

    result = train_offline_grpo(config(tiny, tmp_path, max_steps=2), rows, progress=False)
    assert result.extra["not_a_choice"] == 2 and result.n_rows == 16
    assert logged(result, "trained_tokens") == [8.0, 8.0]  # one trained token per row of a batch of 8

    with pytest.raises(TrainError, match="none of the 2 completions to train on is one of the choices") as refused:
        train_offline_grpo(config(tiny, tmp_path / "none"), rows[-2:], progress=False)
    assert refused.value.hint and "choice" in refused.value.hint


def test_behaviour_logprobs_logged_under_the_choice_set_match_the_trainers(tiny, tokenizer, tmp_path):
    from peft import PeftModel

    model = base_model(tiny)
    rows = direction_rows(8, seed=1)
    for row in rows:
        row["old_logprobs"] = behaviour_logprobs(model, tokenizer, row["prompt"], row["completion"], choices=DIRECTIONS)
    result = train_offline_grpo(
        config(tiny, tmp_path, max_steps=2, beta=0.5, measure_examples=16), rows, progress=False
    )
    first = result.log_history[0]
    assert result.extra["old_logprobs_used"] == 16 and first["behaviour_share"] == 1.0
    # step 1: the policy is the base (LoRA B starts at zero), so ratio, approx KL and KL are trivial
    assert first["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert first["approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)
    assert logged(result, "approx_kl")[-1] > 0  # step 2: the policy has moved
    # the before/after measurement uses the same constrained numbers
    positive = [completion_logprob(model, tokenizer, r["prompt"], "up", choices=DIRECTIONS) for r in rows[::2]]
    assert result.extra["logprobs"]["base"]["positive"] == pytest.approx(sum(positive) / len(positive), abs=1e-4)
    # and so does measuring examples built without the choice set, given it
    policy = PeftModel.from_pretrained(base_model(tiny), result.adapter_path)
    unconstrained = build_examples(rows, tokenizer).examples
    measured = measure_logprobs(policy, unconstrained, 16, choices=ChoiceSet(tokenizer, DIRECTIONS))
    for policy_name in ("base", "trained"):
        assert measured[policy_name] == pytest.approx(result.extra["logprobs"][policy_name], abs=1e-4)


def answer_entropy(tiny: str, adapter_path: str, tokenizer, n_prompts: int = 8) -> float:
    """Mean entropy of the trained policy over the four directions at the answer position."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), adapter_path).eval()
    choices = ChoiceSet(tokenizer, DIRECTIONS)
    total = 0.0
    for i in range(100, 100 + n_prompts):
        tokens = tokenize_completion(tokenizer, prompt(i), "up")
        answer = tokens.assistant_mask.index(1)
        allowed = [(answer, choices.allowed([]))]
        ids = torch.tensor([tokens.input_ids])
        mask = torch.zeros(1, len(tokens.input_ids) - 1)
        mask[0, answer - 1] = 1
        with torch.no_grad():
            logits = shifted_logits(model, ids, torch.ones_like(ids))
            entropy = entropy_from_logits(logits, allowed_tensor([allowed], ids.shape[1])[:, 1:], mask)
        total += float(entropy.sum())
    return total / n_prompts


def test_entropy_bonus_keeps_the_policy_less_certain(tiny, tokenizer, tmp_path):
    rows = direction_rows(8, seed=2)
    plain = train_offline_grpo(config(tiny, tmp_path / "plain", max_steps=8), rows, progress=False)
    bonus = train_offline_grpo(config(tiny, tmp_path / "bonus", max_steps=8, entropy_coef=1.0), rows, progress=False)
    plain_h = answer_entropy(tiny, plain.adapter_path, tokenizer)
    bonus_h = answer_entropy(tiny, bonus.adapter_path, tokenizer)
    print(f"answer entropy after 8 steps (nats, max {math.log(4):.2f}): entropy_coef 0 {plain_h:.3f}, 1 {bonus_h:.3f}")
    assert bonus_h > plain_h + 0.1
    assert logged(bonus, "entropy")[-1] > logged(plain, "entropy")[-1]  # logged with choices, either way

    # full vocabulary: the entropy is computed (and logged) only when it is used
    free = dict(choices=None, max_steps=1)
    assert "entropy" not in train_offline_grpo(config(tiny, tmp_path / "f0", **free), rows, progress=False).metrics
    with_bonus = train_offline_grpo(config(tiny, tmp_path / "f1", entropy_coef=0.1, **free), rows, progress=False)
    assert 0 < with_bonus.metrics["entropy"] <= math.log(len(tokenizer))


def test_target_kl_stops_training_once_the_policy_moves_away(tiny, tokenizer, tmp_path):
    model = base_model(tiny)
    rows = direction_rows(8, seed=3)
    for row in rows:
        row["old_logprobs"] = behaviour_logprobs(model, tokenizer, row["prompt"], row["completion"], choices=DIRECTIONS)
    free = train_offline_grpo(config(tiny, tmp_path / "free", max_steps=3), rows, progress=False)
    assert free.global_step == 3 and free.extra["stopped_early"] is None

    stopped = train_offline_grpo(config(tiny, tmp_path / "kl", max_steps=3, target_kl=1e-4), rows, progress=False)
    kls = logged(stopped, "approx_kl")
    # step 1 runs on the behaviour policy itself (approx_kl 0); step 2 sees the moved policy and stops
    assert stopped.global_step == 2 and len(kls) == 2
    assert stopped.extra["stopped_early"] == {"step": 2, "approx_kl": pytest.approx(kls[-1])}
    assert kls[0] < 1e-4 < kls[-1]


def test_skip_zero_advantage_leaves_rows_without_signal_out(tiny, tmp_path):
    rows = direction_rows(8, seed=4)
    rows += [dict(row, advantage=0.0) for row in direction_rows(4, seed=5)]  # 8 rows with equal rewards
    skipped = train_offline_grpo(config(tiny, tmp_path / "skip", max_steps=None, epochs=1), rows, progress=False)
    kept = train_offline_grpo(
        config(tiny, tmp_path / "keep", max_steps=None, epochs=1, skip_zero_advantage=False), rows, progress=False
    )
    assert skipped.extra["zero_advantage"] == kept.extra["zero_advantage"] == 8
    assert skipped.extra["zero_advantage_skipped"] == 8 and kept.extra["zero_advantage_skipped"] == 0
    assert (skipped.n_rows, kept.n_rows) == (16, 24)
    assert (skipped.global_step, kept.global_step) == (2, 3)  # one epoch, batches of 8
    assert kept.n_desirable + kept.n_undesirable == 16

    for skip in (True, False):
        zero = [dict(row, advantage=0.0) for row in rows]
        with pytest.raises(TrainError, match=r"every advantage is 0 \(24 completions\): nothing to learn") as refused:
            train_offline_grpo(config(tiny, tmp_path / "zero", skip_zero_advantage=skip), zero, progress=False)
        assert "same reward" in refused.value.hint


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"choices": "up"}, "choices must be a list of strings"),
        ({"choices": ["up"]}, "at least two non-empty strings"),
        ({"choices": ["up", "up"]}, "choices must be distinct"),
        ({"choices": ["up", "down"], "train_tool_tokens": True}, "cannot be combined"),
        ({"entropy_coef": -0.1}, "entropy_coef must be a finite number >= 0"),
        ({"target_kl": 0.0}, "target_kl must be a finite number > 0"),
        ({"skip_zero_advantage": "no"}, "skip_zero_advantage must be true or false"),
    ],
)
def test_bad_control_values_are_refused(overrides, message):
    with pytest.raises(TrainConfigError, match=message):
        OfflineGRPOTrainConfig(model="m", output_dir="o", **overrides)
