"""``agent-rl demo``: the project's main job, end to end, on this machine, with no network.

By default it is the closed training loop (:mod:`agent_rl_plugin.loop`) on the bundled grid: an
agent whose policy is a tiny local LLM plays the grid, every call is recorded, episodes are
rewarded, GRPO advantages computed, a LoRA adapter trained and reloaded, round after round; it
prints held-out success per round (greedy, on starts never trained on) rising from chance.

``--tour`` instead runs the example tool-using agent over a few tasks in groups, records every run into DuckDB
(the agent rewards itself against the ground truth too), scores every rollout with the built-in
reward plugins, computes GRPO and GiGPO advantages into the ``advantages`` table, and trains
three LoRA adapters for a few steps on a tiny offline Qwen2 built next to the database (KTO
labelled by task_completion, offline GRPO on the logged groups, offline GiGPO on the logged
steps; :mod:`agent_rl_plugin.demo.training`), each recorded in ``training_runs`` /
``training_metrics``. It prints what landed (counts, the groups, the rewards, one rollout as a
tree), the training runs, and three SQL queries to try next.

How many tasks the tour runs is ``--task-count`` (``--tasks`` names a task file in the grammar
of docs/cli.md; the old ``--tasks N`` is still accepted, hidden).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent_rl_plugin.cli.common import DbOption, JsonOption, console, db_path, print_json, print_rows
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.hookspecs import hookimpl

NEXT_QUERIES = (
    "select tool_name, count(*) as calls, count(error) as errors, round(avg(duration_ms), 2) as mean_ms from tool_calls group by tool_name",
    "select rollout_id, step_index, state_key, round(step_advantage, 3) as step_adv, round(value, 3) as advantage from advantages where method = 'gigpo' order by abs(value) desc limit 10",
    "select r.method, m.step, m.value as loss from training_metrics m join training_runs r using (run_id) where m.name = 'loss' order by r.method, m.step",
)


#: The demo loop's settings (tuned so that 2 CPU cores finish in under 2 minutes).
DEMO_LOOP: dict[str, Any] = {"env": "grid", "method": "grpo", "rounds": 8, "group_size": 8}


def demo(
    db: str = DbOption,
    tour: bool = typer.Option(
        False, "--tour", help="Instead of the training loop: record, score and train on an example tool-using agent."
    ),
    rounds: int = typer.Option(DEMO_LOOP["rounds"], "--rounds", min=1, help="Training rounds of the loop."),
    tasks: int = typer.Option(4, "--task-count", min=1, max=6, help="With --tour: how many tasks."),
    old_tasks: Optional[int] = typer.Option(
        None, "--tasks", min=1, max=6, hidden=True, help="The old spelling of --task-count."
    ),
    group_size: int = typer.Option(4, "--group-size", min=1, help="With --tour: rollouts per task (a GRPO group)."),
    seed: int = typer.Option(0, "--seed", help="Seed (the loop's model and sampling; the tour's scripted model)."),
    json_output: bool = JsonOption,
) -> None:
    """Watch an agent get better: a tiny local LLM policy trained in closed rounds on a grid (--tour: the recording tour)."""
    if tour:
        run_tour(db, old_tasks or tasks, group_size, seed, json_output)
    else:
        run_loop_demo(db, rounds, seed, json_output)


def run_loop_demo(db: str | None, rounds: int, seed: int, json_output: bool) -> None:
    """The loop on the grid; adapters go next to the database (``<db>.loop/``)."""
    from agent_rl_plugin.cli.loop import print_rounds, run_with_progress
    from agent_rl_plugin.ids import new_id
    from agent_rl_plugin.loop import LoopConfig

    path = db_path(db)
    config = LoopConfig(
        **{**DEMO_LOOP, "rounds": rounds},
        seed=seed,
        db=path,
        output_dir=f"{path}.loop",
        name=f"demo-{new_id()[:8]}",
    )
    result = run_with_progress(config, quiet=json_output)
    curve = [r.heldout_success for r in result.rounds]
    summary = {**result.to_dict(), "first": curve[0], "last": curve[-1], "best": max(c or 0 for c in curve)}
    if json_output:
        print_json(summary)
        return
    print_rounds(result, f"the agent's held-out success, round by round ({os.path.abspath(path)})")
    console.print(
        f"[bold]held-out success {curve[0]:.2f} -> {curve[-1]:.2f}[/] after {len(curve) - 1} rounds "
        f"(adapter: {result.adapter_path})",
        highlight=False,
    )
    console.print("\n[bold]Try next:[/]")
    for sql in LOOP_QUERIES:
        console.print(f'  agent-rl query --db {path} "{sql}"', highlight=False, soft_wrap=True)
    console.print("  agent-rl demo --tour   (record, score and train on a tool-using agent)", highlight=False)


LOOP_QUERIES = (
    "select round, status, train_success, heldout_success, policy_version from loop_rounds order by round",
    "select json_extract_string(attributes, '$.\"agent_rl.policy.version\"') as policy, count(*) as calls from spans where name like 'chat %' group by policy order by min(start_time)",
    "select r.round, m.step, round(m.value, 4) as loss from training_metrics m join loop_rounds r on r.training_run_id = m.run_id where m.name = 'loss' order by r.round, m.step",
)


def run_tour(db: str | None, tasks: int, group_size: int, seed: int, json_output: bool) -> None:
    """Run an example tool-using agent in groups, record it into DuckDB, and show what landed."""
    import agent_rl_plugin.tracing as tracing
    from agent_rl_plugin.demo.calculator import demo_tasks
    from agent_rl_plugin.demo.run import run_groups

    path = db_path(db)
    task_list = demo_tasks(tasks)
    total = len(task_list) * group_size
    started = time.perf_counter()
    tracing.configure(db_path=path)
    with Progress(
        TextColumn("[bold]rollouts[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=json_output,
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
    from agent_rl_plugin.demo.training import compute_demo_advantages, train_all

    advantages = compute_demo_advantages(path, ids)
    if not json_output:
        console.print("[dim]training LoRA adapters (KTO, offline GRPO, offline GiGPO) on a tiny offline model ...[/]")
    training = train_all(path, ids, advantages)
    summary = landed(path, ids)
    summary.update(
        scoring=report.to_dict(),
        database=os.path.abspath(path),
        rollouts_run=len(results),
        correct=sum(r.correct for r in results),
        seconds=round(elapsed, 2),
        advantages=advantages,
        training=training,
        seconds_total=round(time.perf_counter() - started, 2),
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

    show_trace(example.rollout_id, db=path)
    print_training(advantages, training, path)
    console.print("\n[bold]Try next:[/]")
    for sql in NEXT_QUERIES:
        console.print(f'  agent-rl query --db {path} "{sql}"', highlight=False, soft_wrap=True)


def print_training(advantages: dict, training: list[dict], path: str) -> None:
    """The advantages written and one line per training run, then the loss curve of each."""
    console.print("\n[bold]Advantages[/] (agent-rl advantages compute) for this run's groups:", highlight=False)
    for method, info in advantages.items():
        text = info.get("skipped") or f"{info['rows']} rows, run {info['run_id'][:8]}"
        console.print(f"  {method}: {text}", highlight=False, markup=False)
    if len(training) == 1 and "method" not in training[0]:
        console.print(f"\n[bold]Training[/]: skipped: {training[0]['skipped']}", highlight=False)
        return
    console.print(
        "\n[bold]Training[/]: LoRA on a tiny offline Qwen2, on this run's rollouts (rewards: task_completion):",
        highlight=False,
    )
    rows = []

    def arrow(pair) -> str:
        return "" if not pair else f"{pair[0]:.2f}->{pair[1]:.2f}"

    skipped = []
    for run in training:
        method = run.get("method")
        title = TRAINING_TITLES.get(method, method) if method is not None else None
        if "skipped" in run:
            rows.append([title, "skipped", "", "", "", ""])
            skipped.append(f"  {title} skipped: {run['skipped']}")
            continue
        first, final = run.get("first_loss"), run.get("final_loss")
        moved = run.get("moved", {})
        rows.append(
            [
                title,
                run["rows"],
                run["steps"],
                arrow((first, final)) if first is not None and final is not None else "n/a",
                arrow(moved.get("logp/positive")),
                arrow(moved.get("logp/negative")),
            ]
        )
    # Narrow enough for an 80-column terminal: no column is cut (a skip reason goes below).
    print_rows(["method", "rows", "steps", "loss", "log p A>0", "log p A<0"], rows, title="training runs")
    for line in skipped:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(
        "  log p A>0, A<0: mean log-prob per token of this run's actions with positive / negative advantage, "
        "base model -> trained adapter (offline GRPO/GiGPO raise the first and lower the second).",
        highlight=False,
    )
    kto = next((run for run in training if run.get("method") == "kto" and "labels" in run), None)
    if kto:
        labels = kto["labels"]
        console.print(
            f"  KTO labels by task_completion: {labels['desirable']} desirable / {labels['undesirable']} undesirable.",
            highlight=False,
        )
    ran = [run for run in training if "run_id" in run and run["run_id"]]
    if ran:
        console.print("  adapters: " + ", ".join(run["adapter_path"] for run in ran), highlight=False, soft_wrap=True)


TRAINING_TITLES = {"kto": "KTO", "offline_grpo": "GRPO (groups)", "gigpo": "GiGPO (steps)"}


def landed(path: str, ids: str) -> dict:
    """Rows this run added to each view."""
    views = ("rollouts", "steps", "llm_calls", "tool_calls", "events", "rewards")
    sql = " union all ".join(f"select '{view}', count(*) from {view} where rollout_id in ({ids})" for view in views)
    sql += f" union all select 'spans', count(*) from spans where rollout_id in ({ids})"
    _, rows = run_query(path, sql)
    return {"rows": {name: count for name, count in rows}}


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("demo")(demo)
