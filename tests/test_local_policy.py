"""The local policy an agent calls while a loop trains it: constrained answers, behaviour
log-probs equal to what the trainer computes, adapters swapped without a restart."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agent_rl_plugin.policy import LocalPolicy, PolicyError  # noqa: E402
from agent_rl_plugin.train.choices import ChoiceError, ChoiceSet, masked_logprob  # noqa: E402
from agent_rl_plugin.train.tiny import build_tiny_model  # noqa: E402

ACTIONS = ["up", "down", "left", "right"]
MESSAGES = [{"role": "user", "content": "You are at row 2, column 3. The goal is at row 0, column 0."}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("policy") / "tiny", vocab_texts=["\n".join(ACTIONS)] * 20)


@pytest.fixture(scope="module")
def policy(model_dir):
    return LocalPolicy(model_dir, seed=0)


def full_logits(policy, prompt, generated):
    ids = torch.tensor([prompt + generated])
    with torch.no_grad():
        return policy._model(input_ids=ids).logits[0, -1].float()


def test_answers_are_always_one_of_the_choices(policy):
    seen = {policy.generate(MESSAGES, choices=ACTIONS).text for _ in range(60)}
    assert seen <= set(ACTIONS)
    assert len(seen) >= 3  # a fresh tiny model explores


def test_logged_logprobs_are_the_constrained_ones_the_trainer_computes(policy):
    answer = policy.generate(MESSAGES, choices=ACTIONS)
    choices = policy.choice_set(ACTIONS)
    assert answer.token_ids == list(choices.sequences[ACTIONS.index(answer.text)])
    allowed = choices.align(answer.token_ids)
    for i, (token, logged) in enumerate(zip(answer.token_ids, answer.logprobs)):
        logits = full_logits(policy, answer.prompt_ids, answer.token_ids[:i])
        assert logged == pytest.approx(masked_logprob(logits, token, allowed[i]), abs=1e-5)
    # the end-of-turn token after a one-token action is forced: log-prob 0, not the full-vocab one
    assert answer.logprobs[-1] == 0.0
    full = torch.log_softmax(full_logits(policy, answer.prompt_ids, answer.token_ids[:1]), dim=0)
    assert full[answer.token_ids[-1]] < -0.01


def test_sampling_follows_the_constrained_distribution(policy):
    first = policy.choice_set(ACTIONS).allowed([])
    logits = full_logits(policy, policy.prompt_ids(MESSAGES), [])
    expected = {t: math.exp(masked_logprob(logits, t, first)) for t in first}
    policy.reseed(123)
    counts = {t: 0 for t in first}
    for _ in range(400):
        counts[policy.generate(MESSAGES, choices=ACTIONS).token_ids[0]] += 1
    for token, p in expected.items():
        assert abs(counts[token] / 400 - p) < 0.08


def test_greedy_takes_the_most_likely_choice_and_reseeding_repeats_samples(policy):
    first = policy.choice_set(ACTIONS).allowed([])
    logits = full_logits(policy, policy.prompt_ids(MESSAGES), [])
    best = max(first, key=lambda t: float(logits[t]))
    assert policy.generate(MESSAGES, choices=ACTIONS, greedy=True).token_ids[0] == best
    policy.reseed(7)
    a = [policy.generate(MESSAGES, choices=ACTIONS).text for _ in range(10)]
    policy.reseed(7)
    assert [policy.generate(MESSAGES, choices=ACTIONS).text for _ in range(10)] == a


def test_free_text_answers_log_full_vocabulary_logprobs(policy):
    answer = policy.generate(MESSAGES, max_new_tokens=5, greedy=True)
    assert len(answer.token_ids) == len(answer.logprobs) <= 5
    logits = full_logits(policy, answer.prompt_ids, [])
    assert answer.logprobs[0] == pytest.approx(float(torch.log_softmax(logits, 0)[answer.token_ids[0]]), abs=1e-5)


def test_a_new_adapter_changes_answers_without_a_restart_and_none_restores_the_base(model_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    def save_adapter(path, scale):
        model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(model_dir),
            LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        )
        with torch.no_grad():
            for name, weight in model.named_parameters():
                if "lora_B" in name:
                    weight.normal_(0, scale)
        model.save_pretrained(path)
        return str(path)

    policy = LocalPolicy(model_dir)
    prompt = policy.prompt_ids(MESSAGES)
    base = full_logits(policy, prompt, [])
    first = save_adapter(tmp_path / "a" / "adapter", 1.0)
    version = policy.load_adapter(first)
    assert version == "a/adapter#1" and policy.version == version
    after_first = full_logits(policy, prompt, [])
    assert not torch.allclose(base, after_first, atol=1e-3)
    second = save_adapter(tmp_path / "b" / "adapter", 2.0)
    assert policy.load_adapter(second) == "b/adapter#2"
    after_second = full_logits(policy, prompt, [])
    assert not torch.allclose(after_first, after_second, atol=1e-3)
    # the swap loads the second adapter's weights, not a mix with the first
    fresh = LocalPolicy(model_dir, adapter=second)
    assert torch.allclose(full_logits(fresh, prompt, []), after_second, atol=1e-5)
    assert policy.generate(MESSAGES, choices=ACTIONS).version == "b/adapter#2"
    assert policy.load_adapter(None) == "base"
    assert torch.allclose(full_logits(policy, prompt, []), base, atol=1e-5)


def test_bad_input_gets_a_clear_error(model_dir, policy, tmp_path):
    with pytest.raises(PolicyError, match="no LoRA adapter"):
        policy.load_adapter(tmp_path)
    with pytest.raises(PolicyError, match="non-empty list"):
        policy.generate([])
    with pytest.raises(PolicyError, match="temperature"):
        policy.generate(MESSAGES, temperature=0)
    with pytest.raises(PolicyError, match="cannot load model"):
        LocalPolicy(tmp_path / "missing")
    with pytest.raises(ChoiceError, match="distinct"):
        ChoiceSet(policy.tokenizer, ["up", "up"])
    with pytest.raises(ChoiceError, match="non-empty list"):
        ChoiceSet(policy.tokenizer, "up")


def test_a_broken_adapter_leaves_the_base_model_not_a_half_swap(model_dir, tmp_path):
    broken = tmp_path / "broken" / "adapter"
    broken.mkdir(parents=True)
    (broken / "adapter_config.json").write_text('{"peft_type": "LORA", "r": "not a number"}')
    policy = LocalPolicy(model_dir)
    with pytest.raises(PolicyError, match="cannot load the adapter") as info:
        policy.load_adapter(broken)
    assert "base model" in info.value.hint
    assert policy.version == "base" and policy.adapter_path is None
    assert policy.generate(MESSAGES, choices=ACTIONS).version == "base"


def test_choice_sets_kept_are_bounded(policy):
    from agent_rl_plugin.policy.local import CHOICE_SETS_KEPT

    for i in range(CHOICE_SETS_KEPT + 10):
        policy.choice_set(["up", f"down{i}"])
    assert len(policy._choice_sets) == CHOICE_SETS_KEPT


def test_a_second_adapter_of_another_scaling_or_with_fewer_weights_is_loaded_whole(model_dir, tmp_path):
    """The in-place swap is taken only for an adapter with the same settings and the same
    weights; anything else (another alpha per module, fewer modules) is loaded from scratch, so
    the answers are exactly the new adapter's."""
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    def saved(name, **settings):
        model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(model_dir),
            LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], **settings),
        )
        with torch.no_grad():
            for weight_name, weight in model.named_parameters():
                if "lora_B" in weight_name:
                    weight.normal_(0, 1.0)
        path = tmp_path / name / "adapter"
        model.save_pretrained(path)
        return path

    first = saved("a")
    rescaled = saved("b", alpha_pattern={"q_proj": 64})
    fewer = saved("c")
    weights = load_file(str(fewer / "adapter_model.safetensors"))
    save_file({k: v for k, v in weights.items() if "layers.1." not in k}, str(fewer / "adapter_model.safetensors"))
    for second in (rescaled, fewer):
        policy = LocalPolicy(model_dir, adapter=first)
        policy.load_adapter(second)
        fresh = LocalPolicy(model_dir, adapter=second)
        prompt = policy.prompt_ids(MESSAGES)
        assert torch.allclose(full_logits(policy, prompt, []), full_logits(fresh, prompt, []), atol=1e-5), second
