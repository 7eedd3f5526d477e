"""Which process of a multi-process training run this is (``accelerate launch``, ``torchrun``,
``mpirun``), read from the launcher's environment, without importing torch or accelerate.

Under ``accelerate launch --multi_gpu --num_processes N`` (or ``torchrun --nproc_per_node N``)
every process runs the whole ``agent-rl train`` command: each builds the same dataset from the
store (read-only connections, which DuckDB lets several processes hold at once) and trains its
share of every batch; ``transformers.Trainer`` averages the gradients and saves checkpoints and
the adapter from the main process only. The command itself uses :func:`is_main_process` so that
only that process records the run in ``training_runs`` / ``training_metrics`` (the single
writer of the file) and prints the summary; the others print nothing on stdout.

The variables are those ``accelerate.PartialState`` reads: ``RANK`` / ``WORLD_SIZE`` (torchrun,
which ``accelerate launch`` uses for ``--multi_gpu``, FSDP and DeepSpeed), else the MPI ones
(``accelerate launch --cpu`` with ``--mpirun_hostfile``). Once ``torch.distributed`` is
initialised (only looked at when torch is already imported), its answer wins.
"""

from __future__ import annotations

import os
import sys

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "PMI_RANK")
LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMI_SIZE")


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                continue
    return default


def _torch_distributed():
    """``torch.distributed`` when torch is already imported and a process group is up, else None."""
    if "torch" not in sys.modules:
        return None
    try:
        import torch.distributed as dist

        return dist if dist.is_available() and dist.is_initialized() else None
    except Exception:  # pragma: no cover - a broken torch install
        return None


def world_size() -> int:
    """The number of training processes (1 when not launched by a distributed launcher)."""
    dist = _torch_distributed()
    if dist is not None:
        return int(dist.get_world_size())
    return max(_env_int(WORLD_SIZE_VARIABLES, 1), 1)


def rank() -> int:
    """This process's global rank (0 when not distributed)."""
    dist = _torch_distributed()
    if dist is not None:
        return int(dist.get_rank())
    return _env_int(RANK_VARIABLES, 0)


def local_rank() -> int:
    """This process's rank on its machine (0 when not distributed)."""
    return _env_int(LOCAL_RANK_VARIABLES, 0)


def is_main_process() -> bool:
    """True for the process that records the run, prints the summary and saves the adapter
    (global rank 0, as ``PartialState().is_main_process`` and the Trainer's ``should_save``)."""
    return rank() == 0


def is_distributed() -> bool:
    """True when more than one training process runs."""
    return world_size() > 1


__all__ = ["is_distributed", "is_main_process", "local_rank", "rank", "world_size"]
