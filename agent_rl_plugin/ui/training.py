"""Training runs and learning-loop rounds (``GET api/training``, ``GET api/training/<run_id>``).

Contract: :func:`training_overview` lists every run (newest first) with the names of its logged
metrics, and every ``loop_rounds`` row (newest loop first, rounds in order);
:func:`training_run` answers one run with its config, recorded dataset query and each metric as
``[step, value]`` pairs ordered by step (``None`` for an unknown run).
"""

from __future__ import annotations

from typing import Any

from agent_rl_plugin.ui.backend import Backend
from agent_rl_plugin.ui.rows import fetch_dicts

_RUN_COLUMNS = "run_id, method, model, status, started_at, finished_at, n_rows, error, final_metrics"


def training_overview(backend: Backend) -> dict[str, Any]:
    """Every training run and loop round (see the module contract)."""
    with backend.reader() as connection:
        runs = fetch_dicts(connection, f"SELECT {_RUN_COLUMNS} FROM training_runs ORDER BY started_at DESC, run_id")
        names: dict[str, list[str]] = {}
        for run_id, name in connection.execute(
            "SELECT run_id, name FROM training_metrics GROUP BY run_id, name ORDER BY run_id, (name <> 'loss'), name"
        ).fetchall():
            names.setdefault(run_id, []).append(name)
        rounds = fetch_dicts(
            connection,
            "SELECT loop_id, round, status, env, method, policy_version, training_run_id, train_success, "
            "heldout_success, seconds, created_at FROM loop_rounds "
            "ORDER BY min(created_at) OVER (PARTITION BY loop_id) DESC, loop_id, round",
        )
    for run in runs:
        run["metric_names"] = names.get(run["run_id"], [])
    return {"runs": runs, "loop_rounds": rounds}


def training_run(backend: Backend, run_id: str) -> dict[str, Any] | None:
    """One run and its metric series (see the module contract), or ``None`` when unknown."""
    with backend.reader() as connection:
        found = fetch_dicts(
            connection,
            f"SELECT {_RUN_COLUMNS}, output_dir, adapter_path, config, dataset_sql FROM training_runs WHERE run_id = ?",
            [run_id],
        )
        if not found:
            return None
        points = connection.execute(
            "SELECT name, step, value FROM training_metrics WHERE run_id = ? AND step IS NOT NULL "
            "AND isfinite(value) ORDER BY (name <> 'loss'), name, step, logged_at",
            [run_id],
        ).fetchall()
    series: dict[str, list[list[float]]] = {}
    for name, step, value in points:
        series.setdefault(name, []).append([step, value])
    return {"run": found[0], "series": series}
