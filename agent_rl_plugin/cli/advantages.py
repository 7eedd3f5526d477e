"""``agent-rl advantages compute`` and ``agent-rl advantages runs``: advantages into the store.

``compute`` reads the selected rollouts' rewards (and, for GiGPO, their LLM steps), computes one
advantage per rollout (grpo, rloo, dr_grpo) or per action (gigpo) and appends them to the
``advantages`` table under a new ``run_id``, then prints a summary: groups, groups of one,
groups whose rewards are all equal, step groups (gigpo), and the mean and std of the values.
``--failed-rollouts exclude|zero_reward|keep`` says what to do with rollouts that ended in
error, timeout or cancellation (default exclude); the summary says how many it touched.
``runs`` lists the runs stored. Query the rows with
``agent-rl query "select * from advantages where run_id = '...'"``.
"""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich import box
from rich.table import Table

from agent_rl_plugin.advantages.failed import (
    DEFAULT_FAILED_ROLLOUTS,
    check_failed_rollouts,
    describe_failed,
)
from agent_rl_plugin.cli.common import (
    TABLE,
    DbOption,
    JsonOption,
    Output,
    UserError,
    console,
    db_path,
    output_options,
    parse_reward_items,
    print_json,
)
from agent_rl_plugin.cli.dataset import failed_rollouts_option
from agent_rl_plugin.cli.score import fail_plain, say
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Compute GRPO, RLOO, Dr. GRPO or GiGPO advantages into the store.", no_args_is_help=True)


def parse_weights(items: list[str] | None) -> dict[str, float]:
    """``["name=0.5", ...]`` as ``{"name": 0.5}`` (the hidden ``--weight`` alias); ``ValueError``
    names a malformed item."""
    weights: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            weights[name.strip()] = float(text)
        except ValueError:
            raise ValueError(f"bad --weight {item!r}: expected NAME=NUMBER, e.g. task_completion=2") from None
    return weights


def parse_reward_options(
    rewards: list[str] | None, weights: list[str] | None
) -> tuple[list[str] | None, dict[str, float]]:
    """``--reward NAME[=W]`` items (and the hidden ``--weight NAME=W`` alias) as ``(names, weights)``:
    the reward names to use (``None``: every reward present) and the weights given explicitly
    (others weigh 1). ``UserError`` names a malformed item."""
    names, explicit = parse_reward_items(rewards)
    try:
        extra = parse_weights(weights)
    except ValueError as exc:
        raise UserError(str(exc), "use --reward NAME=WEIGHT, e.g. task_completion=2") from None
    return (names or None), {**extra, **explicit}


def _notes(run: Any) -> list[str]:
    """Plain-text lines about what was left out, defaulted or zero."""
    s, r = run.summary, run.report
    lines = []
    failed = describe_failed(r.get("failed_rollouts") or {})
    if failed:
        lines.append(f"{failed}.")
    if s.get("singleton_groups"):
        rule = "A_E = R, A_S from step groups" if run.method == "gigpo" else "advantage 0"
        lines.append(f"{s['singleton_groups']} group(s) of one rollout ({rule}).")
        if s["singleton_groups"] == s.get("groups"):
            lines.append(
                "Every group has one rollout, so no rollout is compared with another: record several rollouts "
                "per task under one group_id (agent-rl rollouts run --group-size 4, or arl.rollout(group_id=...))."
            )
    if s.get("all_equal_groups"):
        lines.append(f"{s['all_equal_groups']} group(s) whose rewards are all equal (episode advantage 0).")
    unscored = r.get("unscored", {})
    if unscored.get("count"):
        lines.append(
            f"{unscored['count']} rollout(s) without a usable episode reward left out "
            f"(e.g. {', '.join(unscored['examples'])})."
        )
    if r.get("without_actions"):
        lines.append(f"{r['without_actions']} rollout(s) without LLM steps left out.")
    uncredited = r.get("uncredited_step_rewards", {})
    if uncredited.get("count"):
        lines.append(
            f"{uncredited['count']} step reward(s) before the first LLM step (or on unknown steps) not credited "
            f"(e.g. rollout {', '.join(uncredited['examples'])})."
        )
    keys = r.get("state_keys")
    if keys:
        lines.append(
            f"state keys: {keys.get('recorded', 0)} recorded, {keys.get('plugin', 0)} from plugins, "
            f"{keys.get('default', 0)} default (hash of the observation)."
        )
    if run.method == "gigpo" and r.get("episode_reward"):
        lines.append(
            f"episode reward R: {r['episode_reward']}"
            + ("; also credited to the last action." if r.get("terminal_reward") else ".")
        )
    return lines


