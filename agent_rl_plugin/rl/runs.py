"""Compute advantages over a store and write them to the ``advantages`` table (one ``run_id``).

:func:`compute_advantages` is ``agent-rl advantages compute`` as a function: it reads the
inputs with SQL (:mod:`agent_rl_plugin.rl.store`), computes them (the pure :mod:`~agent_rl_plugin.advantages.grpo`
or :mod:`~agent_rl_plugin.advantages.gigpo`), appends the rows in one transaction and returns an
:class:`AdvantageRun` with the summary. The same inputs and parameters give the same values;
``input_hash`` (over the inputs in a canonical order) shows that two runs had equal inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pluggy
import pyarrow as pa

from agent_rl_plugin.advantages.failed import (
    DEFAULT_FAILED_ROLLOUTS,
    FailedRollouts,
    FailedRolloutsError,
    check_failed_rollouts,
)
from agent_rl_plugin.advantages.gigpo import BASELINES, MODES, compute_gigpo
from agent_rl_plugin.advantages.grpo import (
    SCALES,
    TRL_EPSILON,
    dr_grpo_advantages,
    group_summary,
    grpo_advantages,
    rloo_advantages,
)
from agent_rl_plugin.rl.hints import LLM_STEPS_HINT, SCORE_HINT, nothing_selected
from agent_rl_plugin.rl.store import (
    AdvantageInputError,
    describe_selection,
    episode_rewards,
    rollout_id_list,
    steps_for_gigpo,
    table_report,
)
from agent_rl_plugin.store.transaction import arrow_transaction

METHODS = ("grpo", "rloo", "dr_grpo", "gigpo")


@dataclass
class AdvantageRun:
    """What one computation did."""

    run_id: str
    method: str
    parameters: dict[str, Any]
    rows_written: int
    input_hash: str
    summary: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def input_hash(table: pa.Table, columns: Sequence[str]) -> str:
    """sha256 (first 16 hex) of ``columns`` of ``table``, sorted by all of them first, so the
    rows' order does not matter (Arrow IPC bytes of the sorted table)."""
    view = table.select(list(columns)).replace_schema_metadata(None)
    view = view.sort_by([(c, "ascending") for c in columns]).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, view.schema) as writer:
        writer.write_table(view)
    return hashlib.sha256(sink.getvalue()).hexdigest()[:16]


def _summary(values: np.ndarray, counts: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **counts,
        "advantage_mean": float(values.mean()) if values.size else 0.0,
        "advantage_std": float(values.std()) if values.size else 0.0,
        "advantage_min": float(values.min()) if values.size else 0.0,
        "advantage_max": float(values.max()) if values.size else 0.0,
    }


def _episode_rows(method: str, table: pa.Table, scale: str, epsilon: float) -> tuple[dict[str, Any], dict[str, Any]]:
    rewards = table.column("reward").to_numpy()
    groups = table.column("group_id")
    ids = table.column("rollout_id").to_pylist()
    if method == "grpo":
        values = grpo_advantages(rewards, groups, scale, epsilon=epsilon, rollout_ids=ids)
    elif method == "rloo":
        values = rloo_advantages(rewards, groups, rollout_ids=ids)
    else:
        values = dr_grpo_advantages(rewards, groups, rollout_ids=ids)
    counts = group_summary(rewards, groups).to_dict()
    n = table.num_rows
    nulls = pa.nulls(n, pa.float64())
    columns = {
        "rollout_id": table.column("rollout_id"),
        "group_id": groups,
        "step_index": pa.nulls(n, pa.int32()),
        "action_index": pa.nulls(n, pa.int32()),
        "value": pa.array(values, pa.float64()),
        "episode_advantage": nulls,
        "step_advantage": nulls,
        "reward": pa.array(rewards, pa.float64()),
        "step_return": nulls,
        "state_key": pa.nulls(n, pa.string()),
        "step_group_size": pa.nulls(n, pa.int32()),
    }
    return columns, _summary(values, counts)


