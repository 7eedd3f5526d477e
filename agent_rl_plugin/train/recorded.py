"""A training run with its record: :func:`apply_profile` fills the machine-dependent fields,
:func:`train_recorded` runs the trainer and records the run (also a failed one) in
``training_runs`` / ``training_metrics``; :func:`losses` reads the first and last loss.

Under ``accelerate launch`` / ``torchrun`` every process trains; only the main one
(:func:`~agent_rl_plugin.train.distributed.is_main_process`) reports the profile and records
the run (DuckDB has one writer per file; see :mod:`agent_rl_plugin.train.distributed`).

Nothing here prints: the profile line goes to ``on_profile`` and problems that do not stop the
run (the record could not be written) to ``on_warning`` (default: :func:`warnings.warn`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from datetime import UTC, datetime
from typing import Any, Callable, Optional

from agent_rl_plugin.train.common import TrainError
from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.distributed import is_distributed, is_main_process, world_size
from agent_rl_plugin.train.inputs import with_hint

Report = Callable[[str], None]


def warn(message: str) -> None:
    """The default ``on_warning``: a :class:`UserWarning`."""
    warnings.warn(message, stacklevel=3)


def apply_profile(config: Any, on_profile: Optional[Report] = None) -> Any:
    """Fill the machine-dependent fields of ``config`` from the detected hardware and give the
    profile's one-line description to ``on_profile`` (from the main process only); returns
    the :class:`~agent_rl_plugin.train.hardware.HardwareProfile`."""
    # torch loads with the hardware detection: only when a run starts
    from agent_rl_plugin.train.hardware import apply_hardware_profile

    profile = apply_hardware_profile(config)
    if on_profile is not None and is_main_process():
        on_profile(profile.describe())
    return profile


def train_recorded(
    *,
    method: str,
    config: Any,
    dataset: Any,
    dataset_sql: str,
    record_db: str | None,
    train: Callable[[], Any],
    on_warning: Report = warn,
    run_id: str | None = None,
    replace: bool = False,
) -> tuple[Any, str | None]:
    """Run ``train()`` with the trainer's log lines on stderr, record the run (also a failed
    one) when ``record_db`` is set; returns ``(result, run_id)``. A trainer error is raised
    again after the failed run is recorded; an ``OSError`` (the model cannot be loaded or
    saved) is raised as a :class:`~agent_rl_plugin.train.common.TrainError`.

    In a multi-process run every process trains, and only the main one records, with
    ``world_size`` added to the recorded config; the others return ``run_id`` ``None``.

    ``run_id``: the name to record the run under (default a new uuid); ``replace``: a run
    already recorded under that name is replaced (see
    :func:`~agent_rl_plugin.train.records.record_training_run`)."""
    # the store (duckdb) loads only to record a run
    from agent_rl_plugin.store.errors import StoreError
    from agent_rl_plugin.train.records import record_training_run

    started_at = datetime.now(UTC)
    n_rows = len(dataset) if dataset is not None else None
    if not is_main_process():
        record_db = None
    recorded_config = config
    if record_db and is_distributed():
        recorded_config = {**dataclasses.asdict(config), "world_size": world_size()}

    def failed(message: str) -> None:
        if not record_db:
            return
        try:
            record_training_run(
                record_db,
                None,
                recorded_config,
                dataset_sql,
                method=method,
                status="error",
                error=message,
                started_at=started_at,
                n_rows=n_rows,
                run_id=run_id,
                replace=replace,
            )
        except Exception as exc:  # e.g. a receiver holds the file: report the training error itself
            on_warning(f"warning: the failed run was not recorded: {exc}")

    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout stays for the caller's summary
            result = train()
    except (TrainError, TrainConfigError) as exc:
        failed(str(exc))
        raise
    except OSError as exc:
        failed(str(exc))
        raise with_hint(
            TrainError(f"cannot load or save the model: {exc}"), "check model and output_dir", "model"
        ) from None
    recorded_id = None
    if record_db:
        try:
            recorded_id = record_training_run(
                record_db,
                result,
                recorded_config,
                dataset_sql,
                method=method,
                started_at=started_at,
                run_id=run_id,
                replace=replace,
            )
        except StoreError as exc:  # the adapter is saved; only the record is missing
            on_warning(
                f"warning: the run was trained (adapter {result.adapter_path}) but not recorded in {record_db}: {exc}"
            )
    return result, recorded_id


def losses(result: Any) -> tuple[float | None, float | None]:
    """First and last logged training loss of a result."""
    values = [e["loss"] for e in result.log_history if isinstance(e.get("loss"), (int, float))]
    if values:
        return values[0], values[-1]
    return None, result.metrics.get("train_loss")


__all__ = ["apply_profile", "losses", "train_recorded", "warn"]
