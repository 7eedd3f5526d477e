"""``agent-rl train grpo`` (online, or ``--offline`` on logged groups) and ``agent-rl train gigpo``
(offline, per-step GiGPO advantages); both added to the ``train`` app of
:mod:`agent_rl_plugin.cli.train`.

* online: prompts mined from the selected rollouts (or the ``tasks`` table with ``--tasks``),
  completions sampled by TRL's ``GRPOTrainer``, scored by the ``--reward`` plugins;
* ``--offline``: the logged completions of each GRPO group with their advantages
  (``build_grpo_dataset``); ``--level step`` / ``gigpo``: one row per LLM call with its GiGPO
  advantage (``build_step_dataset``, computed, or read from the ``advantages`` table with
  ``--from-table`` / ``--run-id``), tool results masked out of the loss.
"""

from __future__ import annotations

import os
from enum import Enum
from typing import Any, Optional

import typer
from rich.markup import escape

from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, fail, print_json
from agent_rl_plugin.cli.dataset import parse_rewards
from agent_rl_plugin.cli.train import (
    BatchOption,
    ConfigOption,
    EpochsOption,
    LoraOption,
    LrOption,
    MaxStepsOption,
    ModelOption,
    OutOption,
    ResumeOption,
    SaveStepsOption,
    SqlOption,
    WhereOption,
    app,
    common_flags,
    print_summary,
    source_db,
)
from agent_rl_plugin.cli.train_support import apply_profile, build_config, load_jsonl_dataset, losses, store_error, train_recorded
from agent_rl_plugin.train.distributed import is_main_process


BetaOption = typer.Option(None, "--beta", help="KL coefficient against the base model (0: none).")
EpsilonOption = typer.Option(None, "--epsilon", help="Clipping range of the importance ratio.")


class Level(str, Enum):
    episode = "episode"
    step = "step"


def _dataset_sql(where: str | None, sql: str | None, dataset_file: str | None) -> str:
    if dataset_file:
        return f"file:{os.path.abspath(dataset_file)}"
    return sql or where or "all rollouts"


def _check_sources(*sources: Any) -> None:
    if len([x for x in sources if x]) > 1:
        raise UserError("give one of --where, --sql or --dataset, not several")


def _summary(method: str, config: Any, result: Any, run_id: str | None, dataset_sql: str, profile: Any) -> dict[str, Any]:
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


