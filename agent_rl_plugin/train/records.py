"""Training runs in the store: :func:`record_training_run` writes one ``training_runs`` row and
the numeric values of ``TrainResult.log_history`` into ``training_metrics`` (one row per
(step, metric name)), in one transaction.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from agent_rl_plugin.store.connection import connect_writer
from agent_rl_plugin.store.transaction import arrow_transaction

#: log_history keys that are positions, not metrics.
_POSITION_KEYS = ("step", "epoch")


def _config_dict(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return dict(config)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def metric_rows(log_history: list[dict[str, Any]] | None) -> list[tuple[int | None, float | None, str, float]]:
    """``(step, epoch, name, value)`` for every finite numeric value of ``log_history``."""
    rows = []
    for entry in log_history or []:
        step = entry.get("step")
        epoch = entry.get("epoch")
        for name, value in entry.items():
            if name in _POSITION_KEYS or not _numeric(value):
                continue
            rows.append(
                (
                    int(step) if step is not None else None,
                    float(epoch) if epoch is not None else None,
                    name,
                    float(value),
                )
            )
    return rows


def record_training_run(
    db_path: str | os.PathLike[str],
    result: Any,
    config: Any,
    dataset_sql: str | None,
    method: str = "kto",
    status: str = "ok",
    error: str | None = None,
    *,
    run_id: str | None = None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
    n_rows: int | None = None,
    replace: bool = False,
) -> str:
    """Write a training run (``result``: a :class:`~agent_rl_plugin.train.TrainResult`, or
    ``None`` for a run that failed before producing one) and its logged metrics; returns the run
    id (``run_id``: a name given to the run, else a new uuid). ``replace``: a run already recorded
    under ``run_id`` (e.g. the interrupted run a resumed one continues) is replaced, its metrics
    too, in the same transaction."""
    if status not in ("ok", "error"):
        raise ValueError(f"status must be 'ok' or 'error', got {status!r}")
    run_id = run_id or uuid.uuid4().hex
    config_dict = _config_dict(config)
    now = datetime.now(UTC).replace(tzinfo=None)
    finished = finished_at or now
    if started_at is None and result is not None and getattr(result, "seconds", None) is not None:
        started_at = finished - timedelta(seconds=float(result.seconds))
    metrics = {k: v for k, v in (getattr(result, "metrics", None) or {}).items() if _numeric(v)}
    history = getattr(result, "log_history", None) or []
    rows = metric_rows(history)
    table = pa.table(
        {
            "step": pa.array([r[0] for r in rows], pa.int32()),
            "epoch": pa.array([r[1] for r in rows], pa.float64()),
            "name": pa.array([r[2] for r in rows], pa.string()),
            "value": pa.array([r[3] for r in rows], pa.float64()),
        }
    )
    connection = connect_writer(db_path)
    try:
        with arrow_transaction(connection, {"_arl_new_training_metrics": table}):
            if replace:
                connection.execute("DELETE FROM training_metrics WHERE run_id = ?", [run_id])
                connection.execute("DELETE FROM training_runs WHERE run_id = ?", [run_id])
            connection.execute(
                "INSERT INTO training_runs (run_id, method, model, output_dir, adapter_path, config, dataset_sql, "
                "n_rows, started_at, finished_at, status, error, final_metrics) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    method,
                    config_dict.get("model"),
                    getattr(result, "output_dir", None) or config_dict.get("output_dir"),
                    getattr(result, "adapter_path", None),
                    json.dumps(config_dict, sort_keys=True, default=str),
                    dataset_sql,
                    getattr(result, "n_rows", None) if n_rows is None else n_rows,
                    _naive(started_at),
                    _naive(finished),
                    status,
                    error,
                    json.dumps(metrics, sort_keys=True),
                ],
            )
            connection.execute(
                "INSERT INTO training_metrics (run_id, step, epoch, name, value, logged_at) "
                "SELECT ?, step, epoch, name, value, timezone('UTC', now()) FROM _arl_new_training_metrics",
                [run_id],
            )
    finally:
        connection.close()
    return run_id


#: What a run name may hold: it is also a directory name (``runs/NAME``).
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_name(name: str) -> str:
    """``name`` when it can name a training run (letters, digits, ``.``, ``_``, ``-``; up to 128
    characters, starting with a letter or digit); else ``ValueError``."""
    if not isinstance(name, str) or not RUN_NAME.match(name):
        raise ValueError(
            f"run name {name!r} is not usable: use letters, digits, '.', '_' and '-' (up to 128 characters)"
        )
    return name


def recorded_run(db_path: str | os.PathLike[str], run_id: str) -> dict[str, Any] | None:
    """The ``training_runs`` row recorded under ``run_id`` (run_id, method, status, started_at),
    or ``None`` (no such run, no such file, or no table yet)."""
    if not os.path.exists(db_path):
        return None
    from agent_rl_plugin.store import open_reader

    connection = open_reader(os.fspath(db_path))
    try:
        found = connection.execute(
            "SELECT run_id, method, status, started_at FROM training_runs WHERE run_id = ?", [run_id]
        ).fetchone()
    except Exception:  # duckdb.CatalogException: a store without training_runs yet
        return None
    finally:
        connection.close()
    return None if found is None else dict(zip(("run_id", "method", "status", "started_at"), found))


def _naive(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


__all__ = ["RUN_NAME", "check_run_name", "metric_rows", "record_training_run", "recorded_run"]