def _print_summary(run: Any) -> None:
    s = run.summary
    table = Table(title=f"{run.method} advantages", header_style="bold", box=box.SIMPLE, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    rows = [
        ("rollouts", s.get("rollouts")),
        ("groups", s.get("groups")),
        ("groups of one", s.get("singleton_groups")),
        ("all-equal groups", s.get("all_equal_groups")),
    ]
    if run.method == "gigpo":
        rows += [
            ("actions (rows)", s.get("rows")),
            ("step groups", s.get("step_groups")),
            ("step groups of one", s.get("singleton_step_groups")),
            ("all-equal step groups", s.get("all_equal_step_groups")),
            ("actions in shared step groups", s.get("rows_in_shared_step_groups")),
            ("revisits within a trajectory", s.get("revisits")),
            ("mean step group size", f"{s.get('mean_step_group_size', 0):.2f}"),
        ]
    rows += [
        ("advantage mean", f"{s['advantage_mean']:.6g}"),
        ("advantage std", f"{s['advantage_std']:.6g}"),
        ("advantage min / max", f"{s['advantage_min']:.6g} / {s['advantage_max']:.6g}"),
    ]
    for label, value in rows:
        table.add_row(label, str(value))
    console.print(table)
    for line in _notes(run):
        say(line)


@app.command("compute")
def compute(
    method: str = typer.Option(..., "--method", help="grpo, rloo, dr_grpo or gigpo."),
    where: Optional[str] = typer.Option(None, "--where", "-w", help="SQL condition over the rollouts view."),
    reward: Optional[list[str]] = typer.Option(
        None,
        "--reward",
        "-r",
        metavar="NAME[=W]",
        help="Reward to use, with its weight (default 1); repeat for several. Default: every reward present, weight 1.",
    ),
    weight: Optional[list[str]] = typer.Option(
        None, "--weight", hidden=True, help="Old spelling of --reward NAME=W (sets a weight only)."
    ),
    scale: str = typer.Option("group", "--scale", help="grpo: divide by the group std, the batch std, or none."),
    omega: float = typer.Option(1.0, "--omega", help="gigpo: weight of the step advantage."),
    gamma: float = typer.Option(0.95, "--gamma", help="gigpo: discount of the step returns."),
    mode: str = typer.Option("mean_norm", "--mode", help="gigpo: mean_norm or mean_std_norm."),
    baseline: str = typer.Option(
        "step", "--baseline", help="gigpo: step (reference code) or trajectory (paper's Eq. 3)."
    ),
    epsilon: Optional[float] = typer.Option(
        None, "--epsilon", help="Added to the std (default 1e-4 grpo, 1e-6 gigpo)."
    ),
    terminal_reward: bool = typer.Option(
        True,
        "--terminal-reward/--no-terminal-reward",
        help="gigpo: also credit the episode reward to each rollout's last action (default on).",
    ),
    failed_rollouts: str = typer.Option(
        DEFAULT_FAILED_ROLLOUTS,
        "--failed-rollouts",
        callback=failed_rollouts_option,
        help="Rollouts that ended in error, timeout or cancellation: exclude them, keep them with episode "
        "reward 0 (zero_reward), or keep them with their own reward (keep).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compute and summarise, write nothing."),
    db: str = DbOption,
    json_output: bool = JsonOption,
) -> None:
    """Compute advantages for the selected rollouts and store them under a new run_id."""
    from agent_rl_plugin.rl.runs import compute_advantages
    from agent_rl_plugin.rl.store import AdvantageInputError
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    try:
        reward_names, weights = parse_reward_options(reward, weight)
    except UserError as exc:
        fail_plain(str(exc), exc.hint)
    if where:
        from agent_rl_plugin.store.user_sql import SqlRefused, UserSqlError, check_condition

        try:  # spliced into the selection on a reader connection: this check is its wall
            check_condition(where, "SELECT rollout_id FROM rollouts WHERE ({where})")
        except UserSqlError as exc:
            raise UserError(  # a refused read (files, URLs) carries its own fix
                f"bad --where: {exc}",
                (isinstance(exc, SqlRefused) and exc.hint)
                or "--where is a condition over the rollouts view, e.g. \"task_id = 'shop-0'\"",
            ) from None
    try:
        run = compute_advantages(
            path,
            method.lower(),
            where=where,
            reward_names=reward_names,
            weights=weights,
            scale=scale,
            omega=omega,
            gamma=gamma,
            mode=mode,
            baseline=baseline,
            epsilon=epsilon,
            terminal_reward=terminal_reward,
            write=not dry_run,
            failed_rollouts=check_failed_rollouts(failed_rollouts),
        )
    except AdvantageInputError as exc:
        fail_plain(str(exc), exc.hint)
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        fail_plain(message, hint or None)
    except ValueError as exc:
        fail_plain(str(exc))
    if json_output:
        print_json({**run.to_dict(), "notes": _notes(run)})
        return
    _print_summary(run)
    if dry_run:
        say("Dry run: nothing written.")
    else:
        say(f"run {run.run_id}: {run.rows_written} rows written to advantages in {path}.")


RUNS_SQL = """
SELECT run_id, method, count(*) AS rows, count(DISTINCT rollout_id) AS rollouts,
       avg(value) AS mean, stddev_pop(value) AS std, any_value(input_hash) AS input_hash,
       min(created_at) AS created_at, any_value(parameters) AS parameters
FROM advantages GROUP BY run_id, method ORDER BY created_at DESC, run_id
"""
#: The table view: the same runs, fewer and rounded columns (``--json`` has everything).
RUNS_TABLE_SQL = (
    """
SELECT run_id, method, rows, rollouts, round(mean, 6) AS mean, round(std, 6) AS std, input_hash,
       strftime(created_at, '%Y-%m-%d %H:%M:%S') AS created_at
FROM ("""
    + RUNS_SQL
    + ")"
)


@app.command("runs")
@output_options()
def runs(db: str = DbOption, output: Output = TABLE) -> None:
    """List the stored advantage runs, newest first."""
    from agent_rl_plugin.cli.query import run_query
    from agent_rl_plugin.store.errors import StoreError

    try:
        columns, rows = run_query(db_path(db), RUNS_TABLE_SQL if output.format == "table" else RUNS_SQL)
    except UserError as exc:
        fail_plain(str(exc), exc.hint)
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        fail_plain(message, hint or None)
    output.rows(columns, rows)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="advantages")
