"""KTO checkpoints and resuming: a run saving every 2 steps leaves checkpoint-2 and checkpoint-4;
``resume_from_checkpoint=True`` continues from the latest to a larger ``max_steps`` (with none
yet, a first run, it starts fresh with a warning); a bad checkpoint path is a TrainConfigError;
``latest_checkpoint`` picks the largest N.

Resuming must really restore the checkpoint, not just retrain from the same seed (which would
reproduce the same numbers): the checkpoint's adapter weights are overwritten with values no
training run produces, and the resumed run must start from exactly those (zero more steps: the
saved adapter equals them; one more step: it stays within one optimiser step of them), with the
optimiser and scheduler counters and the logged history carried on from the checkpoint's step."""

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


def _adapter_weights(directory: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(directory / "adapter_model.safetensors"))


def _plant_weights(checkpoint: Path) -> dict:
    """Overwrite the checkpoint's adapter weights with seeded values of the same shapes (far from
    anything a fresh LoRA init or 4 steps at lr 1e-3 produce); return them."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(1234)
    planted = {name: (torch.rand(t.shape, generator=generator, dtype=torch.float32) * 0.4 + 0.3).to(t.dtype)
               for name, t in _adapter_weights(checkpoint).items()}
    save_file(planted, str(checkpoint / "adapter_model.safetensors"), metadata={"format": "pt"})
    return planted


def _optimizer_steps(checkpoint: Path) -> set[int]:
    import torch

    state = torch.load(checkpoint / "optimizer.pt", map_location="cpu", weights_only=False)["state"]
    return {int(s["step"]) for s in state.values()}


def _scheduler_epoch(checkpoint: Path) -> int:
    import torch

    return int(torch.load(checkpoint / "scheduler.pt", map_location="cpu", weights_only=False)["last_epoch"])


def test_resume_restores_weights_optimizer_and_step(tiny, dataset, tmp_path):
    import json

    import torch

    out = tmp_path / "run"
    first = train_kto(config(tiny, out, save_strategy="steps", save_steps=2, max_steps=6), dataset, progress=False)
    checkpoint = out / "checkpoint-4"  # as if the run had died after step 4
    assert first.global_step == 6 and _optimizer_steps(checkpoint) == {4} and _scheduler_epoch(checkpoint) == 4
    planted = _plant_weights(checkpoint)
    state_path = checkpoint / "trainer_state.json"
    state = json.loads(state_path.read_text())
    marked = next(entry for entry in state["log_history"] if entry.get("step") == 1 and "loss" in entry)
    marked["loss"] = 123.0  # a value no run logs: it can only come back from this file
    state_path.write_text(json.dumps(state))

    # zero more steps: the adapter saved at the end is exactly the checkpoint's
    same = train_kto(config(tiny, out, max_steps=4, resume_from_checkpoint=str(checkpoint)), dataset, progress=False)
    assert same.resumed_from == str(checkpoint) and same.global_step == 4
    restored = _adapter_weights(Path(same.adapter_path))
    assert restored.keys() == planted.keys()
    not_restored = [name for name, tensor in planted.items() if not torch.equal(restored[name], tensor)]
    assert not_restored == [], f"weights not restored from the checkpoint: {not_restored[:3]}"

    # the rest of the run: it goes on from the checkpoint's weights, optimiser state and step number
    # (steps 5 and 6; checkpoint-6 of the first run moved away, so the one read below is new)
    (out / "checkpoint-6").rename(out / "first-checkpoint-6")
    rest = train_kto(config(tiny, out, save_strategy="steps", save_steps=2, max_steps=6,
                            resume_from_checkpoint=str(checkpoint)), dataset, progress=False)
    assert rest.resumed_from == str(checkpoint) and rest.global_step == 6
    stepped = _adapter_weights(out / "checkpoint-6")
    moved = max(float((stepped[name].float() - tensor.float()).abs().max()) for name, tensor in planted.items())
    assert 0 < moved < 0.02, f"two steps at lr <= 1e-3 from the planted weights moved them by {moved}"
    assert _optimizer_steps(out / "checkpoint-6") == {6}, "the optimizer state was not restored"
    assert _scheduler_epoch(out / "checkpoint-6") == 6, "the LR scheduler state was not restored"
    logged = {entry["step"]: entry for entry in rest.log_history if "loss" in entry}
    before = {entry["step"]: entry for entry in first.log_history if "loss" in entry}
    assert sorted(logged) == [1, 2, 3, 4, 5, 6]
    assert logged[1]["loss"] == 123.0, "the log history did not come from the checkpoint"
    assert [logged[s]["learning_rate"] for s in (5, 6)] == [before[s]["learning_rate"] for s in (5, 6)]
    assert logged[5]["loss"] != before[5]["loss"], "step 5 did not start from the checkpoint's (planted) weights"


def test_bad_checkpoint_paths_are_config_errors(tiny, dataset, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(TrainConfigError, match="is not a checkpoint"):
        train_kto(config(tiny, out, max_steps=1, resume_from_checkpoint=str(tmp_path / "missing")), dataset, progress=False)
    not_a_checkpoint = tmp_path / "checkpoint-9"
    not_a_checkpoint.mkdir()
    with pytest.raises(TrainConfigError, match="trainer_state.json"):
        train_kto(config(tiny, out, max_steps=1, resume_from_checkpoint=str(not_a_checkpoint)), dataset, progress=False)
    assert not (out / "adapter").exists()


def test_resume_latest_with_no_checkpoint_yet_starts_fresh_with_a_note(tiny, dataset, tmp_path):
    fresh = config(tiny, tmp_path / "fresh", max_steps=1, resume_from_checkpoint=True)
    with pytest.warns(UserWarning, match="no checkpoint under .* starts fresh"):
        result = train_kto(fresh, dataset, progress=False)
    assert result.resumed_from is None and result.global_step == 1
    assert (tmp_path / "fresh" / "adapter").is_dir()


def test_latest_checkpoint_picks_the_largest_number(tmp_path):
    assert latest_checkpoint(tmp_path / "missing") is None
    assert latest_checkpoint(tmp_path) is None
    for name in ("checkpoint-2", "checkpoint-10", "checkpoint-9", "checkpoint-x", "other-100"):
        (tmp_path / name).mkdir()
    (tmp_path / "checkpoint-200").write_text("a file, not a checkpoint")
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-10")
