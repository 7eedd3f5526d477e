"""KTO checkpoints and resuming: a run saving every 2 steps leaves checkpoint-2 and checkpoint-4;
``resume_from_checkpoint=True`` continues from the latest to a larger ``max_steps``; a bad
checkpoint path is a TrainConfigError; ``latest_checkpoint`` picks the largest N."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from agent_rl_plugin.train import (  # noqa: E402
    KTOTrainConfig,
    TrainConfigError,
    build_tiny_model,
    latest_checkpoint,
    train_kto,
)
from agent_rl_plugin.train.common import checkpoint_to_resume  # noqa: E402

GOOD = ["yes", "sure", "good"]
BAD = ["no", "never", "bad"]


def kto_rows(n: int = 16, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "prompt": f"Question {rng.randint(0, 99)}?",
            "completion": " " + " ".join(rng.choice(GOOD if i % 2 == 0 else BAD) for _ in range(3)),
            "label": i % 2 == 0,
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", hidden_size=32, vocab_texts=[" ".join(GOOD + BAD)])


@pytest.fixture(scope="module")
def dataset():
    from datasets import Dataset

    return Dataset.from_list(kto_rows())


def config(tiny: str, out: Path, **kwargs) -> KTOTrainConfig:
    defaults = dict(model=tiny, output_dir=str(out), batch_size=4, lora_r=4, learning_rate=1e-3, use_cpu=True,
                    report_to=[], max_length=64)
    defaults.update(kwargs)
    return KTOTrainConfig(**defaults)


def test_checkpoints_then_resume_from_the_latest(tiny, dataset, tmp_path):
    out = tmp_path / "run"
    first = train_kto(config(tiny, out, save_strategy="steps", save_steps=2, max_steps=4), dataset, progress=False)
    assert first.global_step == 4 and first.resumed_from is None
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert latest_checkpoint(out) == str(out / "checkpoint-4")
    assert Path(first.adapter_path, "adapter_config.json").is_file()

    second = train_kto(
        config(tiny, out, save_strategy="steps", save_steps=2, max_steps=6, resume_from_checkpoint=True),
        dataset,
        progress=False,
    )
    assert second.global_step == 6
    assert second.resumed_from is not None and second.resumed_from.endswith("checkpoint-4")
    # the history of steps 1-4 comes back from the checkpoint as logged; steps 5 and 6 are new
    losses = {entry["step"]: entry["loss"] for entry in second.log_history if "loss" in entry}
    first_losses = {entry["step"]: entry["loss"] for entry in first.log_history if "loss" in entry}
    assert sorted(losses) == [1, 2, 3, 4, 5, 6]
    assert {step: losses[step] for step in first_losses} == first_losses
    assert (out / "checkpoint-6").is_dir()
    # an explicit checkpoint directory works too (resolution only; no training)
    explicit = config(tiny, out, resume_from_checkpoint=str(out / "checkpoint-2"))
    assert checkpoint_to_resume(explicit) == str(out / "checkpoint-2")
    # the string "latest" means True
    assert config(tiny, out, resume_from_checkpoint="latest").resume_from_checkpoint is True


def test_bad_checkpoint_paths_are_config_errors(tiny, dataset, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(TrainConfigError, match="is not a checkpoint"):
        train_kto(config(tiny, out, max_steps=1, resume_from_checkpoint=str(tmp_path / "missing")), dataset, progress=False)
    not_a_checkpoint = tmp_path / "checkpoint-9"
    not_a_checkpoint.mkdir()
    with pytest.raises(TrainConfigError, match="trainer_state.json"):
        train_kto(config(tiny, out, max_steps=1, resume_from_checkpoint=str(not_a_checkpoint)), dataset, progress=False)
    with pytest.raises(TrainConfigError, match="no checkpoint-N directory"):
        train_kto(config(tiny, tmp_path / "fresh", max_steps=1, resume_from_checkpoint=True), dataset, progress=False)
    assert not (out / "adapter").exists() and not (tmp_path / "fresh" / "adapter").exists()


def test_latest_checkpoint_picks_the_largest_number(tmp_path):
    assert latest_checkpoint(tmp_path / "missing") is None
    assert latest_checkpoint(tmp_path) is None
    for name in ("checkpoint-2", "checkpoint-10", "checkpoint-9", "checkpoint-x", "other-100"):
        (tmp_path / name).mkdir()
    (tmp_path / "checkpoint-200").write_text("a file, not a checkpoint")
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-10")
