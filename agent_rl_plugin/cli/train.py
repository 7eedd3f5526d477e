"""``agent-rl train kto|grpo|gigpo``: LoRA training on recorded rollouts (or a dataset file).

Every command takes its settings from flags and, optionally, a ``--config`` YAML/TOML file (flags
win); fields left unset that depend on the machine come from the hardware profile, printed at
start. A run that used the store is recorded in ``training_runs`` / ``training_metrics`` with the
SQL that selected its data. A summary (rows, steps, losses, adapter path, run id) is printed, or
given as JSON with ``--json``. ``kto`` lives here; ``grpo`` and ``gigpo`` in
:mod:`agent_rl_plugin.cli.train_grpo`.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import typer
from rich.markup import escape

from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, db_path, fail, print_json
from agent_rl_plugin.cli.dataset import LabelMethod, parse_rewards
from agent_rl_plugin.cli.train_support import (
    apply_profile,
    build_config,
    check_model_path,
    load_jsonl_dataset,
    losses,
    say,
    store_error,
    train_recorded,
)
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.train.distributed import is_main_process

app = typer.Typer(help="Train LoRA adapters on recorded rollouts (KTO, GRPO online/offline, GiGPO).", no_args_is_help=True)

# Options every train command shares.
ModelOption = typer.Option(None, "--model", "-m", help="Base model: a local directory (save_pretrained) or a model name.")
ConfigOption = typer.Option(None, "--config", "-c", help="A YAML/TOML training config; flags given here win over it.")
OutOption = typer.Option(None, "--out", "-o", help="Output directory (default ./runs/<method>-<timestamp>).")
EpochsOption = typer.Option(None, "--epochs", help="Passes over the dataset (ignored with --max-steps).")
MaxStepsOption = typer.Option(None, "--max-steps", help="Stop after this many optimizer steps.")
LrOption = typer.Option(None, "--lr", help="Learning rate.")
BatchOption = typer.Option(None, "--batch-size", help="Per-device batch size (default: hardware profile).")
LoraOption = typer.Option(None, "--lora-r", help="LoRA rank (default: hardware profile).")
SaveStepsOption = typer.Option(None, "--save-steps", help="Save a checkpoint every N steps (enables checkpoints).")
WhereOption = typer.Option(None, "--where", "-w", help="SQL condition over the rollouts view.")
SqlOption = typer.Option(None, "--sql", help="A full read-only query returning rollout_id.")
ResumeOption = typer.Option(
    None, "--resume", help="Resume from a checkpoint directory, or 'latest' for the newest under --out."
)


def common_flags(epochs, max_steps, lr, batch_size, lora_r, save_steps, resume) -> dict[str, Any]:
    """Config fields of the shared flags (``None``: not given)."""
    return {
        "epochs": epochs,
        "max_steps": max_steps,
        "learning_rate": lr,
        "batch_size": batch_size,
        "lora_r": lora_r,
        "save_steps": save_steps,
        "save_strategy": "steps" if save_steps else None,
        "resume_from_checkpoint": resume,
    }


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
    quiet: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Build the KTO dataset, train, record the run; returns the summary. Raises :class:`UserError`."""
    from agent_rl_plugin.data import BuildReport, DatasetError, build_kto_dataset
    from agent_rl_plugin.store.errors import StoreError
    from agent_rl_plugin.train import train_kto
    from agent_rl_plugin.train.common import TrainError
    from agent_rl_plugin.train.kto import check_kto_dataset

    if len([x for x in (where, sql, dataset_file) if x]) > 1:
        raise UserError("give one of --where, --sql or --dataset, not several")
    check_model_path(config.model)
    report = None
    if dataset_file:
        dataset = load_jsonl_dataset(dataset_file)
        dataset_sql = f"file:{os.path.abspath(dataset_file)}"
    else:
        report = BuildReport()
        try:
            dataset = build_kto_dataset(db, where=where, sql=sql, label_rule=label_rule, weights=weights, report=report)
        except DatasetError as exc:
            raise UserError(str(exc), getattr(exc, "hint", None)) from None
        except StoreError as exc:
            raise store_error(exc) from None
        dataset_sql = sql or where or "all rollouts"
        if len(dataset) == 0:
            selection = f" matching {dataset_sql!r}" if (where or sql) else ""
            raise UserError(
                f"no KTO rows{selection}: {report.to_dict().get('rollouts', 0)} rollouts matched",
                "record and score rollouts first (agent-rl demo, agent-rl score), or widen --where/--sql",
            )
    try:
        n_desirable, n_undesirable = check_kto_dataset(dataset)
    except TrainError as exc:
        raise UserError(
            f"only one label class: {_count(dataset, True)} desirable, {_count(dataset, False)} undesirable",
            "KTO needs both; try --label quantile or --label group, or change --threshold",
        ) from exc
    profile = apply_profile(config, quiet)
    result, run_id = train_recorded(
        method="kto", config=config, dataset=dataset, dataset_sql=dataset_sql,
        record_db=db if (record and not dataset_file) else None,
        train=lambda: train_kto(config, dataset, hardware=profile, progress=progress),
    )
    first, final = losses(result)
    return {
        "method": "kto",
        "run_id": run_id,
        "model": config.model,
        "dataset": dataset_sql,
        "rows": result.n_rows,
        "labels": {"desirable": n_desirable, "undesirable": n_undesirable},
        "weights": {"desirable": result.desirable_weight, "undesirable": result.undesirable_weight},
        "steps": result.global_step,
        "first_loss": first,
        "final_loss": final,
        "metrics": result.metrics,
        "hardware": profile.describe(),
        "resumed_from": result.resumed_from,
        "adapter_path": result.adapter_path,
        "output_dir": result.output_dir,
        "seconds": round(result.seconds, 2),
        "build": report.to_dict() if report is not None else None,
    }