def _gigpo_rows(table: pa.Table, parameters: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    result = compute_gigpo(
        table,
        omega=parameters["omega"],
        gamma=parameters["gamma"],
        mode=parameters["mode"],
        epsilon=parameters["epsilon"],
        baseline=parameters["baseline"],
    )
    columns = {
        "rollout_id": table.column("trajectory_id"),
        "group_id": table.column("group_id"),
        "step_index": table.column("view_step_index").cast(pa.int32()),
        "action_index": table.column("step_index").cast(pa.int32()),
        "value": pa.array(result.advantage, pa.float64()),
        "episode_advantage": pa.array(result.episode_advantage, pa.float64()),
        "step_advantage": pa.array(result.step_advantage, pa.float64()),
        "reward": pa.array(result.episode_reward, pa.float64()),
        "step_return": pa.array(result.step_return, pa.float64()),
        "state_key": table.column("state_key"),
        "step_group_size": pa.array(result.step_group_size, pa.int32()),
    }
    counts = {k: v for k, v in result.summary.items() if not k.startswith("advantage_")}
    counts["rollouts"] = counts.pop("trajectories")
    return columns, _summary(result.advantage, counts)


def check_parameters(
    method: str, *, scale: str, mode: str, baseline: str, omega: float, gamma: float, epsilon: float | None
) -> None:
    """``ValueError`` for an unknown method or setting."""
    if method not in METHODS:
        raise AdvantageInputError(f"unknown method {method!r}", f"use one of {', '.join(METHODS)}")
    for what, value, choices in (("scale", scale, SCALES), ("mode", mode, MODES), ("baseline", baseline, BASELINES)):
        if value not in choices:
            raise AdvantageInputError(f"unknown {what} {value!r}", f"use one of {', '.join(choices)}")
    if not 0.0 <= gamma <= 1.0:
        raise AdvantageInputError(f"gamma must be within [0, 1], got {gamma}")
    if not np.isfinite(omega):
        raise AdvantageInputError(f"omega must be a finite number, got {omega}")
    if epsilon is not None and not (0.0 <= epsilon < np.inf):
        raise AdvantageInputError(f"epsilon must be >= 0, got {epsilon}")


def compute_advantages(
    db_path: str | os.PathLike[str],
    method: str,
    *,
    where: str | None = None,
    rollout_ids: Sequence[str] | None = None,
    rollout_run_id: str | None = None,
    reward_names: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    scale: str = "group",
    omega: float = 1.0,
    gamma: float = 0.95,
    mode: str = "mean_norm",
    baseline: str = "step",
    epsilon: float | None = None,
    terminal_reward: bool = True,
    pm: pluggy.PluginManager | None = None,
    write: bool = True,
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
) -> AdvantageRun:
    """Compute ``method`` advantages for the selected rollouts and (with ``write``) append them
    to ``db_path``'s ``advantages`` table under a new ``run_id``.

    The selection: ``where`` (an SQL condition over the ``rollouts`` view) AND ``rollout_ids``
    (exactly these rollouts; an empty list selects none) AND ``rollout_run_id`` (the rollouts
    of one :func:`~agent_rl_plugin.rollouts.run_rollouts` call: the ``run_id`` it records in
    each rollout's metadata), each only when given; none given selects every rollout. Ids are
    bound as SQL parameters, never pasted into SQL text.

    ``failed_rollouts``: what to do with selected rollouts that ended in error, timeout or
    cancellation (:mod:`agent_rl_plugin.advantages.failed`): ``exclude`` (default) leaves them
    out, ``zero_reward`` takes their episode reward as 0, ``keep`` uses their own reward. It is
    stored in ``parameters``; ``report["failed_rollouts"]`` says how many rollouts it touched.

    ``epsilon`` defaults to 1e-4 for grpo (TRL's) and 1e-6 for gigpo (the reference's).
    Raises :class:`~agent_rl_plugin.rl.store.AdvantageInputError` when there is nothing to
    compute or the inputs are bad, and :class:`~agent_rl_plugin.store.StoreError` when the
    file cannot be opened.
    """
    from agent_rl_plugin.store import connect_writer
    from agent_rl_plugin.store.connection import NO_DATABASE, live_writer

    if not os.path.exists(db_path) and live_writer(db_path) is None:  # do not create an empty file
        message, _, hint = NO_DATABASE.format(path=os.fspath(db_path)).partition(": ")
        raise AdvantageInputError(message, hint)
    check_parameters(method, scale=scale, mode=mode, baseline=baseline, omega=omega, gamma=gamma, epsilon=epsilon)
    try:
        policy = check_failed_rollouts(failed_rollouts)
    except FailedRolloutsError as exc:
        raise AdvantageInputError(str(exc), exc.hint) from None
    if epsilon is None:
        epsilon = TRL_EPSILON if method == "grpo" else 1e-6
    ids = rollout_id_list(rollout_ids)
    parameters: dict[str, Any] = {
        "where": where,
        **({"rollout_ids": sorted(ids)} if ids is not None else {}),
        **({"rollout_run_id": str(rollout_run_id)} if rollout_run_id is not None else {}),
        "rewards": sorted(reward_names) if reward_names else None,
        "weights": dict(sorted((weights or {}).items())) or None,
        "failed_rollouts": policy,
    }
    if method == "grpo":
        parameters.update(scale=scale, epsilon=epsilon)
    elif method == "gigpo":
        parameters.update(
            omega=omega, gamma=gamma, mode=mode, baseline=baseline, epsilon=epsilon, terminal_reward=terminal_reward
        )
    connection = connect_writer(db_path)
    try:
        if method == "gigpo":
            table = steps_for_gigpo(
                connection,
                where,
                reward_names,
                weights=weights,
                terminal_reward=terminal_reward,
                pm=pm,
                rollout_ids=ids,
                rollout_run_id=rollout_run_id,
                failed_rollouts=policy,
            )
            hashed = ["group_id", "trajectory_id", "step_index", "state_key", "reward"]
            hashed += ["episode_reward"] if "episode_reward" in table.column_names else []
        else:
            table = episode_rewards(
                connection,
                where,
                reward_names,
                weights=weights,
                rollout_ids=ids,
                rollout_run_id=rollout_run_id,
                failed_rollouts=policy,
            )
            hashed = ["group_id", "rollout_id", "reward"]
        report = table_report(table)
        if table.num_rows == 0:
            raise _nothing_error(connection, method, describe_selection(where, ids, rollout_run_id), report)
        try:
            columns, summary = (
                _gigpo_rows(table, parameters) if method == "gigpo" else _episode_rows(method, table, scale, epsilon)
            )
        except AdvantageInputError:
            raise
        except ValueError as exc:
            raise AdvantageInputError(str(exc)) from None
        digest = input_hash(table, hashed)
        run = AdvantageRun(uuid.uuid4().hex, method, parameters, 0, digest, summary, report)
        if write:
            run.rows_written = _write(connection, run, columns)
        return run
    finally:
        connection.close()


def _nothing_error(
    connection: Any, method: str, selection: str | None, report: Mapping[str, Any]
) -> AdvantageInputError:
    """Why a computation found nothing to compute, with the fix for that cause: the store holds
    no rollouts; the filters matched none of them; every selected rollout failed and is
    excluded; (gigpo) none has an LLM step; none has a usable episode reward; or a mix of the
    last two (each counted)."""
    selected = report.get("selected", 0)
    if not selected:
        return AdvantageInputError(
            *nothing_selected(connection, selection, lead="no rollouts to compute advantages for matching")
        )
    excluded = report.get("failed_rollouts", {}).get("excluded", 0)
    if excluded == selected:
        return AdvantageInputError(
            f"all {selected} selected rollouts failed (error, timeout or cancelled) and are excluded",
            "keep them with failed_rollouts='zero_reward' or 'keep' (--failed-rollouts), or select other rollouts",
        )
    selected -= excluded
    no_steps = report.get("without_actions", 0) if method == "gigpo" else 0
    if no_steps >= selected:
        return AdvantageInputError(
            f"the {selected} selected rollouts have no LLM steps (GiGPO's actions)", LLM_STEPS_HINT
        )
    if no_steps:
        unscored = report.get("unscored", {}).get("count", 0)
        return AdvantageInputError(
            f"none of the {selected} selected rollouts has both LLM steps and a usable episode reward "
            f"({no_steps} have no LLM steps, {unscored} with LLM steps have no usable episode reward)",
            f"{SCORE_HINT}; {LLM_STEPS_HINT}",
        )
    return AdvantageInputError(f"none of the {selected} selected rollouts has a usable episode reward", SCORE_HINT)


def _write(connection: Any, run: AdvantageRun, columns: dict[str, Any]) -> int:
    """Append the rows in one transaction; ``advantage_id`` is ``run_id-N``."""
    table = pa.table(columns)
    names = ", ".join(columns)
    with arrow_transaction(connection, {"_arl_new_advantages": table}):
        connection.execute(
            f"INSERT INTO advantages (advantage_id, run_id, method, parameters, input_hash, created_at, {names}) "
            f"SELECT ? || '-' || CAST(row_number() OVER () AS VARCHAR), ?, ?, ?, ?, timezone('UTC', now()), {names} "
            "FROM _arl_new_advantages",
            [run.run_id, run.run_id, run.method, json.dumps(run.parameters, sort_keys=True), run.input_hash],
        )
    return table.num_rows


__all__ = ["METHODS", "AdvantageRun", "check_parameters", "compute_advantages", "input_hash"]
