"""Train a method on rollouts chosen from the store (or on a dataset file), record the run, and
return a summary: what ``agent-rl train kto|grpo|gigpo`` and ``agent-rl demo`` do, callable from
Python.

* :func:`run_kto`: KTO on ``build_kto_dataset`` rows (labels from the rewards);
* :func:`run_grpo_online`: online GRPO on prompts mined from the store (or the ``tasks`` table),
  completions scored by reward plugins;
* :func:`run_grpo_offline`: offline GRPO (``config.advantage_level == 'episode'``) on logged groups
  or GiGPO (``'step'``) on logged LLM steps.

Data: ``where`` (a condition over the ``rollouts`` view), ``sql`` (a read-only query returning
``rollout_id``) or ``dataset_file`` (a JSONL file; recorded too when a database is given); at
most one. ``run_name``: the run_id the run is recorded under (default a new uuid).
The summary is a JSON-ready dict (method, run_id, rows, steps, first/final loss, metrics,
hardware, adapter_path, output_dir, seconds, what moved).

Errors (:func:`run_errors`): :class:`~agent_rl_plugin.train.common.TrainError` and
:class:`~agent_rl_plugin.train.config.TrainConfigError` with ``hint`` and ``option`` (the
argument to change), :class:`~agent_rl_plugin.data.DatasetError` and
:class:`~agent_rl_plugin.store.StoreError` from the layers below, unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from agent_rl_plugin.store.errors import StoreError
from agent_rl_plugin.train.common import TrainError, fresh_start_note
from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.heap import training_heap
from agent_rl_plugin.train.inputs import check_model_path, load_jsonl_dataset, with_hint
from agent_rl_plugin.train.recorded import Report, apply_profile, losses, train_recorded, warn
from agent_rl_plugin.train.records import check_run_name, recorded_run


def run_errors() -> tuple[type[Exception], ...]:
    """The errors a run raises for data or settings it cannot train on (``except run_errors():``)."""
    # the data package imports its builders (pyarrow, numpy): loaded when a run can fail, not at import
    from agent_rl_plugin.data.report import DatasetError

    return (TrainError, TrainConfigError, DatasetError, StoreError)


def _one_source(**sources: Any) -> None:
    given = [name for name, value in sources.items() if value]
    if len(given) > 1:
        raise with_hint(
            TrainError(f"give one of {', '.join(sources)}, not several (got {', '.join(given)})"), None, "source"
        )


def _dataset_sql(where: str | None, sql: str | None, dataset_file: str | None) -> str:
    if dataset_file:
        return f"file:{os.path.abspath(dataset_file)}"
    return sql or where or "all rollouts"


def _prepare(config: Any, record_db: str | None, run_name: str | None, on_warning: Report) -> tuple[str | None, bool]:
    """Checks before any data is built: the model is found (offline unless allowed), ``resume
    latest`` with no checkpoint yet starts fresh (a note to ``on_warning``), and ``run_name`` is
    usable. Returns ``(run_id, replace)``: the name to record under and whether it replaces a
    recorded run (a failed one, or the one a resumed run continues). A name already recorded by
    a finished run is an error unless resuming."""
    check_model_path(config.model, config.allow_download)
    resuming = config.resume_from_checkpoint is not None  # asked for, even when it starts fresh below
    note = fresh_start_note(config)
    if note:
        on_warning(note)
    if run_name is None:
        return None, False
    try:
        check_run_name(run_name)
    except ValueError as exc:
        raise with_hint(TrainConfigError(str(exc)), None, "run") from None
    existing = recorded_run(record_db, run_name) if record_db else None
    if existing is None:
        return run_name, False
    if existing["status"] == "error" or resuming:
        return run_name, True
    raise with_hint(
        TrainConfigError(
            f"a training run named {run_name!r} is already recorded ({existing['method']}, {existing['status']}, "
            f"started {existing['started_at']:%Y-%m-%d %H:%M:%S})"
        ),
        "choose another run name, or resume that run (resume_from_checkpoint='latest') to continue it",
        "run",
    )


def constant_reward(log_history: list[dict[str, Any]]) -> float | None:
    """The reward of an online GRPO run whose logged mean reward never changed and whose
    within-group spread (``reward_std``) was always 0, i.e. every sampled completion got the
    same reward and GRPO had no signal; ``None`` when the reward varied (or was not logged)."""
    entries = [e for e in log_history if isinstance(e.get("reward"), (int, float))]
    if not entries:
        return None
    values = [float(e["reward"]) for e in entries]
    spreads = [float(e["reward_std"]) for e in entries if isinstance(e.get("reward_std"), (int, float))]
    if not spreads and len(values) < 2:
        return None
    if max(values) - min(values) > 1e-9 or any(abs(x) > 1e-9 for x in spreads):
        return None
    return values[0]


def _constant_reward_warning(value: float, rewards: dict[str, float]) -> str:
    return (
        f"warning: the reward was {value:g} for every sampled completion of the whole run, so GRPO had no signal "
        f"and the adapter learned nothing from it; likely the reward function ({', '.join(rewards)}) returns a "
        "constant for these prompts (check it on a few completions), or every completion was the same "
        "(raise temperature or num_generations, or max_completion_length if answers are cut)"
    )


def _nothing_to_train(what: str, report: Any) -> TrainError:
    return with_hint(
        TrainError(f"no {what} to train on: {report.to_dict().get('rollouts', 0)} rollouts matched"),
        "record and score rollouts first, or widen the selection (where, sql)",
        "selection",
    )


def _summary(
    method: str, config: Any, result: Any, run_id: str | None, dataset_sql: str, profile: Any
) -> dict[str, Any]:
    first, final = losses(result)
    return {
        "method": method,
        "run_id": run_id,
        "model": config.model,
        "dataset": dataset_sql,
        "rows": result.n_rows,
        "steps": result.global_step,
        "first_loss": first,
        "final_loss": final,
        "metrics": result.metrics,
        "extra": result.extra,
        "hardware": profile.describe(),
        "resumed_from": result.resumed_from,
        "adapter_path": result.adapter_path,
        "output_dir": result.output_dir,
        "seconds": round(result.seconds, 2),
    }


def _first_last(history: list[dict], name: str) -> tuple[float, float] | None:
    values = [e[name] for e in history if isinstance(e.get(name), (int, float))]
    return (values[0], values[-1]) if values else None


def run_kto(
    config: Any,
    *,
    db: str | None = None,
    where: str | None = None,
    sql: str | None = None,
    dataset_file: str | None = None,
    label_rule: Any = "threshold",
    weights: Any = None,
    record: bool = True,
    progress: bool = True,
    on_profile: Optional[Report] = None,
    on_warning: Report = warn,
    run_name: str | None = None,
) -> dict[str, Any]:
    """Build the KTO dataset (or read ``dataset_file``), train, record the run in ``db`` (a
    dataset-file run too, when ``db`` is given; ``run_name``: its run_id); returns the summary,
    with the label counts and weights. Raises one of :func:`run_errors`."""
    with training_heap() as heap:  # see agent_rl_plugin.train.heap
        # the data layer (duckdb) and the trainers (torch, TRL) load only when a run starts
        from agent_rl_plugin.data import BuildReport, build_kto_dataset
        from agent_rl_plugin.train.kto import check_kto_dataset, load_kto_trainer, train_kto

        _one_source(where=where, sql=sql, dataset_file=dataset_file)
        record_db = db if record else None
        name, replace = _prepare(config, record_db, run_name, on_warning)
        report = None
        if dataset_file:
            dataset = load_jsonl_dataset(dataset_file)
        else:
            report = BuildReport()
            dataset = build_kto_dataset(db, where=where, sql=sql, label_rule=label_rule, weights=weights, report=report)
            if len(dataset) == 0:
                raise _nothing_to_train("KTO rows", report)
        dataset_sql = _dataset_sql(where, sql, dataset_file)
        try:
            n_desirable, n_undesirable = check_kto_dataset(dataset)
        except TrainError as exc:
            raise with_hint(
                TrainError(
                    f"only one label class: {_count(dataset, True)} desirable, {_count(dataset, False)} undesirable"
                ),
                "KTO needs both; choose another label rule (quantile or group) or another threshold",
                "label_rule",
            ) from exc
        profile = apply_profile(config, on_profile)
        heap.settle(preload=load_kto_trainer)
        result, run_id = train_recorded(
            method="kto",
            config=config,
            dataset=dataset,
            dataset_sql=dataset_sql,
            record_db=record_db,
            on_warning=on_warning,
            train=lambda: train_kto(config, dataset, hardware=profile, progress=progress),
            run_id=name,
            replace=replace,
        )
        summary = _summary("kto", config, result, run_id, dataset_sql, profile)
        del summary["extra"]
        summary["labels"] = {"desirable": n_desirable, "undesirable": n_undesirable}
        summary["weights"] = {"desirable": result.desirable_weight, "undesirable": result.undesirable_weight}
        summary["build"] = report.to_dict() if report is not None else None
        return summary


def _count(dataset: Any, value: bool) -> int:
    return sum(1 for x in dataset["label"] if bool(x) == value) if "label" in dataset.column_names else 0


def run_grpo_online(
    config: Any,
    *,
    db: str,
    rewards: dict[str, float],
    where: str | None = None,
    sql: str | None = None,
    tasks: bool = False,
    record: bool = True,
    progress: bool = True,
    on_profile: Optional[Report] = None,
    on_warning: Report = warn,
    run_name: str | None = None,
) -> dict[str, Any]:
    """Online GRPO on prompts from the store (``tasks``: from the ``tasks`` table, ``where``
    then being a condition over it), scored by the reward plugins ``rewards`` (name ->
    weight); returns the summary with the reward curve's ends. Raises one of :func:`run_errors`.

    A run whose reward was one constant for every completion of every step (see
    :func:`constant_reward`) trains on no signal: a warning naming the likely cause goes to
    ``on_warning`` at the end, the summary lists it under ``warnings``, and the recorded
    ``final_metrics`` hold ``constant_reward`` (the value)."""
    # the data layer (duckdb) and the trainers (torch, TRL) load only when a run starts
    from agent_rl_plugin.data import BuildReport, DatasetError
    from agent_rl_plugin.train.grpo import train_grpo
    from agent_rl_plugin.train.prompts import build_prompt_dataset
    from agent_rl_plugin.train.reward_funcs import reward_functions

    _one_source(where=where, sql=sql)
    record_db = db if record else None
    name, replace = _prepare(config, record_db, run_name, on_warning)
    if where and tasks:
        from agent_rl_plugin.store.user_sql import UserSqlError, check_condition

        try:  # spliced into the tasks query on a reader connection: this check is its wall
            check_condition(where, "SELECT task_id FROM tasks WHERE ({where})")
        except UserSqlError as exc:
            raise with_hint(
                TrainError(f"bad where condition: {exc}"),
                "with tasks as the source, where is a condition over the tasks table",
                "where",
            ) from None
    if not rewards:
        from agent_rl_plugin.rewards.registry import collect_rewards

        names = ", ".join(sorted(collect_rewards())) or "none installed"
        raise with_hint(
            TrainError("online GRPO needs at least one reward to score its samples"),
            f"name one or more reward plugins (installed: {names})",
            "rewards",
        )
    report = BuildReport()
    prompts = build_prompt_dataset(db, where=where, sql=sql, source="tasks" if tasks else "rollouts", report=report)
    try:
        funcs = reward_functions(list(rewards), weights=rewards)
    except (TrainError, DatasetError):
        raise
    except (ValueError, KeyError) as exc:
        raise with_hint(TrainError(str(exc)), getattr(exc, "hint", None), "rewards") from None
    profile = apply_profile(config, on_profile)
    dataset_sql = ("tasks: " if tasks else "") + _dataset_sql(where, sql, None)
    warnings: list[str] = []

    def train() -> Any:
        result = train_grpo(config, prompts, funcs, hardware=profile, progress=progress)
        constant = constant_reward(result.log_history)
        if constant is not None:  # in the metrics before the run is recorded
            result.metrics["constant_reward"] = constant
            warnings.append(_constant_reward_warning(constant, rewards))
        return result

    result, run_id = train_recorded(
        method="grpo",
        config=config,
        dataset=prompts,
        dataset_sql=dataset_sql,
        record_db=record_db,
        on_warning=on_warning,
        train=train,
        run_id=name,
        replace=replace,
    )
    for warning in warnings:
        on_warning(warning)
    summary = _summary("grpo", config, result, run_id, dataset_sql, profile)
    summary["warnings"] = warnings
    reward = _first_last(result.log_history, "reward")
    summary["moved"] = {"reward": list(reward)} if reward else {}
    if reward:
        summary["extra_lines"] = [f"mean reward: {reward[0]:.4f} (first step) -> {reward[1]:.4f} (last step)"]
    summary["build"] = report.to_dict()
    return summary


#: How episode-level offline GRPO turns rollouts into training rows (see :func:`run_grpo_offline`).
RECIPES = ("auto", "steps", "groups")


def _llm_calls_per_rollout(db: str | None, where: str | None, sql: str | None) -> tuple[list[str], int]:
    """The selected rollouts' ids and the most LLM calls one of them made."""
    from agent_rl_plugin.data.sql import open_store, select_rollouts

    with open_store(db) as connection:
        ids = [str(v) for v in select_rollouts(connection, where, sql).column("rollout_id").to_pylist()]
        found = connection.execute(
            "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM steps WHERE kind = 'llm' "
            "AND rollout_id IN (SELECT unnest(?)) GROUP BY rollout_id)",
            [ids],
        ).fetchone()
    return ids, int(found[0]) if found else 0


