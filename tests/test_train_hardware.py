"""Hardware profiles: chosen from given ``Hardware`` values (CPU, small / medium / large GPU),
explicit config values kept and listed in ``overridden``, GRPO batches whole groups, KTO batches
of at least 2, ``describe()`` names the values, and detection on this machine (no GPU)."""

from __future__ import annotations

import pytest

from agent_rl_plugin.train import GRPOTrainConfig, KTOTrainConfig, OfflineGRPOTrainConfig
from agent_rl_plugin.train.hardware import (
    PROFILE_FIELDS,
    Hardware,
    apply_hardware_profile,
    choose_profile,
    detect_hardware,
    method_of,
)

CPU = Hardware(cpu_cores=2, ram_gib=16.0)
SMALL = Hardware(cpu_cores=8, ram_gib=32.0, gpu_name="T4", gpu_memory_gib=15.0, gpu_count=1, bf16=False)
MEDIUM = Hardware(cpu_cores=16, ram_gib=64.0, gpu_name="A10G", gpu_memory_gib=24.0, gpu_count=1, bf16=True)
LARGE = Hardware(cpu_cores=32, ram_gib=256.0, gpu_name="H100", gpu_memory_gib=80.0, gpu_count=2, bf16=True)


def kto(**kwargs) -> KTOTrainConfig:
    return KTOTrainConfig(model="some/model", output_dir="out", **kwargs)


@pytest.mark.parametrize(
    "hardware, name, batch, accum, rank, use_cpu, bf16",
    [
        (CPU, "cpu", 4, 1, 8, True, False),
        (SMALL, "gpu-small", 4, 4, 16, False, False),
        (MEDIUM, "gpu-medium", 8, 2, 32, False, True),
        (LARGE, "gpu-large", 16, 1, 64, False, True),
    ],
)
def test_profile_from_hardware(hardware, name, batch, accum, rank, use_cpu, bf16):
    config = kto()
    profile = apply_hardware_profile(config, hardware)
    assert profile.name == name
    got = {field: getattr(config, field) for field in PROFILE_FIELDS}
    assert got == {
        "batch_size": batch, "gradient_accumulation_steps": accum, "lora_r": rank, "use_cpu": use_cpu, "bf16": bf16,
    }
    assert {field: getattr(profile, field) for field in PROFILE_FIELDS} == got
    assert profile.overridden == []
    assert config.resolved_lora_alpha() == 2 * rank
    config.trainer_arguments()  # every hardware field is resolved


def test_profile_boundaries():
    just_16 = Hardware(cpu_cores=4, ram_gib=8, gpu_name="X", gpu_memory_gib=16.0, gpu_count=1)
    just_40 = Hardware(cpu_cores=4, ram_gib=8, gpu_name="X", gpu_memory_gib=40.0, gpu_count=1)
    assert choose_profile(just_16).name == "gpu-medium"
    assert choose_profile(just_40).name == "gpu-large"
    unknown_memory = Hardware(cpu_cores=4, ram_gib=8, gpu_name="X", gpu_count=1)
    assert choose_profile(unknown_memory).name == "gpu-small"


def test_explicit_values_are_kept_and_listed():
    config = kto(batch_size=2, lora_r=4, bf16=False)
    profile = apply_hardware_profile(config, LARGE)
    assert (config.batch_size, config.lora_r, config.bf16) == (2, 4, False)
    assert config.gradient_accumulation_steps == 1 and config.use_cpu is False  # filled from the profile
    assert sorted(profile.overridden) == ["batch_size", "bf16", "lora_r"]
    assert (profile.batch_size, profile.lora_r, profile.bf16) == (2, 4, False)
    # applying again changes nothing
    again = apply_hardware_profile(config, LARGE)
    assert (config.batch_size, config.lora_r, config.bf16, config.gradient_accumulation_steps) == (2, 4, False, 1)
    assert sorted(again.overridden) == ["batch_size", "bf16", "lora_r"]


def test_use_cpu_on_a_gpu_machine_gets_the_cpu_profile_in_fp32():
    config = kto(use_cpu=True)
    profile = apply_hardware_profile(config, LARGE)
    assert profile.name == "cpu"
    assert (config.use_cpu, config.bf16, config.batch_size, config.lora_r) == (True, False, 4, 8)


@pytest.mark.parametrize("generations, hardware, expected", [(8, CPU, 8), (3, CPU, 6), (2, MEDIUM, 8), (5, LARGE, 20)])
def test_grpo_batch_is_a_multiple_of_num_generations(generations, hardware, expected):
    config = GRPOTrainConfig(model="m", output_dir="o", num_generations=generations)
    profile = apply_hardware_profile(config, hardware)
    assert config.batch_size == expected == profile.batch_size
    assert config.batch_size % generations == 0


def test_kto_batch_is_at_least_two():
    for hardware in (CPU, SMALL, MEDIUM, LARGE):
        assert choose_profile(hardware, "kto").batch_size >= 2
        config = kto()
        apply_hardware_profile(config, hardware)
        assert config.batch_size >= 2


def test_method_of_configs_and_subclasses():
    class MyGRPO(GRPOTrainConfig):
        pass

    assert method_of(kto()) == "kto"
    assert method_of(GRPOTrainConfig(model="m", output_dir="o")) == "grpo"
    assert method_of(MyGRPO(model="m", output_dir="o")) == "grpo"
    assert method_of(OfflineGRPOTrainConfig(model="m", output_dir="o")) == "offline"
    config = MyGRPO(model="m", output_dir="o", num_generations=3)
    apply_hardware_profile(config, CPU)
    assert config.batch_size == 6


def test_describe_mentions_the_values():
    config = kto(lora_r=12)
    text = apply_hardware_profile(config, MEDIUM).describe()
    for piece in ("gpu-medium", "16 cores", "64.0 GiB RAM", "A10G", "24 GiB", "batch 8", "accum 2", "LoRA r 12", "bf16", "GPU",
                  "set by you: lora_r"):
        assert piece in text, (piece, text)
    text = apply_hardware_profile(kto(), CPU).describe()
    assert "cpu" in text and "no GPU" in text and "fp32 on CPU" in text and "batch 4" in text and "set by you" not in text
    odd = choose_profile(Hardware(cpu_cores=1, ram_gib=1.0, gpu_name="X", gpu_count=1)).describe()
    assert "1x X" in odd


def test_to_dict_is_plain():
    data = apply_hardware_profile(kto(), CPU).to_dict()
    assert data["name"] == "cpu" and data["hardware"]["cpu_cores"] == 2 and data["overridden"] == []


def test_detect_hardware_here():
    hardware = detect_hardware()
    assert hardware.cpu_cores >= 1
    assert hardware.ram_gib > 0
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        has_gpu = False
    if has_gpu:  # pragma: no cover - GPU machines
        assert hardware.gpu_name and hardware.gpu_memory_gib > 0 and hardware.gpu_count >= 1
    else:
        assert hardware.gpu_name is None and hardware.gpu_memory_gib is None and hardware.gpu_count == 0
        profile = apply_hardware_profile(kto())
        assert profile.name == "cpu" and profile.use_cpu is True and profile.bf16 is False
