"""The report's sections: each function turns query results into the HTML of one section.

:func:`agent_rl_plugin.report.build.build_report` reads the store and calls these in page order;
they read nothing themselves beyond what they are given (a connection and the selection's name
for the few that query).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Mapping, Sequence

from agent_rl_plugin.report import html as h
from agent_rl_plugin.report import plots as p
from agent_rl_plugin.report import queries as q
from agent_rl_plugin.report import traces as t

#: Most rows of the task and group tables (the rest is summarised).
MAX_ROWS = 50
#: How many of the listed training runs get curves.
MAX_CURVES = 8


def plot_grid(plots: Sequence[p.Plot | None], wide: Sequence[str] = ()) -> str:
    items = [h.figure(x, wide=x.id in wide) for x in plots if x is not None]
    return f'<div class="plots">{"".join(items)}</div>' if items else ""


def overview(
    info: Mapping[str, Any],
    rewarded: Sequence[Mapping[str, Any]],
    reward_rows: Sequence[Mapping[str, Any]],
    runs: Sequence[Mapping[str, Any]],
) -> str:
    mean = sum(r["reward"] for r in rewarded) / len(rewarded) if rewarded else None
    first, last = info.get("first_start"), info.get("last_start")
    span = f"{h.fmt(first)} → {h.fmt(last)} UTC" if first and last else ""
    items = [
        (
            "rollouts",
            info["rollouts"],
            f"{info['ok']:,} ok · {info['error']:,} error · {info['cancelled']:,} cancelled",
        ),
        ("tasks", info["tasks"], ""),
        ("groups", info["groups"], "GRPO groups"),
        ("LLM calls", info["llm_calls"], ""),
        ("tool calls", info["tool_calls"], f"{info['tool_errors']:,} failed"),
        (
            "tokens",
            int(info["input_tokens"]) + int(info["output_tokens"]),
            f"{h.fmt(info['input_tokens'])} in · {h.fmt(info['output_tokens'])} out",
        ),
        ("reward names", len(reward_rows), f"{len(rewarded):,} rollouts rewarded"),
        ("mean combined reward", mean if mean is not None else "none", ""),
        ("training runs", len(runs), ""),
    ]
    median = info.get("median_duration_ms")
    intro = f"Rollouts started {h.esc(span)}" + (
        f"; median duration {h.esc(h.fmt(median))} ms." if median is not None else "."
    )
    return h.section("overview", "Overview", h.cards(items), intro)


def rewards(
    connection: Any,
    sel: str,
    values: Mapping[str, Sequence[float]],
    rows: Sequence[Mapping[str, Any]],
    rewarded: Sequence[Mapping[str, Any]],
):
    if not rows:
        return h.section(
            "rewards",
            "Rewards",
            h.notice(
                "<b>No rewards yet.</b> Score the rollouts with <code>agent-rl score</code> (built-in and plugin rewards), "
                "or emit them from the agent with <code>arl.emit_reward()</code>."
            ),
        ), []
    plots = [
        p.reward_distributions(values),
        p.combined_distribution([r["reward"] for r in rewarded]),
        p.reward_over_time(rewarded),
    ]
    table = h.table(
        [
            ("name", "reward"),
            ("source", "source"),
            ("plugin", "plugin"),
            ("rollouts", "rollouts"),
            ("mean", "mean"),
            ("std", "std"),
            ("min", "min"),
            ("max", "max"),
            ("step_rows", "step rows"),
            ("errors", "errors"),
        ],
        rows,
        numeric=("rollouts", "mean", "std", "min", "max", "step_rows", "errors"),
    )
    errors = q.reward_errors(connection, sel)
    error_html = ""
    if errors:
        error_html = "<h3>Reward errors</h3>" + h.table(
            [("name", "reward"), ("error", "error"), ("rows", "rows")], errors, numeric=("rows",)
        )
    intro = (
        "Episode rewards per reward name (a plugin's latest score, or the sum of what the agent emitted), "
        "and the combined reward per rollout: sum(weight x value) / sum(weight) over its names, with the "
        "weights agent-rl score recorded (agent-rl score --explain ROLLOUT shows the terms)."
    )
    body = plot_grid(plots, wide=("plot-rewards-names",)) + "<h3>Reward names</h3>" + table + error_html
    return h.section("rewards", "Rewards", body, intro), plots


def groups(combined: Sequence[Mapping[str, Any]]):
    tasks = q.task_stats(combined)
    groups = q.group_stats(combined)
    if not any(r["reward"] is not None for r in combined):
        body = h.notice("No rewards yet, so there is no reward by task or group: run <code>agent-rl score</code>.")
        body += "<h3>Tasks</h3>" + h.table(
            [("task_id", "task"), ("rollouts", "rollouts"), ("errors", "failed")], tasks, numeric=("rollouts", "errors")
        )
        return h.section("groups", "Tasks and groups", body), []
    plots = [p.reward_by_task(tasks), p.group_spread(groups) if groups else None]
    columns = [
        ("rollouts", "rollouts"),
        ("rewarded", "rewarded"),
        ("mean", "mean"),
        ("std", "std"),
        ("min", "min"),
        ("max", "max"),
        ("errors", "failed"),
    ]
    numeric = [c for c, _ in columns] + ["spread"]
    body = plot_grid(plots)
    shown_tasks = sorted(tasks, key=lambda t: (t["mean"] is None, t["mean"] if t["mean"] is not None else 0.0))[
        :MAX_ROWS
    ]
    cut_note = (
        f'<p class="muted">The {MAX_ROWS} tasks with the lowest mean reward, of {len(tasks)}.</p>'
        if len(tasks) > MAX_ROWS
        else ""
    )
    body += (
        "<h3>Tasks</h3>"
        + cut_note
        + h.table([("task_id", "task")] + columns, shown_tasks if cut_note else tasks, numeric=numeric)
    )
    if groups:
        flat = [g for g in groups if g["spread"] is not None and g["spread"] < 1e-12 and g["rewarded"] > 1]
        note = (
            (
                f'<p class="muted">{len(flat)} of {len(groups)} groups have no reward spread (every rollout scored the same): '
                "GRPO advantages are zero there.</p>"
            )
            if flat
            else ""
        )
        shown_groups = groups
        if len(groups) > MAX_ROWS:
            shown_groups = sorted(groups, key=lambda g: (g["spread"] is None, g["spread"] or 0.0, str(g["group_id"])))[
                :MAX_ROWS
            ]
            note += f'<p class="muted">The {MAX_ROWS} groups with the smallest spread, of {len(groups)}.</p>'
        body += (
            "<h3>Groups</h3>"
            + note
            + h.table(
                [("group_id", "group"), ("task_id", "task")] + columns + [("spread", "spread (max − min)")],
                shown_groups,
                numeric=numeric,
            )
        )
    else:
        body += h.notice(
            "No group ids recorded: pass <code>group_id=</code> to <code>arl.rollout()</code> to compare rollouts of one task."
        )
    intro = "The combined reward per task, and its spread within each GRPO group (the signal group-relative methods learn from)."
    return h.section("groups", "Tasks and groups", body, intro), plots


def tools(connection: Any, sel: str):
    tools = q.tool_table(connection, sel)
    if not tools:
        return h.section("tools", "Tool calls", h.notice("No tool calls recorded in these rollouts.")), []
    plots = [p.tool_calls(tools, q.tool_latencies(connection, sel))]
    body = plot_grid(plots, wide=("plot-tools",))
    body += h.table(
        [
            ("tool_name", "tool"),
            ("calls", "calls"),
            ("errors", "errors"),
            ("error_rate", "error rate"),
            ("mean_ms", "mean ms"),
            ("p50_ms", "median ms"),
            ("p95_ms", "p95 ms"),
            ("max_ms", "max ms"),
        ],
        tools,
        formats={"error_rate": h.pct},
        numeric=("calls", "errors", "error_rate", "mean_ms", "p50_ms", "p95_ms", "max_ms"),
    )
    errors = q.tool_errors(connection, sel)
    if errors:
        body += "<h3>Most frequent tool errors</h3>" + h.table(
            [("tool_name", "tool"), ("error", "error"), ("calls", "calls")], errors, numeric=("calls",)
        )
    return h.section(
        "tools", "Tool calls", body, "Calls per tool, how often they failed, and how long they took."
    ), plots


def tokens(connection: Any, sel: str, info: Mapping[str, Any]):
    models = q.token_models(connection, sel)
    if not models:
        return h.section("tokens", "Tokens", h.notice("No LLM calls recorded in these rollouts.")), []
    plots = [p.tokens(models, q.token_rollouts(connection, sel))]
    body = plot_grid(plots, wide=("plot-tokens",))
    if not any(x is not None for x in plots):
        body += h.notice("The LLM calls recorded no token counts (gen_ai.usage.input_tokens / output_tokens).")
    body += h.table(
        [
            ("model", "model"),
            ("calls", "calls"),
            ("input_tokens", "input tokens"),
            ("output_tokens", "output tokens"),
            ("mean_input", "mean in / call"),
            ("mean_output", "mean out / call"),
            ("errors", "failed"),
            ("mean_ms", "mean ms"),
        ],
        models,
        numeric=("calls", "input_tokens", "output_tokens", "mean_input", "mean_output", "errors", "mean_ms"),
    )
    return h.section("tokens", "Tokens", body, "Token usage of the LLM calls, by model and per rollout."), plots


def coordination(data: Mapping[str, Any], linked: set[str]):
    rollouts = data["rollouts"]
    plots = [p.coordination(data["counts"], rollouts)]
    body = plot_grid(plots, wide=("plot-coordination",))
    consensus = sum(1 for r in rollouts if r["consensus"])
    body += h.cards(
        [
            ("multi-agent rollouts", len(rollouts), ""),
            ("consensus", f"{consensus / len(rollouts):.0%}" if rollouts else "n/a", f"{consensus} of {len(rollouts)}"),
            ("mean rounds", sum(r["rounds"] for r in rollouts) / len(rollouts) if rollouts else None, ""),
            ("votes", sum(r["votes"] for r in rollouts), ""),
        ]
    )
    body += "<h3>Events by type</h3>" + h.table(
        [("event_type", "event"), ("events", "events"), ("rollouts", "rollouts")],
        data["counts"],
        numeric=("events", "rollouts"),
    )
    shown = rollouts[:100]
    rows = [{**r, "link": h.rollout_link(r["rollout_id"], linked)} for r in shown]
    body += f"<h3>Rollouts ({len(shown)} of {len(rollouts)})</h3>" + h.table(
        [
            ("link", "rollout"),
            ("agents", "agents"),
            ("rounds", "rounds"),
            ("answers", "answers"),
            ("votes", "votes"),
            ("restarts", "restarts"),
            ("consensus", "consensus"),
            ("winner", "final answer by"),
            ("votes_for_winner", "votes for it"),
        ],
        rows,
        raw=("link",),
        numeric=("agents", "rounds", "answers", "votes", "restarts", "votes_for_winner"),
    )
    intro = (
        "Multi-agent coordination from the events view: answers, votes and restarts per round. Consensus: a final "
        "answer exists and more than half of the last round's votes name its agent (the coordination reward's rule)."
    )
    return h.section("coordination", "Coordination", body, intro), plots


def training(connection: Any, runs: Sequence[Mapping[str, Any]], total: int):
    metrics = q.training_metrics(connection, [r["run_id"] for r in runs])
    rows = []
    for run in runs:
        curves = metrics.get(run["run_id"], {})
        steps = max((int(x) for points in curves.values() for x, _ in points), default=None)
        loss = curves.get("loss")
        model = str(run.get("model") or "")
        rows.append(
            {
                **run,
                "short_id": f'<code title="{h.esc(run["run_id"])}">{h.esc(str(run["run_id"])[:8])}</code>',
                "model_name": os.path.basename(model.rstrip("/\\")) or model,
                "status_html": h.status_badge(run.get("status")),
                "steps": steps,
                "first_loss": loss[0][1] if loss else None,
                "last_loss": loss[-1][1] if loss else None,
                "duration_s": (run["duration_ms"] / 1000.0) if run.get("duration_ms") is not None else None,
            }
        )
    body = h.table(
        [
            ("short_id", "run"),
            ("method", "method"),
            ("model_name", "model"),
            ("status_html", "status"),
            ("n_rows", "rows"),
            ("steps", "steps"),
            ("started_at", "started (UTC)"),
            ("duration_s", "seconds"),
            ("first_loss", "first loss"),
            ("last_loss", "last loss"),
            ("error", "error"),
        ],
        rows,
        raw=("short_id", "status_html"),
        numeric=("n_rows", "steps", "duration_s", "first_loss", "last_loss"),
    )
    plots: list[p.Plot] = []
    figures = []
    for index, run in enumerate(runs[-MAX_CURVES:]):
        curves = metrics.get(run["run_id"], {})
        plot = p.training_run(run, curves, index)
        name = f"{run.get('method')} run {str(run['run_id'])[:8]}"
        if plot is not None:
            plots.append(plot)
            figures.append(h.figure(plot, wide=True))
        else:
            figures.append(
                h.notice(
                    f"{h.esc(name)}: no loss, reward, KL or log-probability curve was logged "
                    "(fewer than two points per metric)."
                )
            )
        other = sorted(set(curves) - {n for _, _, names in p.training_panels(curves) for n in names})
        finals = [{"name": n, "value": curves[n][-1][1], "points": len(curves[n])} for n in other]
        if finals:
            figures.append(
                f'<details class="io"><summary>{h.esc(name)}: other metrics (last value)</summary>'
                + h.table(
                    [("name", "metric"), ("value", "last value"), ("points", "points")],
                    finals,
                    numeric=("value", "points"),
                    css="data compact",
                )
                + "</details>"
            )
    if len(runs) > MAX_CURVES:
        figures.insert(0, f'<p class="muted">Curves of the latest {MAX_CURVES} of the {len(runs)} runs listed.</p>')
    listed = f"the latest {len(runs)} of {total}" if total > len(runs) else "all of them"
    intro = (
        f"Training runs recorded by <code>agent-rl train</code> ({listed}; <code>--where</code> does not filter "
        "them) and the curves their trainers logged per optimizer step."
    )
    return h.section("training", "Training", body + "".join(figures), intro), plots


def listed(combined: Sequence[Mapping[str, Any]], worst: int) -> list[tuple[Mapping[str, Any], str]]:
    """(rollout, why) for each rollout that gets a trace: at most ``worst`` of them, the lowest
    combined rewards first (ties by rollout id). Only when fewer than ``worst`` rollouts have a
    reward do the free places go to unrewarded rollouts: the failed ones, then the rest, latest
    first."""
    if worst <= 0:
        return []
    rewarded = sorted(
        (r for r in combined if r["reward"] is not None), key=lambda r: (r["reward"], str(r["rollout_id"]))
    )
    listed = [(r, f"lowest reward #{i + 1}") for i, r in enumerate(rewarded[:worst])]
    unrewarded = sorted(
        (r for r in combined if r["reward"] is None),
        key=lambda r: (r["status"] == "ok", _negated_time(r["start_time"]), str(r["rollout_id"])),
    )
    for rollout in unrewarded[: worst - len(listed)]:
        status = str(rollout["status"])
        listed.append((rollout, f"{status}, no reward" if status != "ok" else "latest, no reward"))
    return listed


def _negated_time(when: Any) -> float:
    """A sort key putting later start times first (missing times last)."""
    return -when.timestamp() if isinstance(when, datetime) else float("inf")


def worst(
    listed: Sequence[tuple[Mapping[str, Any], str]],
    data: Mapping[str, Any],
    reward_rows: Sequence[Mapping[str, Any]],
    linked: set[str],
    worst: int,
) -> str:
    if not listed:
        return h.section("worst", "Worst rollouts", h.notice("No rollouts to show."))
    names = [r["name"] for r in reward_rows][:6]
    rows = []
    for rank, (rollout, why) in enumerate(listed, start=1):
        row = {
            "rank": rank,
            "link": h.rollout_link(rollout["rollout_id"], linked),
            "task_id": rollout.get("task_id"),
            "group_id": rollout.get("group_id"),
            "status_html": h.status_badge(rollout.get("status")),
            "reward": rollout.get("reward"),
            "n_tool_errors": rollout.get("n_tool_errors"),
            "duration_ms": rollout.get("duration_ms"),
            "why": why,
        }
        for index, name in enumerate(names):
            row[f"r{index}"] = rollout["per_name"].get(name)
        rows.append(row)
    columns = [
        ("rank", "#"),
        ("link", "rollout"),
        ("task_id", "task"),
        ("group_id", "group"),
        ("status_html", "status"),
        ("reward", "combined"),
    ]
    columns += [(f"r{i}", n) for i, n in enumerate(names)]
    columns += [("n_tool_errors", "tool errors"), ("duration_ms", "ms"), ("why", "listed as")]
    numeric = ["rank", "reward", "n_tool_errors", "duration_ms"] + [f"r{i}" for i in range(len(names))]
    table = h.table(columns, rows, raw=("link", "status_html"), numeric=numeric)
    traces = "".join(t.trace_html(rollout, data.get(rollout["rollout_id"], {}), why) for rollout, why in listed)
    shown = f"The {len(listed)} rollouts" if len(listed) < worst else f"The {worst} rollouts"
    intro = (
        f"{shown} with the lowest combined reward (rollouts without a reward, failed ones first, fill the list "
        "only when fewer have one; the status column shows which failed). Click an id, or a row "
        "below, to see the rollout step by step: LLM calls with their messages, tool calls with arguments and "
        "results or errors, events, and the rewards of each step."
    )
    return h.section("worst", "Worst rollouts", table + '<h3 id="traces">Step by step</h3>' + traces, intro)
