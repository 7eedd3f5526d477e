"""``build_report(db, out, where=None)``: read the store, draw the plots, write one HTML file.

The file is self-contained (inline CSS, one inline script, plots as inline SVG; a
Content-Security-Policy forbids any network access) and written atomically (a temporary file
next to ``out``, then renamed). Rollout sections follow ``where`` (a condition over the
``rollouts`` view); training runs are listed whatever ``where`` says.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

from agent_rl_plugin.report import html as h
from agent_rl_plugin.report import plots as p
from agent_rl_plugin.report import queries as q
from agent_rl_plugin.report import traces as t
from agent_rl_plugin.report.queries import ReportError
from agent_rl_plugin.version import __version__

#: (id, navigation label) of every section, in page order.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("overview", "Overview"),
    ("rollouts", "Rollouts"),
    ("rewards", "Rewards"),
    ("groups", "Tasks & groups"),
    ("tools", "Tool calls"),
    ("tokens", "Tokens"),
    ("coordination", "Coordination"),
    ("training", "Training"),
    ("worst", "Worst rollouts"),
)

#: Progress steps, for ``progress(step, done, total)``.
STEPS = ("selecting rollouts", "rollouts", "rewards", "tasks and groups", "tool calls", "tokens",
         "coordination", "training runs", "traces", "writing")

Progress = Callable[[str, int, int], None]

#: Most rows of the task and group tables (the rest is summarised).
MAX_ROWS = 50
#: Training runs listed (the latest), and how many of them get curves.
MAX_RUNS = 20
MAX_CURVES = 8


@dataclass
class ReportSummary:
    """What :func:`build_report` wrote."""

    path: str
    database: str
    where: str | None
    sections: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    plots: list[str] = field(default_factory=list)
    traces: int = 0
    bytes: int = 0
    seconds: float = 0.0
    empty: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_report(
    db: Any,
    out: str | os.PathLike[str],
    where: str | None = None,
    *,
    worst: int = 20,
    progress: Progress | None = None,
    title: str = "agent-rl report",
) -> ReportSummary:
    """Write the report on ``db`` (a path, or an open DuckDB connection) to ``out``.

    ``where``: an SQL condition over the ``rollouts`` view choosing the rollouts shown.
    ``worst``: how many of the lowest-reward (and of the failed) rollouts get a step-by-step
    trace. ``progress(step, done, total)`` is called before each step. Raises
    :class:`ReportError` for a bad ``where`` and
    :class:`~agent_rl_plugin.store.StoreError` when the database cannot be opened.
    """
    if not p.available():
        raise ReportError(
            "the report needs matplotlib, which is not installed",
            "pip install 'agent-rl-plugin[report]'",
        )
    from agent_rl_plugin.data.sql import open_store

    started = time.perf_counter()
    database = db if isinstance(db, str) else (os.fspath(db) if isinstance(db, os.PathLike) else "(connection)")
    summary = ReportSummary(path=os.path.abspath(os.fspath(out)), database=os.path.abspath(database) if database != "(connection)" else database, where=where)
    step = _stepper(progress)
    with open_store(db) as connection:
        step("selecting rollouts")
        selection = q.select(connection, where)
        sel = "_arl_report_sel"
        connection.register(sel, selection)
        try:
            body, nav = _sections(connection, sel, selection.num_rows, summary, worst, step)
        finally:
            connection.unregister(sel)
    step("writing")
    now = datetime.now(timezone.utc)
    meta = (
        f"database <code>{h.esc(summary.database)}</code> · generated {h.esc(now.strftime('%Y-%m-%d %H:%M:%S'))} UTC"
        + (f" · rollouts where <code>{h.esc(where)}</code>" if where else "")
        + f" · {summary.counts.get('rollouts', 0):,} rollouts"
    )
    footer = (f"agent-rl {h.esc(__version__)} · <code>agent-rl report</code> · one self-contained file: "
              "no network needed to open it")
    document = h.page(title, meta, nav, body, footer)
    summary.bytes = _write(summary.path, document)
    summary.seconds = round(time.perf_counter() - started, 3)
    return summary


def _stepper(progress: Progress | None) -> Callable[[str], None]:
    done = [0]

    def step(name: str) -> None:
        if progress is not None:
            progress(name, done[0], len(STEPS))
        done[0] += 1

    return step


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write(path: str, document: str) -> int:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    data = document.encode("utf-8")
    handle, temporary = tempfile.mkstemp(prefix=".report-", suffix=".html.tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes it 0600; a report is for sharing
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    return len(data)


def _sections(connection: Any, sel: str, n_rollouts: int, summary: ReportSummary, worst: int, step: Callable[[str], None]):
    parts: list[str] = []
    present: list[str] = []
    all_plots: list[p.Plot] = []

    def add(section_id: str, html_text: str, plots: Sequence[p.Plot | None] = ()) -> None:
        parts.append(html_text)
        present.append(section_id)
        all_plots.extend(x for x in plots if x is not None)

    runs = q.training_runs(connection, MAX_RUNS)
    summary.counts["training_runs"] = q.training_run_count(connection)
    if n_rollouts == 0:
        summary.empty = True
        summary.counts["rollouts"] = 0
        if summary.where:
            text = (f"<b>No rollouts match</b> <code>{h.esc(summary.where)}</code>.<br>"
                    "Check the condition with <code>agent-rl query \"select rollout_id, task_id, status from rollouts\"</code>.")
        else:
            text = ("<b>Nothing recorded yet.</b><br>This database holds no rollouts. Record an agent "
                    "(<code>arl.configure(db=...)</code>, see docs/instrumenting.md), or run "
                    "<code>agent-rl demo</code> to see a full report.")
        add("overview", h.section("overview", "Overview", h.notice(text, "notice empty")))
        summary.notes.append("no rollouts" + (" match the filter" if summary.where else " recorded yet"))
        for name in STEPS[1:7]:
            step(name)
        step("training runs")
        if runs:
            html_text, plots = _training(connection, runs, summary.counts["training_runs"])
            add("training", html_text, plots)
        step("traces")
        nav = [(sid, label) for sid, label in SECTIONS if sid in present]
        summary.sections = present
        summary.plots = [x.id for x in all_plots]
        return "".join(parts), nav

    step("rollouts")
    info = q.overview(connection, sel)
    times = q.rollout_times(connection, sel)
    combined = q.combined(connection, sel)
    rewarded = [r for r in combined if r["reward"] is not None]
    reward_values = q.reward_values(connection, sel)
    reward_rows = q.reward_table(connection, sel)
    summary.counts.update(
        rollouts=int(info["rollouts"]), tasks=int(info["tasks"]), groups=int(info["groups"]),
        llm_calls=int(info["llm_calls"]), tool_calls=int(info["tool_calls"]), tool_errors=int(info["tool_errors"]),
        input_tokens=int(info["input_tokens"]), output_tokens=int(info["output_tokens"]),
        reward_names=len(reward_rows), rewarded_rollouts=len(rewarded),
    )
    add("overview", _overview(info, rewarded, reward_rows, runs))
    plots = [p.rollouts_over_time(times), p.status_and_duration(times)]
    add("rollouts", h.section("rollouts", "Rollouts", _plot_grid(plots),
                              "When the rollouts ran, how they ended and how long they took."), plots)

    step("rewards")
    html_text, plots = _rewards(connection, sel, reward_values, reward_rows, rewarded)
    add("rewards", html_text, plots)

    step("tasks and groups")
    html_text, plots = _groups(combined)
    add("groups", html_text, plots)

    step("tool calls")
    html_text, plots = _tools(connection, sel)
    add("tools", html_text, plots)

    step("tokens")
    html_text, plots = _tokens(connection, sel, info)
    add("tokens", html_text, plots)

    step("coordination")
    coordination = q.coordination(connection, sel)
    summary.counts["coordination_rollouts"] = len(coordination["rollouts"]) if coordination else 0
    # The rollouts that get a trace are chosen now, so the coordination table can link them.
    listed = _listed(combined, worst)
    linked = {row["rollout_id"] for row, _ in listed}
    if coordination:
        html_text, plots = _coordination(coordination, linked)
        add("coordination", html_text, plots)

    step("training runs")
    if runs:
        html_text, plots = _training(connection, runs, summary.counts["training_runs"])
    else:
        html_text, plots = h.section("training", "Training", h.notice(
            "<b>No training runs yet.</b> Train with <code>agent-rl train kto|grpo|gigpo</code> (see docs/training.md); "
            "each run and its per-step metrics land in <code>training_runs</code> and <code>training_metrics</code>.")), []
    add("training", html_text, plots)

    step("traces")
    data = q.trace_data(connection, [row["rollout_id"] for row, _ in listed])
    add("worst", _worst(listed, data, reward_rows, linked, worst))
    summary.traces = len(listed)
    summary.counts["traces"] = len(listed)
    nav = [(sid, label) for sid, label in SECTIONS if sid in present]
    summary.sections = present
    summary.plots = [x.id for x in all_plots]
    return "".join(parts), nav


def _plot_grid(plots: Sequence[p.Plot | None], wide: Sequence[str] = ()) -> str:
    items = [h.figure(x, wide=x.id in wide) for x in plots if x is not None]
    return f'<div class="plots">{"".join(items)}</div>' if items else ""


def _overview(info: Mapping[str, Any], rewarded: Sequence[Mapping[str, Any]], reward_rows: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]]) -> str:
    mean = sum(r["reward"] for r in rewarded) / len(rewarded) if rewarded else None
    first, last = info.get("first_start"), info.get("last_start")
    span = f"{h.fmt(first)} → {h.fmt(last)} UTC" if first and last else ""
    items = [
        ("rollouts", info["rollouts"], f"{info['ok']:,} ok · {info['error']:,} error · {info['cancelled']:,} cancelled"),
        ("tasks", info["tasks"], ""),
        ("groups", info["groups"], "GRPO groups"),
        ("LLM calls", info["llm_calls"], ""),
        ("tool calls", info["tool_calls"], f"{info['tool_errors']:,} failed"),
        ("tokens", int(info["input_tokens"]) + int(info["output_tokens"]), f"{h.fmt(info['input_tokens'])} in · {h.fmt(info['output_tokens'])} out"),
        ("reward names", len(reward_rows), f"{len(rewarded):,} rollouts rewarded"),
        ("mean combined reward", mean if mean is not None else "none", ""),
        ("training runs", len(runs), ""),
    ]
    median = info.get("median_duration_ms")
    intro = f"Rollouts started {h.esc(span)}" + (f"; median duration {h.esc(h.fmt(median))} ms." if median is not None else ".")
    return h.section("overview", "Overview", h.cards(items), intro)


def _rewards(connection: Any, sel: str, values: Mapping[str, Sequence[float]], rows: Sequence[Mapping[str, Any]], rewarded: Sequence[Mapping[str, Any]]):
    if not rows:
        return h.section("rewards", "Rewards", h.notice(
            "<b>No rewards yet.</b> Score the rollouts with <code>agent-rl score</code> (built-in and plugin rewards), "
            "or emit them from the agent with <code>arl.emit_reward()</code>.")), []
    plots = [p.reward_distributions(values), p.combined_distribution([r["reward"] for r in rewarded]),
             p.reward_over_time(rewarded)]
    table = h.table(
        [("name", "reward"), ("source", "source"), ("plugin", "plugin"), ("rollouts", "rollouts"), ("mean", "mean"),
         ("std", "std"), ("min", "min"), ("max", "max"), ("step_rows", "step rows"), ("errors", "errors")],
        rows, numeric=("rollouts", "mean", "std", "min", "max", "step_rows", "errors"),
    )
    errors = q.reward_errors(connection, sel)
    error_html = ""
    if errors:
        error_html = "<h3>Reward errors</h3>" + h.table(
            [("name", "reward"), ("error", "error"), ("rows", "rows")], errors, numeric=("rows",))
    intro = ("Episode rewards per reward name (a plugin's latest score, or the sum of what the agent emitted), "
             "and the combined reward: their mean per rollout, each name weighted 1.")
    body = _plot_grid(plots, wide=("plot-rewards-names",)) + "<h3>Reward names</h3>" + table + error_html
    return h.section("rewards", "Rewards", body, intro), plots


def _groups(combined: Sequence[Mapping[str, Any]]):
    tasks = q.task_stats(combined)
    groups = q.group_stats(combined)
    if not any(r["reward"] is not None for r in combined):
        body = h.notice("No rewards yet, so there is no reward by task or group: run <code>agent-rl score</code>.")
        body += "<h3>Tasks</h3>" + h.table([("task_id", "task"), ("rollouts", "rollouts"), ("errors", "failed")], tasks,
                                            numeric=("rollouts", "errors"))
        return h.section("groups", "Tasks and groups", body), []
    plots = [p.reward_by_task(tasks), p.group_spread(groups) if groups else None]
    columns = [("rollouts", "rollouts"), ("rewarded", "rewarded"), ("mean", "mean"), ("std", "std"), ("min", "min"),
               ("max", "max"), ("errors", "failed")]
    numeric = [c for c, _ in columns] + ["spread"]
    body = _plot_grid(plots)
    shown_tasks = sorted(tasks, key=lambda t: (t["mean"] is None, t["mean"] if t["mean"] is not None else 0.0))[:MAX_ROWS]
    cut_note = (f'<p class="muted">The {MAX_ROWS} tasks with the lowest mean reward, of {len(tasks)}.</p>'
                if len(tasks) > MAX_ROWS else "")
    body += "<h3>Tasks</h3>" + cut_note + h.table([("task_id", "task")] + columns, shown_tasks if cut_note else tasks,
                                                  numeric=numeric)
    if groups:
        flat = [g for g in groups if g["spread"] is not None and g["spread"] < 1e-12 and g["rewarded"] > 1]
        note = (f'<p class="muted">{len(flat)} of {len(groups)} groups have no reward spread (every rollout scored the same): '
                "GRPO advantages are zero there.</p>") if flat else ""
        shown_groups = groups
        if len(groups) > MAX_ROWS:
            shown_groups = sorted(groups, key=lambda g: (g["spread"] is None, g["spread"] or 0.0, str(g["group_id"])))[:MAX_ROWS]
            note += f'<p class="muted">The {MAX_ROWS} groups with the smallest spread, of {len(groups)}.</p>'
        body += "<h3>Groups</h3>" + note + h.table(
            [("group_id", "group"), ("task_id", "task")] + columns + [("spread", "spread (max − min)")], shown_groups,
            numeric=numeric)
    else:
        body += h.notice("No group ids recorded: pass <code>group_id=</code> to <code>arl.rollout()</code> to compare rollouts of one task.")
    intro = "The combined reward per task, and its spread within each GRPO group (the signal group-relative methods learn from)."
    return h.section("groups", "Tasks and groups", body, intro), plots


def _tools(connection: Any, sel: str):
    tools = q.tool_table(connection, sel)
    if not tools:
        return h.section("tools", "Tool calls", h.notice("No tool calls recorded in these rollouts.")), []
    plots = [p.tool_calls(tools, q.tool_latencies(connection, sel))]
    body = _plot_grid(plots, wide=("plot-tools",))
    body += h.table(
        [("tool_name", "tool"), ("calls", "calls"), ("errors", "errors"), ("error_rate", "error rate"), ("mean_ms", "mean ms"),
         ("p50_ms", "median ms"), ("p95_ms", "p95 ms"), ("max_ms", "max ms")],
        tools, formats={"error_rate": h.pct}, numeric=("calls", "errors", "error_rate", "mean_ms", "p50_ms", "p95_ms", "max_ms"),
    )
    errors = q.tool_errors(connection, sel)
    if errors:
        body += "<h3>Most frequent tool errors</h3>" + h.table(
            [("tool_name", "tool"), ("error", "error"), ("calls", "calls")], errors, numeric=("calls",))
    return h.section("tools", "Tool calls", body, "Calls per tool, how often they failed, and how long they took."), plots


def _tokens(connection: Any, sel: str, info: Mapping[str, Any]):
    models = q.token_models(connection, sel)
    if not models:
        return h.section("tokens", "Tokens", h.notice("No LLM calls recorded in these rollouts.")), []
    plots = [p.tokens(models, q.token_rollouts(connection, sel))]
    body = _plot_grid(plots, wide=("plot-tokens",))
    if not any(x is not None for x in plots):
        body += h.notice("The LLM calls recorded no token counts (gen_ai.usage.input_tokens / output_tokens).")
    body += h.table(
        [("model", "model"), ("calls", "calls"), ("input_tokens", "input tokens"), ("output_tokens", "output tokens"),
         ("mean_input", "mean in / call"), ("mean_output", "mean out / call"), ("errors", "failed"), ("mean_ms", "mean ms")],
        models, numeric=("calls", "input_tokens", "output_tokens", "mean_input", "mean_output", "errors", "mean_ms"),
    )
    return h.section("tokens", "Tokens", body, "Token usage of the LLM calls, by model and per rollout."), plots


def _coordination(data: Mapping[str, Any], linked: set[str]):
    rollouts = data["rollouts"]
    plots = [p.coordination(data["counts"], rollouts)]
    body = _plot_grid(plots, wide=("plot-coordination",))
    consensus = sum(1 for r in rollouts if r["consensus"])
    body += h.cards([
        ("multi-agent rollouts", len(rollouts), ""),
        ("consensus", f"{consensus / len(rollouts):.0%}" if rollouts else "n/a", f"{consensus} of {len(rollouts)}"),
        ("mean rounds", sum(r["rounds"] for r in rollouts) / len(rollouts) if rollouts else None, ""),
        ("votes", sum(r["votes"] for r in rollouts), ""),
    ])
    body += "<h3>Events by type</h3>" + h.table(
        [("event_type", "event"), ("events", "events"), ("rollouts", "rollouts")], data["counts"], numeric=("events", "rollouts"))
    shown = rollouts[:100]
    rows = [{**r, "link": h.rollout_link(r["rollout_id"], linked)} for r in shown]
    body += f"<h3>Rollouts ({len(shown)} of {len(rollouts)})</h3>" + h.table(
        [("link", "rollout"), ("agents", "agents"), ("rounds", "rounds"), ("answers", "answers"), ("votes", "votes"),
         ("restarts", "restarts"), ("consensus", "consensus"), ("winner", "final answer by"), ("votes_for_winner", "votes for it")],
        rows, raw=("link",), numeric=("agents", "rounds", "answers", "votes", "restarts", "votes_for_winner"),
    )
    intro = ("Multi-agent coordination from the events view: answers, votes and restarts per round. Consensus: a final "
             "answer exists and more than half of the last round's votes name its agent (the coordination reward's rule).")
    return h.section("coordination", "Coordination", body, intro), plots


def _training(connection: Any, runs: Sequence[Mapping[str, Any]], total: int):
    metrics = q.training_metrics(connection, [r["run_id"] for r in runs])
    rows = []
    for run in runs:
        curves = metrics.get(run["run_id"], {})
        steps = max((int(x) for points in curves.values() for x, _ in points), default=None)
        loss = curves.get("loss")
        model = str(run.get("model") or "")
        rows.append({
            **run,
            "short_id": f"<code title=\"{h.esc(run['run_id'])}\">{h.esc(str(run['run_id'])[:8])}</code>",
            "model_name": os.path.basename(model.rstrip("/\\")) or model,
            "status_html": h.status_badge(run.get("status")),
            "steps": steps,
            "first_loss": loss[0][1] if loss else None,
            "last_loss": loss[-1][1] if loss else None,
            "duration_s": (run["duration_ms"] / 1000.0) if run.get("duration_ms") is not None else None,
        })
    body = h.table(
        [("short_id", "run"), ("method", "method"), ("model_name", "model"), ("status_html", "status"), ("n_rows", "rows"),
         ("steps", "steps"), ("started_at", "started (UTC)"), ("duration_s", "seconds"), ("first_loss", "first loss"),
         ("last_loss", "last loss"), ("error", "error")],
        rows, raw=("short_id", "status_html"), numeric=("n_rows", "steps", "duration_s", "first_loss", "last_loss"),
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
            figures.append(h.notice(f"{h.esc(name)}: no loss, reward, KL or log-probability curve was logged "
                                    "(fewer than two points per metric)."))
        other = sorted(set(curves) - {n for _, _, names in p.training_panels(curves) for n in names})
        finals = [{"name": n, "value": curves[n][-1][1], "points": len(curves[n])} for n in other]
        if finals:
            figures.append(f'<details class="io"><summary>{h.esc(name)}: other metrics (last value)</summary>'
                           + h.table([("name", "metric"), ("value", "last value"), ("points", "points")], finals,
                                     numeric=("value", "points"), css="data compact") + "</details>")
    if len(runs) > MAX_CURVES:
        figures.insert(0, f'<p class="muted">Curves of the latest {MAX_CURVES} of the {len(runs)} runs listed.</p>')
    listed = f"the latest {len(runs)} of {total}" if total > len(runs) else "all of them"
    intro = (f"Training runs recorded by <code>agent-rl train</code> ({listed}; <code>--where</code> does not filter "
             "them) and the curves their trainers logged per optimizer step.")
    return h.section("training", "Training", body + "".join(figures), intro), plots


def _listed(combined: Sequence[Mapping[str, Any]], worst: int) -> list[tuple[Mapping[str, Any], str]]:
    """(rollout, why) for each rollout that gets a trace: the ``worst`` lowest combined rewards,
    then up to ``worst`` failed ones; the ``worst`` latest when neither exists."""
    if worst <= 0:
        return []
    rewarded = sorted((r for r in combined if r["reward"] is not None), key=lambda r: (r["reward"], str(r["rollout_id"])))
    listed = [(r, f"lowest reward #{i + 1}") for i, r in enumerate(rewarded[:worst])]
    seen = {r["rollout_id"] for r, _ in listed}
    failed = [r for r in combined if r["status"] != "ok" and r["rollout_id"] not in seen]
    failed.sort(key=lambda r: r["start_time"] or datetime.min, reverse=True)
    listed += [(r, str(r["status"])) for r in failed[:worst]]
    if not listed:
        latest = sorted(combined, key=lambda r: r["start_time"] or datetime.min, reverse=True)[:worst]
        listed = [(r, "latest") for r in latest]
    return listed


def _worst(listed: Sequence[tuple[Mapping[str, Any], str]], data: Mapping[str, Any], reward_rows: Sequence[Mapping[str, Any]],
           linked: set[str], worst: int) -> str:
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
    columns = [("rank", "#"), ("link", "rollout"), ("task_id", "task"), ("group_id", "group"), ("status_html", "status"),
               ("reward", "combined")]
    columns += [(f"r{i}", n) for i, n in enumerate(names)]
    columns += [("n_tool_errors", "tool errors"), ("duration_ms", "ms"), ("why", "listed as")]
    numeric = ["rank", "reward", "n_tool_errors", "duration_ms"] + [f"r{i}" for i in range(len(names))]
    table = h.table(columns, rows, raw=("link", "status_html"), numeric=numeric)
    traces = "".join(t.trace_html(rollout, data.get(rollout["rollout_id"], {}), why) for rollout, why in listed)
    intro = (f"The {worst} rollouts with the lowest combined reward, then the failed ones. Click an id, or a row "
             "below, to see the rollout step by step: LLM calls with their messages, tool calls with arguments and "
             "results or errors, events, and the rewards of each step.")
    return h.section("worst", "Worst rollouts", table + '<h3 id="traces">Step by step</h3>' + traces, intro)
