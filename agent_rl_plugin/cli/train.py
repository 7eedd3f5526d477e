"""``agent-rl train kto``: KTO with LoRA on recorded rollouts (or a dataset file).

The dataset comes from the store (``--where`` over the rollouts view, or ``--sql`` returning
``rollout_id``) or from a ``--dataset FILE.jsonl`` with ``prompt``/``completion``/``label`` rows.
Training runs :func:`agent_rl_plugin.train.train_kto`; a run that used the store is recorded in
``training_runs`` / ``training_metrics``. A summary (rows, label balance, steps, final loss,
adapter path, run id) is printed, or given as JSON with ``--json``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from datetime import datetime, timezone
from typing import Any, Optional

import typer
from rich.markup import escape

from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, console, db_path, fail, print_json
from agent_rl_plugin.cli.dataset import LabelMethod
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Train LoRA adapters on recorded rollouts.", no_args_is_help=True)


def say(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def default_out() -> str:
    return os.path.join("runs", "kto-" + datetime.now().strftime("%Y%m%d-%H%M%S"))


def load_jsonl_dataset(path: str):
    """A ``datasets.Dataset`` from a JSONL file of KTO rows."""
    import json

    from datasets import Dataset

    if not os.path.isfile(path):
        raise UserError(f"dataset file {path} does not exist", "give a .jsonl file written by agent-rl dataset build kto")
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                raise UserError(
                    f"{path} line {number} is not JSON", "give a .jsonl file with one KTO row (prompt, completion, label) per line"
                ) from None
    if not rows:
        raise UserError(f"{path} has no rows", "build one with agent-rl dataset build kto --out FILE.jsonl")
    return Dataset.from_list(rows)


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


def run_kto(
    *,
    model: str,
    out: str,
    db: str | None = None,
    where: str | None = None,
    sql: str | None = None,
    dataset_file: str | None = None,
    label_rule: Any = "threshold",
    weights: Any = None,
    epochs: float = 1.0,
    max_steps: int | None = None,
    learning_rate: float = 5e-5,
    batch_size: int = 8,
    lora_r: int = 16,
    record: bool = True,
    config_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the dataset, train, record the run; returns the summary. Raises :class:`UserError`."""
    from agent_rl_plugin.data import BuildReport, DatasetError, build_kto_dataset
    from agent_rl_plugin.store.errors import StoreError
    from agent_rl_plugin.train import KTOTrainConfig, TrainConfigError, TrainError, record_training_run, train_kto
    from agent_rl_plugin.train.kto import check_kto_dataset

    sources = [x for x in (where, sql, dataset_file) if x]
    if len(sources) > 1:
        raise UserError("give one of --where, --sql or --dataset, not several")
    check_model_path(model)
    try:
        config = KTOTrainConfig(
            model=model, output_dir=out, epochs=epochs, max_steps=max_steps, learning_rate=learning_rate,
            batch_size=batch_size, lora_r=lora_r, **(config_overrides or {}),
        )
    except TrainConfigError as exc:
        raise UserError(str(exc)) from None
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
            message, _, hint = str(exc).partition(" Fix: ")
            raise UserError(message, hint or None) from None
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
    started_at = datetime.now(timezone.utc)
    record_db = db if (record and not dataset_file) else None
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the trainer's log lines; stdout stays for the summary/JSON
            result = train_kto(config, dataset)
    except (TrainError, TrainConfigError) as exc:
        if record_db:
            record_training_run(record_db, None, config, dataset_sql, status="error", error=str(exc),
                                started_at=started_at, n_rows=len(dataset))
        raise UserError(str(exc)) from None
    except OSError as exc:
        if record_db:
            record_training_run(record_db, None, config, dataset_sql, status="error", error=str(exc),
                                started_at=started_at, n_rows=len(dataset))
        raise UserError(f"cannot load or save the model: {exc}", "check --model and --out") from None
    run_id = None
    if record_db:
        run_id = record_training_run(record_db, result, config, dataset_sql, started_at=started_at)
    losses = [e["loss"] for e in result.log_history if isinstance(e.get("loss"), (int, float))]
    return {
        "method": "kto",
        "run_id": run_id,
        "model": model,
        "dataset": dataset_sql,
        "rows": result.n_rows,
        "labels": {"desirable": n_desirable, "undesirable": n_undesirable},
        "weights": {"desirable": result.desirable_weight, "undesirable": result.undesirable_weight},
        "steps": result.global_step,
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else result.metrics.get("train_loss"),
        "metrics": result.metrics,
        "adapter_path": result.adapter_path,
        "output_dir": result.output_dir,
        "seconds": round(result.seconds, 2),
        "build": report.to_dict() if report is not None else None,
    }