def run_grpo_online(
    config: Any,
    *,
    db: str,
    rewards: dict[str, float],
    where: str | None = None,
    sql: str | None = None,
    tasks: bool = False,
    record: bool = True,
    quiet: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Online GRPO on prompts from the store; returns the summary. Raises :class:`UserError`."""
    from agent_rl_plugin.data import BuildReport, DatasetError
    from agent_rl_plugin.store.errors import StoreError
    from agent_rl_plugin.train.grpo import train_grpo
    from agent_rl_plugin.train.prompts import build_prompt_dataset
    from agent_rl_plugin.train.reward_funcs import reward_functions

    _check_sources(where, sql)
    if where and tasks:
        from agent_rl_plugin.store.user_sql import UserSqlError, check_condition

        try:  # spliced into the tasks query on a reader connection: this check is its wall
            check_condition(where, "SELECT task_id FROM tasks WHERE ({where})")
        except UserSqlError as exc:
            raise UserError(f"bad --where: {exc}", "--where is a condition over the tasks table") from None
    if not rewards:
        from agent_rl_plugin.rewards.registry import collect_rewards

        names = ", ".join(sorted(collect_rewards())) or "none installed"
        raise UserError("online GRPO needs at least one --reward to score its samples",
                        f"pass --reward NAME (installed: {names})")
    report = BuildReport()
    try:
        prompts = build_prompt_dataset(db, where=where, sql=sql, source="tasks" if tasks else "rollouts", report=report)
        funcs = reward_functions(list(rewards), weights=rewards)
    except (DatasetError, ValueError, KeyError) as exc:
        raise UserError(str(exc), getattr(exc, "hint", None)) from None
    except StoreError as exc:
        raise store_error(exc) from None
    profile = apply_profile(config, quiet)
    dataset_sql = ("tasks: " if tasks else "") + _dataset_sql(where, sql, None)
    result, run_id = train_recorded(
        method="grpo", config=config, dataset=prompts, dataset_sql=dataset_sql, record_db=db if record else None,
        train=lambda: train_grpo(config, prompts, funcs, hardware=profile, progress=progress),
    )
    summary = _summary("grpo", config, result, run_id, dataset_sql, profile)
    reward = _first_last(result.log_history, "reward")
    summary["moved"] = {"reward": list(reward)} if reward else {}
    if reward:
        summary["extra_lines"] = [f"mean reward: {reward[0]:.4f} (first step) -> {reward[1]:.4f} (last step)"]
    summary["build"] = report.to_dict()
    return summary


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
    record: bool = True,
    quiet: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Offline GRPO (``config.advantage_level == 'episode'``) or GiGPO (``'step'``) on logged
    rollouts; returns the summary. Raises :class:`UserError`."""
    from agent_rl_plugin.data import BuildReport, DatasetError, build_grpo_dataset, build_step_dataset
    from agent_rl_plugin.store.errors import StoreError
    from agent_rl_plugin.train.offline import train_offline_grpo

    _check_sources(where, sql, dataset_file)
    step_level = config.advantage_level == "step"
    method = "gigpo" if step_level else "offline_grpo"
    report = None
    if dataset_file:
        columns = ("prompt", "completion", "advantage") if step_level else ("prompt", "completions", "advantages")
        dataset = load_jsonl_dataset(dataset_file, "step" if step_level else "GRPO group", columns)
    else:
        report = BuildReport()
        try:
            if step_level:
                dataset = build_step_dataset(db, where=where, sql=sql, weights=weights, from_table=from_table,
                                             run_id=run_id, report=report)
            else:
                dataset = build_grpo_dataset(db, where=where, sql=sql, weights=weights,
                                             min_group_size=min_group_size, report=report)
        except DatasetError as exc:
            raise UserError(str(exc), getattr(exc, "hint", None)) from None
        except StoreError as exc:
            raise store_error(exc) from None
        if len(dataset) == 0:
            raise UserError(
                f"no {'steps' if step_level else 'GRPO groups'} to train on: {report.to_dict().get('rollouts', 0)} rollouts matched",
                "record groups of rollouts (group_id) and score them (agent-rl score), or widen --where/--sql",
            )
    profile = apply_profile(config, quiet)
    dataset_sql = _dataset_sql(where, sql, dataset_file)
    result, new_run_id = train_recorded(
        method=method, config=config, dataset=dataset, dataset_sql=dataset_sql,
        record_db=db if (record and not dataset_file) else None,
        train=lambda: train_offline_grpo(config, dataset, hardware=profile, progress=progress),
    )
    summary = _summary(method, config, result, new_run_id, dataset_sql, profile)
    lines, moved = [], {}
    measured = result.extra.get("logprobs") or {}
    for sign, label in (("positive", "log-prob per token of positive-advantage actions"),
                        ("negative", "log-prob per token of negative-advantage actions")):
        base, trained = measured.get("base", {}).get(sign), measured.get("trained", {}).get(sign)
        if base is not None and trained is not None:
            moved[f"logp/{sign}"] = [base, trained]
            lines.append(f"{label}: {base:.4f} (base) -> {trained:.4f} (trained)")
    summary["moved"] = moved
    summary["extra_lines"] = lines
    summary["build"] = report.to_dict() if report is not None else None
    return summary


def _report(run: Any, json_output: bool) -> None:
    """Run a command's work; print its summary (or JSON), or its error as one line plus the fix."""
    try:
        summary = run()
    except UserError as exc:
        fail(escape(str(exc)), escape(exc.hint) if exc.hint else None)
    if not is_main_process():  # accelerate launch: one summary, from the process that recorded the run
        return
    if json_output:
        print_json(summary)
    else:
        print_summary(summary)


def _grpo_flags(common: dict[str, Any], beta, epsilon) -> dict[str, Any]:
    return {**common, "beta": beta, "epsilon": epsilon}


@app.command("grpo")
def grpo_command(
    model: Optional[str] = ModelOption,
    config_file: Optional[str] = ConfigOption,
    db: str = DbOption,
    offline: bool = typer.Option(False, "--offline", help="Train on the logged groups' completions instead of sampling."),
    level: Level = typer.Option(Level.episode, "--level", help="--offline: 'episode' (GRPO groups) or 'step' (GiGPO)."),
    where: Optional[str] = WhereOption,
    sql: Optional[str] = SqlOption,
    tasks: bool = typer.Option(False, "--tasks", help="Online: take prompts from the tasks table (--where filters it)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="--offline: a JSONL file of GRPO groups or step rows."),
    reward: Optional[list[str]] = typer.Option(
        None, "--reward", "-r",
        help="Online: reward plugin NAME[=WEIGHT] scoring the samples (repeat). Offline: rewards combined into advantages.",
    ),
    out: Optional[str] = OutOption,
    epochs: Optional[float] = EpochsOption,
    max_steps: Optional[int] = MaxStepsOption,
    lr: Optional[float] = LrOption,
    batch_size: Optional[int] = BatchOption,
    lora_r: Optional[int] = LoraOption,
    save_steps: Optional[int] = SaveStepsOption,
    resume: Optional[str] = ResumeOption,
    beta: Optional[float] = BetaOption,
    epsilon: Optional[float] = EpsilonOption,
    num_generations: Optional[int] = typer.Option(None, "--num-generations", help="Online: samples per prompt."),
    max_completion_length: Optional[int] = typer.Option(None, "--max-completion-length", help="Online: new tokens per sample."),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="Online: sampling temperature."),
    from_table: bool = typer.Option(False, "--from-table", help="--level step: read advantages from the advantages table."),
    run_id: Optional[str] = typer.Option(None, "--advantages-run", help="--level step: that advantages run's rows."),
    json_output: bool = JsonOption,
) -> None:
    """Train a LoRA adapter with GRPO: online (sampling, scored by reward plugins) or --offline."""

    def run() -> dict[str, Any]:
        flags = _grpo_flags(common_flags(epochs, max_steps, lr, batch_size, lora_r, save_steps, resume), beta, epsilon)
        weights = parse_rewards(reward)
        if offline:
            if tasks or num_generations or max_completion_length or temperature:
                raise UserError("--tasks, --num-generations, --max-completion-length and --temperature are online options",
                                "drop them, or drop --offline")
            flags["advantage_level"] = level.value
            config = build_config("offline_grpo", config_file, model, out, flags)
            return run_grpo_offline(config, db=source_db(db, needed=not dataset), where=where, sql=sql,
                                    dataset_file=dataset, weights=weights, from_table=from_table, run_id=run_id,
                                    quiet=json_output)
        if dataset or from_table or run_id or level != Level.episode:
            raise UserError("--dataset, --level, --from-table and --advantages-run need --offline",
                            "add --offline to train on logged completions")
        flags.update(num_generations=num_generations, max_completion_length=max_completion_length,
                     temperature=temperature)
        config = build_config("grpo", config_file, model, out, flags)
        return run_grpo_online(config, db=source_db(db, needed=True), rewards=weights or {}, where=where,
                               sql=sql, tasks=tasks, quiet=json_output)

    _report(run, json_output)


@app.command("gigpo")
def gigpo_command(
    model: Optional[str] = ModelOption,
    config_file: Optional[str] = ConfigOption,
    db: str = DbOption,
    where: Optional[str] = WhereOption,
    sql: Optional[str] = SqlOption,
    dataset: Optional[str] = typer.Option(None, "--dataset", help="A JSONL file of step rows (prompt, completion, advantage)."),
    reward: Optional[list[str]] = typer.Option(None, "--reward", "-r", help="Rewards combined into the advantages (NAME[=W])."),
    out: Optional[str] = OutOption,
    epochs: Optional[float] = EpochsOption,
    max_steps: Optional[int] = MaxStepsOption,
    lr: Optional[float] = LrOption,
    batch_size: Optional[int] = BatchOption,
    lora_r: Optional[int] = LoraOption,
    save_steps: Optional[int] = SaveStepsOption,
    resume: Optional[str] = ResumeOption,
    beta: Optional[float] = BetaOption,
    epsilon: Optional[float] = EpsilonOption,
    from_table: bool = typer.Option(False, "--from-table", help="Read advantages from the advantages table."),
    run_id: Optional[str] = typer.Option(None, "--advantages-run", help="That advantages run's rows."),
    json_output: bool = JsonOption,
) -> None:
    """Offline GiGPO: per-step advantages, tool results masked (same as grpo --offline --level step)."""

    def run() -> dict[str, Any]:
        flags = _grpo_flags(common_flags(epochs, max_steps, lr, batch_size, lora_r, save_steps, resume), beta, epsilon)
        config = build_config("gigpo", config_file, model, out, flags)
        return run_grpo_offline(config, db=source_db(db, needed=not dataset), where=where, sql=sql,
                                dataset_file=dataset, weights=parse_rewards(reward), from_table=from_table,
                                run_id=run_id, quiet=json_output)

    _report(run, json_output)
