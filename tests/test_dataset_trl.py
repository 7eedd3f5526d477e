"""The datasets load in TRL: KTOTrainer trains on the conversational KTO rows (tool calls and
tool results included) and GRPOTrainer on the prompts of the GRPO groups, with a tiny Qwen2
built offline (tests/tiny_models.py)."""

from __future__ import annotations

import pytest

from agent_rl_plugin.data import build_grpo_dataset, build_kto_dataset
from agent_rl_plugin.data.synthetic import synthesize_store

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2")


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.duckdb"
    synthesize_store(path, rollouts=8, llm_calls=2, group_size=4, n_tasks=2)
    return path


def _load(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_kto_trainer_runs_on_the_kto_rows(store, tiny, tmp_path):
    from trl import KTOConfig, KTOTrainer

    dataset = build_kto_dataset(store)
    assert set(dataset["label"]) == {True, False}
    assert any(m["tool_calls"] for m in dataset[0]["completion"])
    model, tokenizer = _load(tiny)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = KTOConfig(
        output_dir=str(tmp_path / "kto"), per_device_train_batch_size=2, max_steps=2, use_cpu=True,
        report_to=[], save_strategy="no", logging_steps=1, learning_rate=1e-2,
    )
    trainer = KTOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    assert trainer.state.global_step == 2
    assert any(not p.detach().equal(before[n]) for n, p in model.named_parameters())


def test_grpo_trainer_runs_on_the_group_prompts(store, tiny, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    groups = build_grpo_dataset(store)
    prompts = groups.select_columns(["prompt"])
    assert prompts.num_rows == 2

    def share_of_e(completions, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [t.count("e") / max(len(t), 1) for t in texts]

    model, tokenizer = _load(tiny)
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=2, num_generations=2,
        max_completion_length=8, max_steps=1, use_cpu=True, report_to=[], save_strategy="no", logging_steps=1,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=share_of_e, args=args, train_dataset=prompts, processing_class=tokenizer
    )
    trainer.train()
    assert trainer.state.global_step == 1