def _count(dataset, value: bool) -> int:
    return sum(1 for x in dataset["label"] if bool(x) == value) if "label" in dataset.column_names else 0


def print_summary(summary: dict) -> None:
    say(f"Trained {summary['method'].upper()} (LoRA) on {summary['rows']} rows from {summary['dataset']} "
        f"in {summary['seconds']} s.")
    if "labels" in summary:
        labels = summary["labels"]
        say(f"  labels: {labels['desirable']} desirable / {labels['undesirable']} undesirable "
            f"(weights {summary['weights']['desirable']:.3g} / {summary['weights']['undesirable']:.3g})")
    loss = summary["final_loss"]
    first = summary["first_loss"]
    loss_text = "n/a" if loss is None else f"{loss:.4f}" + ("" if first is None else f" (first {first:.4f})")
    say(f"  steps: {summary['steps']}, final loss: {loss_text}")
    for line in summary.get("extra_lines", []):
        say(f"  {line}")
    if summary.get("resumed_from"):
        say(f"  resumed from: {summary['resumed_from']}")
    say(f"  adapter: {summary['adapter_path']}")
    if summary["run_id"]:
        say(f"  run_id: {summary['run_id']} (select * from training_metrics where run_id = '{summary['run_id']}')")


def source_db(db: str | None, needed: bool) -> str | None:
    """The database path when the data comes from the store; it must exist."""
    if not needed:
        return None
    path = db_path(db)
    if not os.path.exists(path):
        raise UserError(f"database {path} does not exist", "record rollouts first (agent-rl demo), or pass --db")
    return path


@app.command("kto")
def kto_command(
    model: Optional[str] = ModelOption,
    config_file: Optional[str] = ConfigOption,
    db: str = DbOption,
    where: Optional[str] = WhereOption,
    sql: Optional[str] = SqlOption,
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Train on a KTO JSONL file instead of the store."),
    out: Optional[str] = OutOption,
    epochs: Optional[float] = EpochsOption,
    max_steps: Optional[int] = MaxStepsOption,
    lr: Optional[float] = LrOption,
    batch_size: Optional[int] = BatchOption,
    lora_r: Optional[int] = LoraOption,
    save_steps: Optional[int] = SaveStepsOption,
    resume: Optional[str] = ResumeOption,
    beta: Optional[float] = typer.Option(None, "--beta", help="KTO beta (strength of the implicit KL penalty)."),
    label: LabelMethod = typer.Option(LabelMethod.threshold, "--label", help="KTO label rule."),
    threshold: float = typer.Option(0.5, "--threshold", help="--label threshold: reward >= this is desirable."),
    quantile: float = typer.Option(0.5, "--quantile", help="--label quantile: reward >= this quantile is desirable."),
    per_group: bool = typer.Option(False, "--per-group", help="--label quantile: quantile of each group."),
    top_k: int = typer.Option(1, "--top-k", min=0, help="--label group: best k of each group are desirable."),
    bottom_k: int = typer.Option(1, "--bottom-k", min=0, help="--label group: worst k of each group are undesirable."),
    reward: Optional[list[str]] = typer.Option(
        None, "--reward", "-r", help="Reward NAME or NAME=WEIGHT combined into the label; repeat. Default: all, weight 1."
    ),
    json_output: bool = JsonOption,
) -> None:
    """Train a LoRA adapter with KTO on recorded rollouts and record the run."""
    from agent_rl_plugin.data import DatasetError, LabelRule

    try:
        rule = LabelRule(method=label.value, threshold=threshold, quantile=quantile, top_k=top_k,
                         bottom_k=bottom_k, per_group=per_group)
        flags = common_flags(epochs, max_steps, lr, batch_size, lora_r, save_steps, resume)
        flags["beta"] = beta
        config = build_config("kto", config_file, model, out, flags)
        path = source_db(db, needed=not dataset)
        summary = run_kto(
            config, db=path, where=where, sql=sql, dataset_file=dataset, label_rule=rule,
            weights=parse_rewards(reward), quiet=json_output,
        )
    except (UserError, DatasetError) as exc:
        hint = getattr(exc, "hint", None)
        fail(escape(str(exc)), escape(hint) if hint else None)
    if not is_main_process():  # accelerate launch: one summary, from the process that recorded the run
        return
    if json_output:
        print_json(summary)
    else:
        print_summary(summary)


@app.command("config")
def config_command(
    method: str = typer.Argument(..., help="kto, grpo, offline_grpo or gigpo."),
    fmt: str = typer.Option("yaml", "--format", help="yaml or toml."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Write the template here instead of printing it."),
) -> None:
    """Print a commented config template (every field, its help and default) for --config."""
    from agent_rl_plugin.train.config import TrainConfigError
    from agent_rl_plugin.train.config_files import config_template

    try:
        text = config_template(method, fmt=fmt)
    except (TrainConfigError, ValueError) as exc:
        fail(escape(str(exc)), "methods: kto, grpo, offline_grpo, gigpo; formats: yaml, toml")
    if out:
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)
        say(f"wrote {out}: edit model and output_dir, then agent-rl train {method.replace('offline_grpo', 'grpo --offline')} --config {out}")
    else:
        print(text, end="")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    from agent_rl_plugin.cli import train_grpo  # noqa: F401  (adds grpo and gigpo to the app)

    cli.add_typer(app, name="train")