def _count(dataset, value: bool) -> int:
    return sum(1 for x in dataset["label"] if bool(x) == value) if "label" in dataset.column_names else 0


def print_summary(summary: dict) -> None:
    labels = summary["labels"]
    say(f"Trained KTO (LoRA) on {summary['rows']} rows from {summary['dataset']} in {summary['seconds']} s.")
    say(f"  labels: {labels['desirable']} desirable / {labels['undesirable']} undesirable "
        f"(weights {summary['weights']['desirable']:.3g} / {summary['weights']['undesirable']:.3g})")
    loss = summary["final_loss"]
    first = summary["first_loss"]
    loss_text = "n/a" if loss is None else f"{loss:.4f}" + ("" if first is None else f" (first {first:.4f})")
    say(f"  steps: {summary['steps']}, final loss: {loss_text}")
    say(f"  adapter: {summary['adapter_path']}")
    if summary["run_id"]:
        say(f"  run_id: {summary['run_id']} (select * from training_metrics where run_id = '{summary['run_id']}')")


@app.command("kto")
def kto_command(
    model: str = typer.Option(..., "--model", "-m", help="Base model: a local directory (save_pretrained) or a model name."),
    db: str = DbOption,
    where: Optional[str] = typer.Option(None, "--where", "-w", help="SQL condition over the rollouts view."),
    sql: Optional[str] = typer.Option(None, "--sql", help="A full read-only query returning rollout_id."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Train on a KTO JSONL file instead of the store."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Output directory (default ./runs/kto-<timestamp>)."),
    epochs: float = typer.Option(1.0, "--epochs", help="Passes over the dataset (ignored with --max-steps)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after this many optimizer steps."),
    lr: float = typer.Option(5e-5, "--lr", help="Learning rate."),
    batch_size: int = typer.Option(8, "--batch-size", help="Per-device batch size (>= 2 for KTO)."),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank."),
    label: LabelMethod = typer.Option(LabelMethod.threshold, "--label", help="KTO label rule."),
    threshold: float = typer.Option(0.5, "--threshold", help="--label threshold: reward >= this is desirable."),
    quantile: float = typer.Option(0.5, "--quantile", help="--label quantile: reward >= this quantile is desirable."),
    per_group: bool = typer.Option(False, "--per-group", help="--label quantile: quantile of each group."),
    top_k: int = typer.Option(1, "--top-k", min=0, help="--label group: best k of each group are desirable."),
    bottom_k: int = typer.Option(1, "--bottom-k", min=0, help="--label group: worst k of each group are undesirable."),
    json_output: bool = JsonOption,
) -> None:
    """Train a LoRA adapter with KTO on recorded rollouts and record the run."""
    from agent_rl_plugin.data import DatasetError, LabelRule

    try:
        rule = LabelRule(method=label.value, threshold=threshold, quantile=quantile, top_k=top_k,
                         bottom_k=bottom_k, per_group=per_group)
        path = None if dataset else db_path(db)
        if path is not None and not os.path.exists(path):
            raise UserError(f"database {path} does not exist", "record rollouts first (agent-rl demo), or pass --db")
        summary = run_kto(
            model=model, out=out or default_out(), db=path, where=where, sql=sql, dataset_file=dataset,
            label_rule=rule, epochs=epochs, max_steps=max_steps, learning_rate=lr, batch_size=batch_size, lora_r=lora_r,
        )
    except (UserError, DatasetError) as exc:
        hint = getattr(exc, "hint", None)
        fail(escape(str(exc)), escape(hint) if hint else None)
    if json_output:
        print_json(summary)
    else:
        print_summary(summary)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="train")
