"""``agent-rl demo``: the project's main job, end to end, on this machine, with no network.

Today it runs the example tool-using agent over a few tasks in groups, records every run into
DuckDB (the agent rewards itself against the ground truth too), scores every rollout with the
built-in reward plugins, and prints what landed (counts, the groups, the rewards, one rollout as
a tree) and SQL to try next; then trains a LoRA adapter with KTO for a few steps on this run's
rollouts (labelled by task_completion) on a tiny offline Qwen2 built next to the database, and
records the run in ``training_runs`` / ``training_metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import time
import warnings

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent_rl_plugin.cli.common import DbOption, JsonOption, console, db_path, print_json, print_rows
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.hookspecs import hookimpl

NEXT_QUERIES = (
    "select tool_name, count(*) as calls, count(error) as errors from tool_calls group by tool_name",
    "select rollout_id, step_index, name, value, reason from rewards where name = 'tool_success' and value < 1 limit 10",
    "select run_id, step, value as loss from training_metrics where name = 'loss' order by run_id, step",
    "select task_id, avg(total_reward) as accuracy, count(*) as rollouts from rollouts group by task_id order by task_id",
    "select rollout_id, step_index, kind, name, status from steps where rollout_id = (select min(rollout_id) from rollouts) order by step_index",
)


def demo(
    db: str = DbOption,
    tasks: int = typer.Option(4, "--tasks", min=1, max=6, help="How many tasks."),
    group_size: int = typer.Option(4, "--group-size", min=1, help="Rollouts per task (a GRPO group)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the scripted model."),
    json_output: bool = JsonOption,
) -> None:
    """Run an example tool-using agent in groups, record it into DuckDB, and show what landed."""
    from agent_rl_plugin import tracing
    from agent_rl_plugin.demo.calculator import demo_tasks
    from agent_rl_plugin.demo.run import run_groups

    path = db_path(db)
    task_list = demo_tasks(tasks)
    total = len(task_list) * group_size
    started = time.perf_counter()
    tracing.configure(db_path=path)
    with Progress(
        TextColumn("[bold]rollouts[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=json_output,
    ) as progress:
        bar = progress.add_task("rollouts", total=total)
        results = asyncio.run(run_groups(task_list, group_size, seed, on_done=lambda _: progress.advance(bar)))
    tracing.flush()
    tracing.shutdown()  # releases the database file for scoring and the reads below
    from agent_rl_plugin.rewards.runner import score

    ids_list = [r.rollout_id for r in results]
    report = score(path, rollout_ids=ids_list, workers=2, timeout_s=30.0)
    elapsed = time.perf_counter() - started
    ids = ", ".join(f"'{r.rollout_id}'" for r in results)
    training = train_step(path, ids, quiet=json_output)
    summary = landed(path, ids)
    summary.update(
        scoring=report.to_dict(),
        database=os.path.abspath(path),
        rollouts_run=len(results),
        correct=sum(r.correct for r in results),
        seconds=round(elapsed, 2),
        training=training,
        next_queries=list(NEXT_QUERIES),
    )
    if json_output:
        print_json(summary)
        return
    console.print(
        f"[bold green]Recorded {len(results)} rollouts[/] of {len(task_list)} tasks × {group_size} "
        f"into {summary['database']} and scored them in {elapsed:.1f} s; {summary['correct']} answered correctly."
    )
    print_rows(["what landed", "rows"], list(summary["rows"].items()), title="this run")
    columns, rows = run_query(
        path,
        "select task_id, count(*) as rollouts, avg(total_reward) as mean_reward, sum(n_tool_errors) as tool_errors, "
        f"round(avg(duration_ms), 1) as mean_ms from rollouts where rollout_id in ({ids}) group by task_id order by task_id",
    )
    print_rows(columns, rows, title="groups (one per task)")
    columns, rows = run_query(
        path,
        "select name, source, count(*) filter (where step_index is null) as episodes, "
        "count(*) filter (where step_index is not null) as step_rows, round(avg(value) filter (where step_index is null), 3) as mean, "
        "count(error) as errors from rewards "
        f"where rollout_id in ({ids}) group by name, source order by source, name",
    )
    print_rows(columns, rows, title="rewards (emitted by the agent, and from the built-in reward plugins)")
    example = min(results, key=lambda r: (r.correct, r.rollout_id))
    console.print(f"\n[bold]One rollout[/] (agent-rl traces show {example.rollout_id[:8]}):")
    from agent_rl_plugin.cli.traces import show_trace

    show_trace(example.rollout_id, db=path, json_output=False)
    print_training(training, path)
    console.print("\n[bold]Try next:[/]")
    for sql in NEXT_QUERIES:
        console.print(f'  agent-rl query --db {path} "{sql}"', highlight=False, soft_wrap=True)


def tiny_model_dir(path: str) -> str:
    """The demo's tiny model: next to the database, built once and reused."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), ".agent-rl-tiny-model")