def run_grpo_offline(
    config: Any,
    *,
    db: str | None,
    where: str | None = None,
    sql: str | None = None,
    dataset_file: str | None = None,
    weights: dict[str, float] | None = None,
    from_table: bool = False,
    run_id: str | None = None,
    min_group_size: int = 2,
    recipe: str = "auto",
    record: bool = True,
    progress: bool = True,
    on_profile: Optional[Report] = None,
    on_warning: Report = warn,
    run_name: str | None = None,
    recompute: bool = False,
) -> dict[str, Any]:
    """Offline GRPO (``config.advantage_level == 'episode'``) or GiGPO (``'step'``; advantages
    computed, or read from the ``advantages`` table with ``from_table`` / ``run_id``) on logged
    rollouts; returns the summary with the log-probs that moved. Raises one of :func:`run_errors`.

    ``recipe`` (episode level, from the store): ``"groups"`` trains one completion per rollout
    (the GRPO group dataset: the rollout's last LLM call); ``"steps"`` trains **every** LLM call
    of each rollout with its episode's GRPO advantage (GRPO advantages written to the
    ``advantages`` table, then the step dataset); ``"auto"`` (default) takes ``"steps"`` when a
    selected rollout made more than one LLM call, else ``"groups"``. The summary's ``recipe``
    says which ran.

    GiGPO from the store reuses the newest stored ``gigpo`` advantages run that matches the
    selection and rewards (:func:`~agent_rl_plugin.train.advantage_runs.latest_matching_run`)
    unless ``run_id`` names one, ``from_table`` asks for the newest covering run, or
    ``recompute`` computes them afresh; the summary's ``advantages`` says which (``source``:
    ``stored``, ``computed`` or ``dataset``; ``run_id``). A dataset-file run is recorded too when
    ``db`` is given; ``run_name``: the recorded run_id."""
    # the data layer (duckdb) and the trainers (torch) load only when a run starts
    from agent_rl_plugin.data import BuildReport, build_grpo_dataset, build_step_dataset
    from agent_rl_plugin.train.offline import train_offline_grpo

    _one_source(where=where, sql=sql, dataset_file=dataset_file)
    if recipe not in RECIPES:
        raise with_hint(TrainError(f"unknown recipe {recipe!r}"), f"use one of {', '.join(RECIPES)}", "recipe")
    record_db = db if record else None
    name, replace = _prepare(config, record_db, run_name, on_warning)
    step_level = config.advantage_level == "step"
    method = "gigpo" if step_level else "offline_grpo"
    advantages_used: dict[str, Any] = {"source": "dataset"} if dataset_file else {}
    if step_level and not dataset_file and db is not None and not from_table and run_id is None and not recompute:
        from agent_rl_plugin.train.advantage_runs import latest_matching_run

        stored = latest_matching_run(db, where=where, sql=sql, weights=weights)
        if stored is not None:
            from_table, run_id = True, stored.run_id
            advantages_used = {"source": "stored", "run_id": stored.run_id, "line": stored.describe()}
    used_recipe = "steps" if step_level else "groups"
    dataset_sql = _dataset_sql(where, sql, dataset_file)
    if not step_level and not dataset_file and recipe != "groups":
        if db is None:
            raise with_hint(TrainError("offline GRPO from the store needs a database"), "pass the database", "db")
        ids, calls = _llm_calls_per_rollout(db, where, sql)
        if recipe == "steps" or calls > 1:
            from agent_rl_plugin.rl import compute_advantages

            advantages = compute_advantages(db, "grpo", rollout_ids=ids, weights=weights, write=True)
            advantages_used = {"source": "computed", "run_id": advantages.run_id}
            config = dataclasses.replace(config, advantage_level="step")
            step_level, from_table, run_id, used_recipe = True, True, advantages.run_id, "steps"
            where, sql = None, None
            where_ids: list[str] | None = ids
        else:
            where_ids = None
    else:
        where_ids = None
    report = None
    if dataset_file:
        columns = ("prompt", "completion", "advantage") if step_level else ("prompt", "completions", "advantages")
        dataset = load_jsonl_dataset(dataset_file, "step" if step_level else "GRPO group", columns)
    else:
        report = BuildReport()
        if step_level:
            dataset = build_step_dataset(
                db,
                where=where,
                sql=sql,
                weights=weights,
                from_table=from_table,
                run_id=run_id,
                report=report,
                rollout_ids=where_ids,
            )
        else:
            dataset = build_grpo_dataset(
                db, where=where, sql=sql, weights=weights, min_group_size=min_group_size, report=report
            )
        if len(dataset) == 0:
            raise _nothing_to_train("steps" if step_level else "GRPO groups", report)
    profile = apply_profile(config, on_profile)
    result, new_run_id = train_recorded(
        method=method,
        config=config,
        dataset=dataset,
        dataset_sql=dataset_sql,
        record_db=record_db,
        on_warning=on_warning,
        train=lambda: train_offline_grpo(config, dataset, hardware=profile, progress=progress),
        run_id=name,
        replace=replace,
    )
    summary = _summary(method, config, result, new_run_id, dataset_sql, profile)
    summary["recipe"] = used_recipe
    if not advantages_used and step_level and report is not None:
        used = report.extra.get("advantages_run_id")
        advantages_used = (
            {"source": "stored", "run_id": used, "line": str(used)} if used else {"source": "computed", "run_id": None}
        )
    summary["advantages"] = {k: v for k, v in advantages_used.items() if k != "line"} or None
    lines, moved = [], {}
    measured = result.extra.get("logprobs") or {}
    for sign, label in (
        ("positive", "log-prob per token of positive-advantage actions"),
        ("negative", "log-prob per token of negative-advantage actions"),
    ):
        base, trained = measured.get("base", {}).get(sign), measured.get("trained", {}).get(sign)
        if base is not None and trained is not None:
            moved[f"logp/{sign}"] = [base, trained]
            lines.append(f"{label}: {base:.4f} (base) -> {trained:.4f} (trained)")
    summary["moved"] = moved
    if advantages_used.get("source") == "stored":
        lines.insert(0, f"advantages: stored run {advantages_used['line']} (recompute to compute them afresh)")
    elif advantages_used.get("source") == "computed" and method == "gigpo":
        lines.insert(0, "advantages: computed for this run (no stored gigpo run matches this selection)")
    summary["extra_lines"] = [*lines, token_source_line(result.extra)]
    summary["build"] = report.to_dict() if report is not None else None
    return summary


def token_source_line(extra: dict[str, Any]) -> str:
    """One summary line: how many examples were trained on stored token ids, how many on
    re-tokenised text, and why stored ids were rejected (``TrainResult.extra`` of offline GRPO)."""
    line = (
        f"token ids: {extra.get('examples_with_stored_token_ids', 0)} examples from stored ids, "
        f"{extra.get('examples_retokenised', 0)} re-tokenised from text"
    )
    reasons = extra.get("stored_token_ids_rejected_reasons") or {}
    if extra.get("stored_token_ids_rejected"):
        detail = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items()))
        line += f"; {extra['stored_token_ids_rejected']} stored rejected ({detail})"
    if extra.get("stored_token_ids_ignored"):
        line += f"; {extra['stored_token_ids_ignored']} stored ignored (token_ids='ignore')"
    if extra.get("retokenisation_checked"):
        line += (
            f"; re-tokenising would change {extra.get('retokenisation_differs', 0)} "
            f"of {extra['retokenisation_checked']} checked"
        )
    return line


__all__ = [
    "RECIPES",
    "constant_reward",
    "run_errors",
    "run_grpo_offline",
    "run_grpo_online",
    "run_kto",
    "token_source_line",
]
