"""What the ``agent-rl train`` commands share: building a config from flags and an optional
``--config`` file, checking the model path, loading dataset files, printing the hardware
profile, and training with the run recorded in ``training_runs`` / ``training_metrics``.

Under ``accelerate launch`` / ``torchrun`` every process runs the command; only the main one
(:func:`~agent_rl_plugin.train.distributed.is_main_process`) prints the profile and records the
run (see :mod:`agent_rl_plugin.train.distributed`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from datetime import datetime, timezone
from typing import Any, Callable

from agent_rl_plugin.cli.common import UserError, console, err_console
from agent_rl_plugin.train.distributed import is_distributed, is_main_process, world_size

#: ``agent-rl train`` method -> the ``method`` of load_config_file and of training_runs.
METHODS = ("kto", "grpo", "offline_grpo", "gigpo")


def say(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def default_out(method: str) -> str:
    return os.path.join("runs", f"{method.replace('_', '-')}-" + datetime.now().strftime("%Y%m%d-%H%M%S"))


def check_model_path(model: str) -> None:
    """A local model directory must exist and hold config.json; ``org/name`` (one slash, not
    found locally) is left to ``from_pretrained`` as a model name."""
    expanded = os.path.expanduser(model)
    if os.path.isdir(expanded):
        if not os.path.isfile(os.path.join(expanded, "config.json")):
            raise UserError(f"model directory {model} has no config.json", "give a directory saved with save_pretrained")
        return
    looks_like_name = not model.startswith((".", "/", "~")) and model.count("/") <= 1 and "\\" not in model
    if os.path.exists(expanded) or not looks_like_name:
        raise UserError(
            f"model path {model} does not exist (or is not a directory)",
            "give a local model directory saved with save_pretrained, or a model name such as Qwen/Qwen2.5-0.5B-Instruct",
        )


def load_jsonl_dataset(path: str, kind: str = "KTO", columns: tuple[str, ...] = ("prompt", "completion", "label")):
    """A ``datasets.Dataset`` from a JSONL file (one row per line) that has ``columns``."""
    from datasets import Dataset

    hint = f"give a .jsonl file with one {kind} row ({', '.join(columns)}) per line"
    if not os.path.isfile(path):
        raise UserError(f"dataset file {path} does not exist", hint)
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                raise UserError(f"{path} line {number} is not JSON", hint) from None
    if not rows:
        raise UserError(f"{path} has no rows", hint)
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise UserError(f"{path} rows have no {', '.join(missing)} (they have {', '.join(rows[0])})", hint)
    return Dataset.from_list(rows)


def build_config(method: str, config_file: str | None, model: str | None, out: str | None, flags: dict[str, Any]):
    """The config of ``method`` from ``config_file`` (if any), then the flags given (``None``
    values are not given), then ``model``/``out``. Raises :class:`UserError`."""
    from agent_rl_plugin.train.config import TrainConfigError

    overrides = {k: v for k, v in flags.items() if v is not None}
    default_dir = default_out(method)
    if model:
        overrides["model"] = model
    try:
        if config_file:
            if not os.path.isfile(config_file):
                raise UserError(f"config file {config_file} does not exist", "give a .yaml/.yml/.toml file")
            from agent_rl_plugin.train.config_files import load_config_file

            if out:
                overrides["output_dir"] = out
            config = load_config_file(config_file, method=method, overrides=overrides,
                                      defaults={"output_dir": default_dir})
        else:
            if not model:
                raise UserError("no model given", "pass --model PATH (or a --config file with model: PATH)")
            overrides["output_dir"] = out or default_dir
            config = config_class(method)(**overrides)
    except TrainConfigError as exc:
        raise UserError(str(exc)) from None
    except TypeError as exc:  # an unknown field given programmatically
        raise UserError(str(exc)) from None
    if config.output_dir == default_dir and is_distributed():
        # the timestamped default can differ between processes started a second apart
        raise UserError(
            f"{world_size()} training processes need one output directory, given explicitly",
            "pass --out DIR (or set output_dir in the --config file)",
        )
    check_model_path(config.model)
    return config


def config_class(method: str):
    from agent_rl_plugin.train.config import KTOTrainConfig
    from agent_rl_plugin.train.grpo_config import GRPOTrainConfig, OfflineGRPOTrainConfig

    if method == "kto":
        return KTOTrainConfig
    if method == "grpo":
        return GRPOTrainConfig
    if method == "gigpo":
        return lambda **kw: OfflineGRPOTrainConfig(**{"advantage_level": "step", **kw})
    return OfflineGRPOTrainConfig


def apply_profile(config: Any, quiet: bool):
    """Fill the machine-dependent fields and print the profile (stderr when ``quiet``; only
    from the main process of a multi-process run)."""
    from agent_rl_plugin.train.hardware import apply_hardware_profile

    profile = apply_hardware_profile(config)
    if is_main_process():
        (err_console if quiet else console).print(profile.describe(), markup=False, highlight=False, soft_wrap=True)
    return profile


def store_error(exc: Exception) -> UserError:
    message, _, hint = str(exc).partition(" Fix: ")
    return UserError(message, hint or getattr(exc, "hint", None))


def train_recorded(
    *,
    method: str,
    config: Any,
    dataset: Any,
    dataset_sql: str,
    record_db: str | None,
    train: Callable[[], Any],
) -> tuple[Any, str | None]:
    """Run ``train()`` with the trainer's log lines on stderr, record the run (also a failed
    one) when ``record_db`` is set; returns ``(result, run_id)``. Raises :class:`UserError`.

    In a multi-process run (``accelerate launch``) every process trains, and only the main one
    records (DuckDB has one writer per file), with ``world_size`` added to the recorded config;
    the others return ``run_id`` ``None``."""
    from agent_rl_plugin.train.common import TrainError
    from agent_rl_plugin.train.config import TrainConfigError
    from agent_rl_plugin.train.records import record_training_run

    started_at = datetime.now(timezone.utc)
    n_rows = len(dataset) if dataset is not None else None
    if not is_main_process():
        record_db = None
    recorded_config = config
    if record_db and is_distributed():
        import dataclasses

        recorded_config = {**dataclasses.asdict(config), "world_size": world_size()}

    def failed(message: str) -> None:
        if not record_db:
            return
        try:
            record_training_run(record_db, None, recorded_config, dataset_sql, method=method, status="error",
                                error=message, started_at=started_at, n_rows=n_rows)
        except Exception as exc:  # e.g. a receiver holds the file: report the training error itself
            err_console.print(f"warning: the failed run was not recorded: {exc}", markup=False, highlight=False)

    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout stays for the summary / JSON
            result = train()
    except (TrainError, TrainConfigError) as exc:
        failed(str(exc))
        raise UserError(str(exc), getattr(exc, "hint", None)) from None
    except OSError as exc:
        failed(str(exc))
        raise UserError(f"cannot load or save the model: {exc}", "check --model and --out") from None
    run_id = None
    if record_db:
        from agent_rl_plugin.store.errors import StoreError

        try:
            run_id = record_training_run(record_db, result, recorded_config, dataset_sql, method=method,
                                         started_at=started_at)
        except StoreError as exc:  # the adapter is saved; only the record is missing
            err_console.print(
                f"warning: the run was trained (adapter {result.adapter_path}) but not recorded in {record_db}: "
                f"{exc}", markup=False, highlight=False, soft_wrap=True,
            )
    return result, run_id


def losses(result: Any) -> tuple[float | None, float | None]:
    """First and last logged training loss of a result."""
    values = [e["loss"] for e in result.log_history if isinstance(e.get("loss"), (int, float))]
    if values:
        return values[0], values[-1]
    return None, result.metrics.get("train_loss")


__all__ = [
    "METHODS",
    "apply_profile",
    "build_config",
    "check_model_path",
    "config_class",
    "default_out",
    "load_jsonl_dataset",
    "losses",
    "say",
    "store_error",
    "train_recorded",
]