def train_step(path: str, ids: str, quiet: bool = False) -> dict:
    """KTO (LoRA) for a few steps on this run's rollouts; the summary, or ``{"skipped": reason}``."""
    from agent_rl_plugin.cli.common import UserError
    from agent_rl_plugin.cli.train import run_kto

    try:
        import peft  # noqa: F401
        import trl  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the training extras are missing
        return {"skipped": f"training needs trl and peft ({exc})"}
    if not quiet:
        console.print("[dim]training a LoRA adapter with KTO on a tiny offline model ...[/]")
    model = tiny_model_dir(path)
    out = os.path.join(os.path.dirname(os.path.abspath(path)), "runs", "demo-kto-" + time.strftime("%Y%m%d-%H%M%S"))
    noise = io.StringIO()  # progress bars and library warnings of the trainer
    try:
        with contextlib.redirect_stderr(noise), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if not os.path.isfile(os.path.join(model, "config.json")):
                from agent_rl_plugin.train import build_tiny_model

                build_tiny_model(model)
            return run_kto(
                model=model, out=out, db=path, sql=f"select rollout_id from rollouts where rollout_id in ({ids})",
                label_rule="threshold", weights={"task_completion": 1.0}, max_steps=8, batch_size=4,
                lora_r=8, learning_rate=1e-3, config_overrides={"max_length": 512},
            )
    except UserError as exc:
        return {"skipped": str(exc)}


def print_training(training: dict, path: str) -> None:
    if "skipped" in training:
        console.print(f"\n[bold]Training[/]: skipped: {training['skipped']}", highlight=False)
        return
    labels = training["labels"]
    console.print(
        f"\n[bold]Training[/]: KTO with LoRA on a tiny offline Qwen2, {training['rows']} rollouts of this run "
        f"({labels['desirable']} desirable / {labels['undesirable']} undesirable by task_completion), "
        f"{training['steps']} steps in {training['seconds']} s.",
        highlight=False,
    )
    columns, rows = run_query(
        path,
        "select step, round(max(value) filter (where name = 'loss'), 4) as loss, "
        "round(max(value) filter (where name = 'rewards/margins'), 4) as reward_margin, "
        "round(max(value) filter (where name = 'kl'), 4) as kl from training_metrics "
        f"where run_id = '{training['run_id']}' and name in ('loss', 'rewards/margins', 'kl') group by step order by step",
    )
    print_rows(columns, rows, title=f"training run {training['run_id']}")
    console.print(f"  adapter: {training['adapter_path']}", highlight=False, soft_wrap=True)


def landed(path: str, ids: str) -> dict:
    """Rows this run added to each view."""
    views = ("rollouts", "steps", "llm_calls", "tool_calls", "events", "rewards")
    sql = " union all ".join(
        f"select '{view}', count(*) from {view} where rollout_id in ({ids})" for view in views
    )
    sql += f" union all select 'spans', count(*) from spans where rollout_id in ({ids})"
    _, rows = run_query(path, sql)
    return {"rows": {name: count for name, count in rows}}


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("demo")(demo)
