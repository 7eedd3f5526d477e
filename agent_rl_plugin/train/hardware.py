"""Hardware detection and training profiles (the idea of ToolBoxV2's hardware profiles).

:func:`detect_hardware` reads the machine (CPU cores available to this process, RAM, the CUDA
GPU with its memory and bf16 support); :func:`choose_profile` maps it to the values of the
machine-dependent training fields; :func:`apply_hardware_profile` fills the fields of a config
that were left ``None`` and keeps every value given explicitly. Trainers call it when they start
and print :meth:`HardwareProfile.describe`.

Profiles (per device):

==========  =========================  =====  =====  ======  =========
profile     when                       batch  accum  LoRA r  precision
==========  =========================  =====  =====  ======  =========
cpu         no CUDA GPU                4      1      8       fp32
gpu-small   GPU < 16 GiB               4      4      16      bf16/fp32
gpu-medium  GPU 16-40 GiB              8      2      32      bf16/fp32
gpu-large   GPU >= 40 GiB              16     1      64      bf16/fp32
==========  =========================  =====  =====  ======  =========

Under a distributed launcher (``accelerate launch``, ``torchrun``) the profile is per process:
``Hardware.world_size`` counts the processes (``WORLD_SIZE``), the per-device batch stays, and
the effective batch of an optimizer step is ``batch x accumulation x processes`` (``describe()``
says so when there is more than one process).

bf16 is used where the GPU supports it (Ampere and newer), else fp32 (fp16 with LoRA needs loss
scaling that TRL leaves to the user). A config with ``use_cpu=True`` gets the ``cpu`` profile
(fp32) whatever GPU there is; a GPU of unknown memory gets ``gpu-small``. For online GRPO the
batch is rounded up to a multiple of ``num_generations`` (TRL fills batches with whole groups).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

#: The machine-dependent config fields a profile fills.
PROFILE_FIELDS = ("batch_size", "gradient_accumulation_steps", "lora_r", "use_cpu", "bf16")


@dataclass(frozen=True)
class Hardware:
    """What :func:`detect_hardware` found."""

    cpu_cores: int
    ram_gib: float
    gpu_name: Optional[str] = None
    gpu_memory_gib: Optional[float] = None
    gpu_count: int = 0
    bf16: bool = False
    world_size: int = 1  # training processes (accelerate launch / torchrun), each with this profile


@dataclass
class HardwareProfile:
    """The values a profile chose, and which of them the config overrode."""

    name: str
    hardware: Hardware
    batch_size: int
    gradient_accumulation_steps: int
    lora_r: int
    use_cpu: bool
    bf16: bool
    overridden: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line for the start of a run, e.g. ``hardware: cpu (2 cores, 23.4 GiB RAM, no GPU)
        -> batch 4 x accum 1, LoRA r 8, fp32``."""
        hw = self.hardware
        if hw.gpu_name:
            memory = f" {hw.gpu_memory_gib:.0f} GiB" if hw.gpu_memory_gib is not None else ""
            gpu = f"{max(hw.gpu_count, 1)}x {hw.gpu_name}{memory}"
        else:
            gpu = "no GPU"
        precision = "bf16" if self.bf16 else "fp32"
        device = "CPU" if self.use_cpu else "GPU"
        batch = f"batch {self.batch_size} x accum {self.gradient_accumulation_steps}"
        if hw.world_size > 1:
            batch += f" x {hw.world_size} processes (effective batch {self.effective_batch_size})"
        text = (
            f"hardware: {self.name} ({hw.cpu_cores} cores, {hw.ram_gib:.1f} GiB RAM, {gpu}) -> "
            f"{batch}, LoRA r {self.lora_r}, {precision} on {device}"
        )
        if self.overridden:
            text += f" (set by you: {', '.join(self.overridden)})"
        return text

    @property
    def effective_batch_size(self) -> int:
        """Examples per optimizer step: per-device batch x accumulation x processes."""
        return self.batch_size * self.gradient_accumulation_steps * max(self.hardware.world_size, 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ram_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 0.0


def _cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


def detect_hardware() -> Hardware:
    """The machine this process trains on (torch is imported only to ask about CUDA), and the
    number of training processes (``WORLD_SIZE`` of ``accelerate launch`` / ``torchrun``)."""
    from agent_rl_plugin.train.distributed import world_size

    cores, ram, processes = _cpu_cores(), _ram_gib(), world_size()
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return Hardware(
                cpu_cores=cores,
                ram_gib=ram,
                gpu_name=props.name,
                gpu_memory_gib=props.total_memory / 2**30,
                gpu_count=torch.cuda.device_count(),
                bf16=bool(torch.cuda.is_bf16_supported()),
                world_size=processes,
            )
    except Exception:  # torch missing or CUDA broken: train on CPU
        pass
    return Hardware(cpu_cores=cores, ram_gib=ram, world_size=processes)


def choose_profile(
    hardware: Hardware, method: str = "kto", num_generations: int | None = None, *, force_cpu: bool = False
) -> HardwareProfile:
    """The profile for ``hardware`` (see the module table). ``method`` is ``kto``, ``grpo`` or
    ``offline``; for ``grpo`` the batch is a multiple of ``num_generations``. ``force_cpu``: the
    run trains on CPU whatever GPU there is (the ``cpu`` profile, fp32)."""
    memory = None if force_cpu else hardware.gpu_memory_gib
    if memory is None and hardware.gpu_name and not force_cpu:
        memory = 0.0  # a GPU of unknown memory: the smallest GPU profile
    if memory is None:
        name, batch, accum, rank = "cpu", 4, 1, 8
    elif memory < 16:
        name, batch, accum, rank = "gpu-small", 4, 4, 16
    elif memory < 40:
        name, batch, accum, rank = "gpu-medium", 8, 2, 32
    else:
        name, batch, accum, rank = "gpu-large", 16, 1, 64
    if method == "grpo" and num_generations:
        batch = -(-batch // num_generations) * num_generations
    if method == "kto":
        batch = max(batch, 2)
    use_cpu = memory is None
    return HardwareProfile(
        name=name,
        hardware=hardware,
        batch_size=batch,
        gradient_accumulation_steps=accum,
        lora_r=rank,
        use_cpu=use_cpu,
        bf16=(not use_cpu) and hardware.bf16,
    )


def method_of(config: Any) -> str:
    """``kto``, ``grpo`` or ``offline`` for a config object (subclasses included)."""
    from agent_rl_plugin.train.grpo_config import GRPOTrainConfig, OfflineGRPOTrainConfig

    if isinstance(config, OfflineGRPOTrainConfig):
        return "offline"
    if isinstance(config, GRPOTrainConfig):
        return "grpo"
    name = type(config).__name__
    if name.startswith("Offline"):
        return "offline"
    if name.startswith("GRPO"):
        return "grpo"
    return "kto"


def apply_hardware_profile(config: Any, hardware: Hardware | None = None) -> HardwareProfile:
    """Fill the fields of ``config`` left ``None`` (:data:`PROFILE_FIELDS`) from the profile of
    ``hardware`` (detected when ``None``); values already set are kept and listed in
    ``overridden``. Returns the effective profile (its values are the config's after the call).
    Calling it again is harmless."""
    hardware = hardware or detect_hardware()
    profile = choose_profile(
        hardware,
        method_of(config),
        getattr(config, "num_generations", None),
        force_cpu=getattr(config, "use_cpu", None) is True,
    )
    for name in PROFILE_FIELDS:
        value = getattr(config, name)
        if value is None:
            setattr(config, name, getattr(profile, name))
        else:
            if value != getattr(profile, name):
                profile.overridden.append(name)
            setattr(profile, name, value)
    return profile


__all__ = [
    "Hardware",
    "HardwareProfile",
    "PROFILE_FIELDS",
    "apply_hardware_profile",
    "choose_profile",
    "detect_hardware",
]
