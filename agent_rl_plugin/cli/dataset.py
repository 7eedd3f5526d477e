"""``agent-rl dataset build kto|grpo|steps``: training datasets from the store, by SQL.

The output format follows ``--out``'s extension: ``.jsonl`` (one JSON object per line),
``.parquet``, or a path ending with ``/`` (a ``datasets`` directory, reload it with
``datasets.load_from_disk``). A summary (rows, labels, groups, tokens, what was left out and
why) is printed, or given as JSON with ``--json``. ``--failed-rollouts exclude|zero_reward|keep``
says what to do with rollouts that ended in error, timeout or cancellation (default exclude);
the summary's ``failed_rollouts`` says how many it touched. See ``docs/datasets.md``.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer
from rich.markup import escape

from agent_rl_plugin.advantages.failed import (
    DEFAULT_FAILED_ROLLOUTS,
    FAILED_ROLLOUT_POLICIES,
    FailedRolloutsError,
    check_failed_rollouts,
    describe_failed,
)
from agent_rl_plugin.cli.common import (
    DbOption,
    JsonOption,
    UserError,
    console,
    db_path,
    fail,
    make_private,
    parse_reward_items,
    print_json,
)
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Build KTO, GRPO and GiGPO-step datasets from recorded rollouts.", no_args_is_help=True)


def failed_rollouts_option(value: str) -> str:
    """Typer callback of ``--failed-rollouts`` (here and in ``agent-rl advantages compute``): the
    value, else a usage error listing the choices. It lives here, not in the advantages command,
    so that ``agent-rl train`` (which takes this module's options) does not import that command
    and the scoring it uses."""
    try:
        return check_failed_rollouts(value)
    except FailedRolloutsError:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(FAILED_ROLLOUT_POLICIES)}") from None


class Kind(str, Enum):
    kto = "kto"
    grpo = "grpo"
    steps = "steps"


class LabelMethod(str, Enum):
    threshold = "threshold"
    quantile = "quantile"
    group = "group"


class Format(str, Enum):
    conversational = "conversational"
    text = "text"


def parse_rewards(values: list[str] | None, db: str | None = None) -> dict[str, float] | None:
    """``["a", "b=2"]`` -> ``{"a": w_a, "b": 2.0}``; ``None`` when no names are given. A name
    given without a weight gets the weight recorded for it in the store ``db`` (the weight
    ``rollouts.total_reward`` applies, as ``advantages compute -r NAME`` does), else 1.0."""
    if not values:
        return None
    names, explicit = parse_reward_items(values)
    bare = [name for name in names if name not in explicit]
    weights = {name: explicit.get(name, 1.0) for name in names}
    if bare and db:
        recorded = _recorded_weights(db)
        weights.update({name: recorded[name] for name in bare if name in recorded})
    return weights


def _recorded_weights(db: str) -> dict[str, float]:
    """The weights ``reward_weights`` of the store at ``db`` records ({} when there is no store)."""
    import os

    if not os.path.exists(db):
        return {}
    from agent_rl_plugin.rewards.weights import stored_weights
    from agent_rl_plugin.store import open_reader

    reader = open_reader(db)
    try:
        return stored_weights(reader)
    finally:
        reader.close()


def say(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_summary(summary: dict, out: str) -> None:
    say(f"Wrote {summary['rows']} {summary['kind']} rows to {out} ({summary['output_format']}, {summary['format']}).")
    say(f"  rollouts matched: {summary['rollouts']}")
    if "labels" in summary:
        labels = summary["labels"]
        say(
            f"  labels: {labels['desirable']} desirable / {labels['undesirable']} undesirable ({summary.get('label_rule')})"
        )
    if "groups" in summary:
        say(f"  groups: {summary['groups']}, mean group size {summary['mean_group_size']}")
    if "steps_with_logprobs" in summary:
        say(f"  steps with behaviour log-probs: {summary['steps_with_logprobs']}")
    if "advantages_run_id" in summary:
        say(f"  advantages from run {summary['advantages_run_id']}")
    say(f"  tokens (approx., {summary['tokens_method']}): {summary['tokens']}")
    if summary.get("reward_names"):
        say(f"  rewards combined: {', '.join(summary['reward_names'])}")
    failed = describe_failed(summary.get("failed_rollouts") or {})
    if failed:
        say(f"  failed rollouts: {failed}")
    for reason, count in summary["left_out"].items():
        examples = summary["left_out_examples"].get(reason) or []
        tail = f" (e.g. {', '.join(examples)})" if examples else ""
        say(f"  left out: {count} {reason}{tail}")
    for note in summary["notes"]:
        say(f"  note: {note}")


@app.command("build")
def build_command(
    kind: Kind = typer.Argument(..., help="kto (prompt/completion/label), grpo (one row per group) or steps (GiGPO)."),
    out: str = typer.Option(..., "--out", "-o", help="Output: FILE.jsonl, FILE.parquet, or DIR/ (save_to_disk)."),
    db: str = DbOption,
    where: Optional[str] = typer.Option(None, "--where", "-w", help="SQL condition over the rollouts view."),
    sql: Optional[str] = typer.Option(None, "--sql", help="A full read-only query returning rollout_id."),
    reward: Optional[list[str]] = typer.Option(
        None,
        "--reward",
        "-r",
        metavar="NAME[=W]",
        help="Reward NAME or NAME=WEIGHT to combine; repeat. Default: every episode reward, weight 1.",
    ),
    label: LabelMethod = typer.Option(LabelMethod.threshold, "--label", help="KTO label rule."),
    threshold: float = typer.Option(0.5, "--threshold", help="--label threshold: reward >= this is desirable."),
    quantile: float = typer.Option(0.5, "--quantile", help="--label quantile: reward >= this quantile is desirable."),
    per_group: bool = typer.Option(False, "--per-group", help="--label quantile: quantile of each group."),
    top_k: int = typer.Option(1, "--top-k", min=0, help="--label group: best k of each group are desirable."),
    bottom_k: int = typer.Option(1, "--bottom-k", min=0, help="--label group: worst k of each group are undesirable."),
    min_group_size: int = typer.Option(2, "--min-group-size", min=1, help="grpo: drop smaller groups (reported)."),
    scale: str = typer.Option(
        "group", "--scale", help="grpo: advantage scaling, group, batch or none (TRL's scale_rewards)."
    ),
    from_table: bool = typer.Option(False, "--from-table", help="steps: read advantages from the advantages table."),
    advantages_run: Optional[str] = typer.Option(
        None,
        "--advantages-run",
        metavar="ID",
        help="steps: advantages of this stored run (implies --from-table; list: agent-rl advantages runs).",
    ),
    run_id: Optional[str] = typer.Option(None, "--run-id", hidden=True, help="Old spelling of --advantages-run."),
    omega: float = typer.Option(1.0, "--omega", help="steps: weight of the step advantage."),
    gamma: float = typer.Option(0.95, "--gamma", help="steps: discount of step rewards."),
    mode: str = typer.Option("mean_norm", "--mode", help="steps: mean_norm or mean_std_norm."),
    fmt: Format = typer.Option(
        Format.conversational,
        "--style",
        help="Rows as message lists (conversational), or rendered with the chat template (text).",
    ),
    tokenizer: Optional[str] = typer.Option(
        None, "--tokenizer", help="Tokenizer path: its chat template renders --style text, and it counts tokens."
    ),
    no_extra: bool = typer.Option(
        False, "--no-extra-columns", help="Only the format's own columns (no rollout ids, rewards)."
    ),
    failed_rollouts: str = typer.Option(
        DEFAULT_FAILED_ROLLOUTS,
        "--failed-rollouts",
        callback=failed_rollouts_option,
        help="Rollouts that ended in error, timeout or cancellation: exclude them, keep them with reward 0 "
        "(zero_reward), or keep them with their own reward (keep). steps: exclude only (see --from-table).",
    ),
    json_output: bool = JsonOption,
) -> None:
    """Build a dataset from the store and write it to --out."""
    from agent_rl_plugin.data import BuildReport, DatasetError, LabelRule, build_table, load_tokenizer, write_dataset
    from agent_rl_plugin.data.output import output_format
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    try:
        if where and sql:
            raise UserError("give --where or --sql, not both")
        if advantages_run and run_id and advantages_run != run_id:
            raise UserError("give --advantages-run once (--run-id is its old spelling)")
        run_id = advantages_run or run_id
        weights = parse_rewards(reward, path)
        out_format = output_format(out)
        rule = LabelRule(
            method=label.value,
            threshold=threshold,
            quantile=quantile,
            top_k=top_k,
            bottom_k=bottom_k,
            per_group=per_group,
        )
        tok = load_tokenizer(tokenizer) if tokenizer else None
        report = BuildReport()
        table = build_table(
            kind.value,
            path,
            where=where,
            sql=sql,
            weights=weights,
            label_rule=rule,
            min_group_size=min_group_size,
            scale=scale,
            from_table=from_table,
            run_id=run_id,
            gigpo={"omega": omega, "gamma": gamma, "mode": mode},
            fmt=fmt.value,
            tokenizer=tok,
            extra_columns=not no_extra,
            report=report,
            failed_rollouts=check_failed_rollouts(failed_rollouts),
        )
        write_dataset(table, out)
        make_private(out)
    except (DatasetError, UserError) as exc:
        fail(escape(str(exc)), escape(exc.hint) if exc.hint else None)
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        fail(escape(message), escape(hint) if hint else None)
    except OSError as exc:
        fail(escape(f"cannot write {out}: {exc}"))
    summary = {**report.to_dict(), "out": out, "output_format": out_format}
    if json_output:
        print_json(summary)
    else:
        print_summary(summary, out)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="dataset")
