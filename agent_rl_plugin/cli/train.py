"""``agent-rl train kto|grpo|gigpo|config``: LoRA training on recorded rollouts (or a dataset file).

Every command takes its settings from options and, optionally, a ``--config`` YAML/TOML file
(options given win); the training settings are generated from the config fields
(:mod:`agent_rl_plugin.cli.train_options`), so the same names work in both. Fields left unset
that depend on the machine come from the hardware profile, printed at start. A run that used
the store is recorded in ``training_runs`` / ``training_metrics`` with the SQL that selected
its data (a ``--dataset`` run too, in ``--db``); ``--run NAME`` names the run (its run_id, and
``./runs/NAME`` as the default output directory). The base model loads offline unless
``--allow-download``. A summary (rows, steps, losses, adapter path, run id) is printed, or
given as JSON with ``--json``. ``kto`` and ``config`` live here; ``grpo`` and ``gigpo`` in
:mod:`agent_rl_plugin.cli.train_grpo`; the work itself in :mod:`agent_rl_plugin.train.runs`.
"""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.markup import escape

from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, db_path, fail
from agent_rl_plugin.cli.dataset import LabelMethod, parse_rewards
from agent_rl_plugin.cli.lazy_group import LazyGroup
from agent_rl_plugin.cli.train_options import ConfigOption, RunOption, SqlOption, WhereOption, with_settings
from agent_rl_plugin.cli.train_support import (
    build_config,
    check_sources,
    print_summary,
    profile_printer,
    report,
    say,
    source_db,
    warn,
)
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.config_files import config_template
from agent_rl_plugin.train.runs import run_kto


class TrainGroup(LazyGroup):
    """``agent-rl train``: ``kto`` and ``config`` registered here; ``grpo`` and ``gigpo`` listed
    from this table and imported from :mod:`agent_rl_plugin.cli.train_grpo` only when one runs
    (``train kto`` then builds none of their options); ``tests/test_cli_startup.py`` checks the
    table against the real commands."""

    lazy_commands = {
        "grpo": (
            "agent_rl_plugin.cli.train_grpo",
            "Train a LoRA adapter with GRPO: online (sampling, scored by reward plugins) or --offline.",
        ),
        "gigpo": (
            "agent_rl_plugin.cli.train_grpo",
            "Offline GiGPO: per-step advantages, tool results masked (same as grpo --offline --level step).",
        ),
    }
    register_function = "register_train_commands"
    lazy_first = False


app = typer.Typer(
    cls=TrainGroup,
    help="Train LoRA adapters on recorded rollouts (KTO, GRPO online/offline, GiGPO).",
    no_args_is_help=True,
)


@with_settings("kto")
def kto_command(
    config_file: Optional[str] = ConfigOption,
    db: str = DbOption,
    where: Optional[str] = WhereOption,
    sql: Optional[str] = SqlOption,
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Train on a KTO JSONL file instead of the store."),
    label: LabelMethod = typer.Option(LabelMethod.threshold, "--label", help="KTO label rule."),
    threshold: float = typer.Option(0.5, "--threshold", help="--label threshold: reward >= this is desirable."),
    quantile: float = typer.Option(0.5, "--quantile", help="--label quantile: reward >= this quantile is desirable."),
    per_group: bool = typer.Option(False, "--per-group", metavar="", help="--label quantile: quantile of each group."),
    top_k: int = typer.Option(1, "--top-k", min=0, help="--label group: best k of each group are desirable."),
    bottom_k: int = typer.Option(1, "--bottom-k", min=0, help="--label group: worst k of each group are undesirable."),
    reward: Optional[list[str]] = typer.Option(
        None,
        "--reward",
        "-r",
        metavar="NAME[=W]",
        help="Reward NAME or NAME=WEIGHT combined into the label; repeat. Default: all, weight 1.",
    ),
    run_name: Optional[str] = RunOption,
    json_output: bool = JsonOption,
    settings: Optional[dict[str, Any]] = None,  # replaced by the generated training options
) -> None:
    """Train a LoRA adapter with KTO on recorded rollouts and record the run."""

    def run() -> dict[str, Any]:
        from agent_rl_plugin.data import DatasetError, LabelRule  # the data layer loads when a command runs

        try:
            rule = LabelRule(
                method=label.value,
                threshold=threshold,
                quantile=quantile,
                top_k=top_k,
                bottom_k=bottom_k,
                per_group=per_group,
            )
        except DatasetError as exc:
            raise UserError(str(exc), getattr(exc, "hint", None)) from None
        check_sources(where, sql, dataset)
        config = build_config("kto", config_file, settings or {}, run_name)
        return run_kto(
            config,
            db=source_db(db, needed=not dataset),
            where=where,
            sql=sql,
            dataset_file=dataset,
            label_rule=rule,
            weights=parse_rewards(reward, db_path(db)),
            on_profile=profile_printer(json_output),
            on_warning=warn,
            run_name=run_name,
        )

    report(run, json_output)


def config_command(
    method: str = typer.Argument(..., help="kto, grpo, offline_grpo or gigpo."),
    out: Optional[str] = typer.Option(
        None, "--out", "-o", help="Write the template here instead of printing it (.toml: TOML, else YAML)."
    ),
    toml: bool = typer.Option(False, "--toml", metavar="", help="TOML instead of YAML (default: from --out)."),
    fmt: Optional[str] = typer.Option(None, "--format", hidden=True),  # the old spelling: yaml or toml
) -> None:
    """Print a commented config template (every field, its help and default) for --config.

    The template loads with --config as written: an empty model is filled by --model, an empty
    output_dir means the default output directory."""
    if fmt is None:
        fmt = "toml" if toml or (out or "").lower().endswith(".toml") else "yaml"
    try:
        text = config_template(method, fmt=fmt)
    except (TrainConfigError, ValueError) as exc:
        fail(escape(str(exc)), "methods: kto, grpo, offline_grpo, gigpo; formats: yaml, toml")
    if out:
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)
        say(
            f"wrote {out}: set model (or pass --model; an empty output_dir means ./runs/...), then "
            f"agent-rl train {method.replace('offline_grpo', 'grpo --offline')} --config {out}"
        )
    else:
        print(text, end="")


app.command("kto")(kto_command)
app.command("config")(config_command)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="train")


__all__ = ["TrainGroup", "app", "config_command", "kto_command", "print_summary", "source_db"]
