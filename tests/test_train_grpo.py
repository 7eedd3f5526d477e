"""Online GRPO with LoRA learns (the training issue's learning test): a tiny Qwen2 sampled by
TRL's ``GRPOTrainer`` and rewarded by a reward *plugin* (wrapped by ``reward_functions``) for
the share of the letter "e" in its completion at least doubles its mean reward between the
first and the last 20% of the steps; only LoRA weights move. Also: resuming from a checkpoint,
a failing plugin not stopping training, and the errors raised before any model is loaded."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.rewards import reward  # noqa: E402
from agent_rl_plugin.train import (  # noqa: E402
    GRPOTrainConfig,
    TrainConfigError,
    TrainError,
    build_tiny_model,
    reward_functions,
    train_grpo,
)

QUESTIONS = ["Say something.", "What is the weather like today?", "Tell me about apples.", "Write a word."]


@reward(name="letter_e")
def letter_e(rollout):
    """Share of the letter "e" in the completion: dense, so a tiny model can climb it."""
    text = rollout.final_output or ""
    return text.count("e") / len(text) if text else 0.0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", vocab_texts=["every evening the green tree sees three bees"])


def _prompts(n: int = len(QUESTIONS)) -> list[dict]:
    return [
        {"prompt": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}], "task_id": f"t{i}", "ground_truth": "15.0"}
        for i in range(n)
    ]


def _config(tiny, tmp_path, **overrides) -> GRPOTrainConfig:
    values = dict(
        model=tiny, output_dir=str(tmp_path / "grpo"), learning_rate=3e-2, max_steps=50, batch_size=8,
        gradient_accumulation_steps=1, num_generations=8, max_completion_length=16, lora_r=8, lora_alpha=16,
        seed=0, use_cpu=True, bf16=False, report_to=[],
    )
    values.update(overrides)
    return GRPOTrainConfig(**values)


def _mean(values):
    return sum(values) / len(values)


def test_online_grpo_learns_a_reward_plugin(tiny, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    result = train_grpo(_config(tiny, tmp_path), _prompts(), reward_functions([letter_e]), progress=False)
    seconds = time.perf_counter() - started
    curve = result.extra["reward_curve"]
    assert result.global_step == 50 and len(curve) == 50 and result.extra["reward_steps"] == list(range(1, 51))
    fifth = len(curve) // 5
    first, last = _mean(curve[:fifth]), _mean(curve[-fifth:])
    print(f"mean reward first 20% {first:.3f}, last 20% {last:.3f} ({last / first:.1f}x) in {seconds:.1f} s")
    assert last >= 2 * first

    assert result.method == "grpo" and result.n_rows == 4
    assert result.extra["reward_names"] == ["letter_e"] and result.extra["reward_weights"] == [1.0]
    assert result.extra["reward_curves"]["letter_e"] == pytest.approx(curve)  # one function, weight 1
    assert result.extra["reward_stats"]["letter_e"]["scored"] == 50 * 8
    assert "rewards/letter_e/mean" in result.metrics and "train_loss" in result.metrics

    base = AutoModelForCausalLM.from_pretrained(tiny)
    base_before = {n: p.detach().clone() for n, p in base.named_parameters()}
    trained = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), result.adapter_path)
    lora_b = {n: p for n, p in trained.named_parameters() if "lora_B" in n}
    assert lora_b and any(p.abs().sum() > 0 for p in lora_b.values())  # B starts at zero: LoRA moved
    for name, param in trained.get_base_model().named_parameters():
        if "lora_" in name:
            continue
        assert torch.equal(param.detach(), base_before[name.replace(".base_layer", "")]), name


def test_resume_from_a_checkpoint(tiny, tmp_path):
    funcs = reward_functions([letter_e])
    first = train_grpo(_config(tiny, tmp_path, max_steps=4, save_strategy="steps", save_steps=2), _prompts(), funcs,
                       progress=False)
    assert first.global_step == 4 and first.resumed_from is None
    resumed = train_grpo(_config(tiny, tmp_path, max_steps=6, resume_from_checkpoint=True), _prompts(), funcs,
                         progress=False)
    assert resumed.resumed_from.endswith("checkpoint-4")
    assert resumed.global_step == 6 and resumed.extra["reward_steps"][-2:] == [5, 6]
    # resume latest with no checkpoint yet (a first run) starts fresh, with a warning
    with pytest.warns(UserWarning, match="starts fresh"):
        fresh = train_grpo(_config(tiny, tmp_path / "fresh", max_steps=1, resume_from_checkpoint=True), _prompts(),
                           funcs, progress=False)
    assert fresh.resumed_from is None and fresh.global_step == 1


def test_a_failing_plugin_and_builtin_plugins_do_not_stop_training(tiny, tmp_path, plugin_manager):
    @reward(name="boom")
    def boom(rollout):
        raise RuntimeError("broken plugin")

    funcs = reward_functions(["task_completion", boom, letter_e], plugin_manager=plugin_manager)
    result = train_grpo(_config(tiny, tmp_path, max_steps=2), _prompts(), funcs, progress=False)
    assert result.global_step == 2
    assert result.extra["reward_names"] == ["task_completion", "boom", "letter_e"]
    assert result.extra["reward_weights"] == [1.5, 1.0, 1.0]
    stats = result.extra["reward_stats"]
    assert stats["boom"]["errors"] == 16 and "RuntimeError: broken plugin" in stats["boom"]["first_error"]
    assert stats["task_completion"]["scored"] == 16 and stats["letter_e"]["scored"] == 16


def test_errors_are_clear_before_the_model_loads(tmp_path):
    config = _config("no-such-model", tmp_path)  # never loaded: every check comes first
    funcs = reward_functions([letter_e])
    with pytest.raises(TrainError, match="no prompts"):
        train_grpo(config, [], funcs)
    with pytest.raises(TrainError, match="needs a 'prompt' column"):
        train_grpo(config, [{"question": "hi"}], funcs)
    with pytest.raises(TrainError, match="no reward functions"):
        train_grpo(config, _prompts(), [])
    with pytest.raises(TrainError, match="is not a reward function"):
        train_grpo(config, _prompts(), ["letter_e"])
    with pytest.raises(TrainConfigError, match=r"batch_size \(6\) must be a multiple of num_generations \(4\)"):
        _config("m", tmp_path, batch_size=6, num_generations=4)
    config.batch_size = 6  # changed after validation: train_grpo checks TRL's rule itself
    with pytest.raises(TrainConfigError, match=r"\(6 x 1 = 6\) must be a multiple of num_generations \(8\)"):
        train_grpo(config, _prompts(), funcs)
    config.batch_size, config.gradient_accumulation_steps = 8, 2
    with pytest.raises(TrainError, match="1 prompt\\(s\\), but one generation batch of 16 completions needs 2"):
        train_grpo(config, _prompts(1), funcs)
    config.gradient_accumulation_steps, config.reward_weights = 1, [1.0, 2.0]
    with pytest.raises(TrainConfigError, match="reward_weights has 2 weights for 1 reward functions"):
        train_grpo(config, _prompts(), funcs)
    with pytest.raises(TypeError, match="GRPOTrainConfig"):
        train_grpo(object(), _prompts(), funcs)
