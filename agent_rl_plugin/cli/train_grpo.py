"""``agent-rl train grpo`` (online, or ``--offline`` on logged groups) and ``agent-rl train gigpo``
(offline, per-step GiGPO advantages); :mod:`agent_rl_plugin.cli.train` adds both to the
``train`` app.

* online: prompts mined from the selected rollouts (or the ``tasks`` table with ``--tasks``),
  completions sampled by TRL's ``GRPOTrainer``, scored by the ``--reward`` plugins (``--from-tasks``;
  ``--tasks`` is its old, hidden spelling: in the grammar ``--tasks`` names a task file);
* ``--offline``: the logged completions of each GRPO group with their advantages
  (``build_grpo_dataset``); ``--level step`` / ``gigpo``: one row per LLM call with its GiGPO
  advantage (``build_step_dataset``, computed, or read from the ``advantages`` table with
  ``--from-table`` / ``--advantages-run``; by default the newest stored gigpo run matching the
  selection, ``--recompute`` computes afresh), tool results masked out of the loss.

The training settings (``--lr``, ``--beta``, ``--num-generations``...) are generated from the
config fields (:mod:`agent_rl_plugin.cli.train_options`); the work is
:mod:`agent_rl_plugin.train.runs`.
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, db_path
from agent_rl_plugin.cli.dataset import parse_rewards
from agent_rl_plugin.cli.train_options import (
    ConfigOption,
    RunOption,
    SqlOption,
    WhereOption,
    command_options,
    with_settings,
)
from agent_rl_plugin.cli.train_support import (
    build_config,
    check_sources,
    profile_printer,
    report,
    source_db,
    warn,
)
from agent_rl_plugin.train.runs import run_grpo_offline, run_grpo_online

RecomputeOption = typer.Option(
    False,
    "--recompute",
    metavar="",
    help="Step level: compute the advantages afresh instead of using the newest stored gigpo "
    "`advantages compute` run that matches the selection and rewards.",
)


def _flags_of(names: set[str], *methods: str) -> list[str]:
    return [o.flag for o in command_options(*methods) if o.name in names and o.flag]


_ONLINE = {o.name for o in command_options("grpo")}
_OFFLINE = {o.name for o in command_options("offline_grpo")}
#: Options only one side of ``train grpo`` has (besides --from-tasks, --dataset, --from-table, --advantages-run).
ONLINE_ONLY = _ONLINE - _OFFLINE
OFFLINE_ONLY = _OFFLINE - _ONLINE


def _either(flags: list[str]) -> str:
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"


def _online_rewards(weights: dict[str, float] | None) -> dict[str, float]:
    if not weights:
        from agent_rl_plugin.rewards.registry import collect_rewards

        names = ", ".join(sorted(collect_rewards())) or "none installed"
        raise UserError(
            "online GRPO needs at least one --reward to score its samples", f"pass --reward NAME (installed: {names})"
        )
    return weights


@with_settings("grpo", "offline_grpo", modes={"grpo": "Online:", "offline_grpo": "--offline:"})
def grpo_command(
    config_file: Optional[str] = ConfigOption,
    db: str = DbOption,
    offline: bool = typer.Option(
        False, "--offline", metavar="", help="Train on the logged groups' completions instead of sampling."
    ),
    where: Optional[str] = WhereOption,
    sql: Optional[str] = SqlOption,
    tasks: bool = typer.Option(
        False, "--from-tasks", metavar="", help="Online: take prompts from the tasks table (--where filters it)."
    ),
    tasks_old: bool = typer.Option(False, "--tasks", hidden=True),  # the old spelling of --from-tasks
    dataset: Optional[str] = typer.Option(
        None, "--dataset", help="--offline: a JSONL file of GRPO groups or step rows."
    ),
    reward: Optional[list[str]] = typer.Option(
        None,
        "--reward",
        "-r",
        metavar="NAME[=W]",
        help="Online: reward plugin NAME[=WEIGHT] scoring the samples (repeat). Offline: rewards combined into advantages.",
    ),
    from_table: bool = typer.Option(
        False,
        "--from-table",
        metavar="",
        help="--level step: the newest stored advantages run covering the selection, whatever its selection.",
    ),
    run_id: Optional[str] = typer.Option(
        None, "--advantages-run", help="--level step: that stored advantages run's rows (agent-rl advantages runs)."
    ),
    recompute: bool = RecomputeOption,
    run_name: Optional[str] = RunOption,
    recipe: str = typer.Option(
        "auto",
        "--recipe",
        help="--offline, episode level: 'steps' trains every LLM call with its episode's GRPO advantage, "
        "'groups' one completion per rollout, 'auto' steps when a rollout made several LLM calls.",
    ),
    json_output: bool = JsonOption,
    settings: Optional[dict[str, Any]] = None,  # replaced by the generated training options
) -> None:
    """Train a LoRA adapter with GRPO: online (sampling, scored by reward plugins) or --offline.

    Online, a run whose reward is one constant value throughout (every completion scored the
    same) ends with a warning naming the likely cause; it is recorded too."""

    given = settings or {}
    tasks = tasks or tasks_old

    def run() -> dict[str, Any]:
        weights = parse_rewards(reward, db_path(db) if offline else None)
        if offline:
            online_flags = ["--from-tasks"] + _flags_of(ONLINE_ONLY, "grpo")
            if tasks or any(name in given for name in ONLINE_ONLY):
                raise UserError(f"{_either(online_flags)} are online options", "drop them, or drop --offline")
            check_sources(where, sql, dataset)
            config = build_config("offline_grpo", config_file, given, run_name)
            return run_grpo_offline(
                config,
                db=source_db(db, needed=not dataset),
                where=where,
                sql=sql,
                dataset_file=dataset,
                weights=weights,
                from_table=from_table,
                run_id=run_id,
                recipe=recipe,
                on_profile=profile_printer(json_output),
                on_warning=warn,
                run_name=run_name,
                recompute=recompute,
            )
        offline_flags = (
            ["--dataset"]
            + _flags_of(OFFLINE_ONLY, "offline_grpo")
            + ["--from-table", "--advantages-run", "--recompute"]
        )
        if dataset or from_table or run_id or recompute or any(name in given for name in OFFLINE_ONLY):
            raise UserError(f"{_either(offline_flags)} need --offline", "add --offline to train on logged completions")
        check_sources(where, sql)
        rewards = _online_rewards(weights)
        config = build_config("grpo", config_file, given, run_name)
        return run_grpo_online(
            config,
            db=source_db(db, needed=True),
            rewards=rewards,
            where=where,
            sql=sql,
            tasks=tasks,
            on_profile=profile_printer(json_output),
            on_warning=warn,
            run_name=run_name,
        )

    report(run, json_output)


@with_settings("gigpo")
def gigpo_command(
    config_file: Optional[str] = ConfigOption,
    db: str = DbOption,
    where: Optional[str] = WhereOption,
    sql: Optional[str] = SqlOption,
    dataset: Optional[str] = typer.Option(
        None, "--dataset", help="A JSONL file of step rows (prompt, completion, advantage)."
    ),
    reward: Optional[list[str]] = typer.Option(
        None, "--reward", "-r", metavar="NAME[=W]", help="Rewards combined into the advantages (NAME[=W]); repeat."
    ),
    from_table: bool = typer.Option(
        False,
        "--from-table",
        metavar="",
        help="Use the newest stored advantages run covering the selection, whatever its selection.",
    ),
    run_id: Optional[str] = typer.Option(
        None, "--advantages-run", help="Use that stored advantages run's rows (agent-rl advantages runs)."
    ),
    recompute: bool = RecomputeOption,
    run_name: Optional[str] = RunOption,
    json_output: bool = JsonOption,
    settings: Optional[dict[str, Any]] = None,  # replaced by the generated training options
) -> None:
    """Offline GiGPO: per-step advantages, tool results masked (same as grpo --offline --level step).

    Advantages: the newest stored `agent-rl advantages compute --method gigpo` run over the same
    --where and rewards is used (the summary names it); --advantages-run ID picks one,
    --recompute computes them afresh."""

    def run() -> dict[str, Any]:
        check_sources(where, sql, dataset)
        if recompute and (from_table or run_id):
            raise UserError("--recompute computes the advantages afresh: drop --from-table and --advantages-run")
        config = build_config("gigpo", config_file, settings or {}, run_name)
        return run_grpo_offline(
            config,
            db=source_db(db, needed=not dataset),
            where=where,
            sql=sql,
            dataset_file=dataset,
            weights=parse_rewards(reward, db_path(db)),
            from_table=from_table,
            run_id=run_id,
            on_profile=profile_printer(json_output),
            on_warning=warn,
            run_name=run_name,
            recompute=recompute,
        )

    report(run, json_output)


def register_train_commands(cli: typer.Typer) -> None:
    """Add ``grpo`` and ``gigpo`` to the ``agent-rl train`` group ``cli`` (which imports this
    module only when one of them runs or is listed: see :mod:`agent_rl_plugin.cli.train`)."""
    cli.command("grpo")(grpo_command)
    cli.command("gigpo")(gigpo_command)


__all__ = [
    "ConfigOption",
    "RecomputeOption",
    "RunOption",
    "SqlOption",
    "WhereOption",
    "gigpo_command",
    "grpo_command",
    "register_train_commands",
]
