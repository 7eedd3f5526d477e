"""The report's plots: matplotlib figures rendered to inline SVG text (the rendering itself is
:mod:`agent_rl_plugin.report.svg`).

Each function returns a :class:`Plot` (``id``, ``title``, ``svg``, ``caption``) or ``None``
when there is nothing to draw.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Mapping, Sequence

from agent_rl_plugin.report.svg import (
    BLUE,
    ERROR,
    HEIGHT,
    MAX_POINTS,
    OK,
    ORANGE,
    PALETTE,
    PURPLE,
    STATUS_COLOURS,
    WIDE,
    WIDTH,
    Plot,
    TimeAxis,
    available,  # noqa: F401 - re-exported: report.build asks plots.available()
    boxplot,
    hist_bins,
    in_rc,
    new_figure,
    no_data,
    render,
    short,
    thin,
    to_svg,  # noqa: F401 - re-exported for callers of the old path
)


@in_rc
def rollouts_over_time(rows: Sequence[Mapping[str, Any]]) -> Plot | None:
    """Rollouts started per time bin, stacked by status."""
    import numpy as np

    points = [(r["start_time"], r["status"]) for r in rows if isinstance(r.get("start_time"), datetime)]
    if not points:
        return None
    axis = TimeAxis([t for t, _ in points])
    numbers = np.array([axis.x(t) for t, _ in points])
    lo, hi = float(numbers.min()), float(numbers.max())
    if hi - lo < 1e-9:  # all in the same instant: one bar one millisecond wide
        lo, hi = lo - 0.0005 * axis.per_second, hi + 0.0005 * axis.per_second
    n_bins = min(40, max(4, int(math.sqrt(len(points)) * 2)))
    edges = np.linspace(lo, hi, n_bins + 1)
    width = edges[1] - edges[0]
    fig, axes = new_figure()
    ax = axes[0][0]
    bottom = np.zeros(n_bins)
    statuses = [s for s in ("ok", "error", "cancelled") if any(p[1] == s for p in points)]
    statuses += sorted({p[1] for p in points} - set(statuses), key=str)
    for status in statuses:
        counts, _ = np.histogram([n for n, (_, s) in zip(numbers, points) if s == status], bins=edges)
        ax.bar(
            edges[:-1],
            counts,
            width=width * 0.92,
            bottom=bottom,
            align="edge",
            color=STATUS_COLOURS.get(status, PURPLE),
            label=str(status),
        )
        bottom += counts
    ax.set_title(f"Rollouts over time ({len(points)} rollouts in {_duration_text(axis.span_s)})")
    ax.set_xlabel(axis.label)
    ax.set_ylabel(f"rollouts per {_duration_text(width / axis.per_second)}")
    axis.apply(ax)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(title="status", loc="best")
    return render(fig, "plot-rollouts-time", "Rollouts over time", "Rollouts started per time bin, by final status.")


def _duration_text(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    if seconds < 172800:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


@in_rc
def status_and_duration(rows: Sequence[Mapping[str, Any]]) -> Plot | None:
    """Rollouts by status (bars) and their durations (histogram, ms)."""
    import numpy as np

    if not rows:
        return None
    fig, axes = new_figure(1, 2, gridspec_kw={"width_ratios": [1, 2]})
    ax = axes[0][0]
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row.get("status"))] = counts.get(str(row.get("status")), 0) + 1
    names = [s for s in ("ok", "error", "cancelled") if s in counts] + sorted(
        set(counts) - {"ok", "error", "cancelled"}
    )
    bars = ax.bar(names, [counts[n] for n in names], color=[STATUS_COLOURS.get(n, PURPLE) for n in names])
    ax.bar_label(bars, labels=[f"{counts[n]} ({counts[n] / len(rows):.0%})" for n in names], fontsize=8, padding=2)
    ax.set_title("Rollouts by status")
    ax.set_ylabel("rollouts")
    ax.set_xlabel("status")
    ax.margins(y=0.18)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax = axes[0][1]
    durations = [float(r["duration_ms"]) for r in rows if r.get("duration_ms") is not None]
    if durations:
        positive = [d for d in durations if d > 0]
        if positive and max(positive) / max(min(positive), 1e-9) > 100:
            bins = np.logspace(math.log10(min(positive)), math.log10(max(positive)), 25)
            ax.hist(positive, bins=bins, color=BLUE)
            ax.set_xscale("log")
        else:
            ax.hist(durations, bins=hist_bins(durations), color=BLUE)
        median = float(np.median(durations))
        ax.axvline(median, color="#212529", linestyle="--", linewidth=1, label=f"median {median:.3g} ms")
        ax.legend(loc="upper right")
    else:
        no_data(ax)
    ax.set_title("Rollout duration")
    ax.set_xlabel("duration (ms)")
    ax.set_ylabel("rollouts")
    return render(
        fig,
        "plot-rollouts-status",
        "Rollouts by status and duration",
        "Left: final status of each rollout. Right: wall-clock duration of each rollout.",
    )


@in_rc
def reward_over_time(rows: Sequence[Mapping[str, Any]]) -> Plot | None:
    """Combined reward of each rollout by start time, with a rolling mean."""
    points = [
        (r["start_time"], float(r["reward"]), r.get("status"))
        for r in rows
        if r.get("reward") is not None and isinstance(r.get("start_time"), datetime)
    ]
    if not points:
        return None
    points.sort(key=lambda p: p[0])
    axis = TimeAxis([p[0] for p in points])
    points = [(axis.x(t), value, status) for t, value, status in points]
    fig, axes = new_figure()
    ax = axes[0][0]
    shown = thin(points, MAX_POINTS)
    for status in ("ok", "error", "cancelled"):
        subset = [p for p in shown if p[2] == status]
        if subset:
            ax.scatter(
                [p[0] for p in subset],
                [p[1] for p in subset],
                s=14 if len(shown) < 500 else 5,
                alpha=0.7,
                color=STATUS_COLOURS[status],
                label=f"rollout ({status})",
                zorder=3,
                linewidths=0,
            )
    window = max(3, len(points) // 10)
    if len(points) >= window:
        values = [p[1] for p in points]
        total, rolling = 0.0, []
        for i, value in enumerate(values):
            total += value - (values[i - window] if i >= window else 0.0)
            rolling.append(total / min(i + 1, window))
        line = thin(list(zip([p[0] for p in points], rolling)), MAX_POINTS // 2)
        ax.plot(
            [x for x, _ in line],
            [y for _, y in line],
            color="#212529",
            linewidth=1.6,
            label=f"rolling mean ({window} rollouts)",
            zorder=4,
        )
    ax.set_title("Combined reward over time")
    ax.set_xlabel(axis.label)
    ax.set_ylabel("combined reward (mean of reward names)")
    axis.apply(ax)
    ax.legend(loc="best")
    return render(
        fig,
        "plot-reward-time",
        "Combined reward over time",
        "Each point is a rollout; the line is the mean of the last rollouts (is the agent improving?).",
    )


# -- rewards ----------------------------------------------------------------------------------


@in_rc
def reward_distributions(values: Mapping[str, Sequence[float]], max_names: int = 12) -> Plot | None:
    """One histogram per reward name (small multiples)."""
    names = [n for n in sorted(values) if values[n]][:max_names]
    if not names:
        return None
    cols = min(4, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = new_figure(rows, cols, width=WIDE, height=max(2.4, 2.3 * rows + 0.3))
    for index, name in enumerate(names):
        ax = axes[index // cols][index % cols]
        data = list(values[name])
        ax.hist(data, bins=hist_bins(data, 20), color=PALETTE[index % len(PALETTE)], edgecolor="white", linewidth=0.4)
        mean = sum(data) / len(data)
        ax.axvline(mean, color="#212529", linestyle="--", linewidth=1)
        ax.set_title(f"{short(name, 28)} (n={len(data)}, mean {mean:.3g})", fontsize=9)
        ax.set_xlabel("reward value")
        ax.set_ylabel("rollouts")
        ax.yaxis.get_major_locator().set_params(integer=True)
    for index in range(len(names), rows * cols):
        axes[index // cols][index % cols].set_visible(False)
    fig.suptitle("Reward distribution per reward name (episode rewards)", fontweight="bold", fontsize=10.5)
    return render(
        fig,
        "plot-rewards-names",
        "Reward distribution per reward name",
        "Histogram of each reward's episode values (one value per rollout: its latest episode-level "
        "value, from the episode_rewards view); the dashed line is the mean.",
    )


@in_rc
def combined_distribution(rewards: Sequence[float]) -> Plot | None:
    """Histogram of the combined reward."""
    if not rewards:
        return None
    import numpy as np

    fig, axes = new_figure()
    ax = axes[0][0]
    data = list(rewards)
    ax.hist(data, bins=hist_bins(data), color=PURPLE, edgecolor="white", linewidth=0.4)
    mean, median = float(np.mean(data)), float(np.median(data))
    ax.axvline(mean, color="#212529", linestyle="--", linewidth=1, label=f"mean {mean:.3g}")
    ax.axvline(median, color=ORANGE, linestyle=":", linewidth=1.4, label=f"median {median:.3g}")
    ax.set_title(f"Combined reward ({len(data)} rollouts)")
    ax.set_xlabel("combined reward (mean over reward names)")
    ax.set_ylabel("rollouts")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left")
    return render(
        fig,
        "plot-rewards-combined",
        "Combined reward",
        "The combined reward per rollout (rollouts.total_reward): its reward names' episode values "
        "weighted by the recorded reward weights.",
    )


@in_rc
def reward_by_task(tasks: Sequence[Mapping[str, Any]], max_tasks: int = 30) -> Plot | None:
    """Box plot of the combined reward per task, tasks with the most rollouts first."""
    items = [t for t in tasks if t["rewards"]]
    if not items:
        return None
    items = sorted(items, key=lambda t: (-t["rollouts"], str(t["task_id"])))[:max_tasks]
    items.sort(key=lambda t: str(t["task_id"]))
    height = max(2.6, 0.32 * len(items) + 1.2)
    fig, axes = new_figure(height=height)
    ax = axes[0][0]
    positions = list(range(1, len(items) + 1))
    boxplot(
        ax,
        [t["rewards"] for t in items],
        positions=positions,
        widths=0.6,
        patch_artist=True,
        boxprops={"facecolor": "#d0ebff", "edgecolor": BLUE},
        medianprops={"color": "#212529"},
        showfliers=False,
    )
    for position, task in zip(positions, items):
        dots = thin(task["rewards"], 200)
        jitter = [position + ((i * 0.37) % 0.5 - 0.25) for i in range(len(dots))]
        ax.scatter(dots, jitter, s=10, color=BLUE, alpha=0.6, zorder=3, linewidths=0)
        ax.scatter([task["mean"]], [position], marker="D", s=22, color=ORANGE, zorder=4)
    ax.set_yticks(positions, [short(t["task_id"], 28) for t in items])
    ax.set_title(f"Combined reward by task ({len(items)} tasks)")
    ax.set_xlabel("combined reward")
    ax.set_ylabel("task")
    ax.invert_yaxis()
    return render(
        fig,
        "plot-rewards-task",
        "Combined reward by task",
        "Box: quartiles of the rollouts' combined reward per task; dots: rollouts; diamond: mean.",
    )


@in_rc
def group_spread(groups: Sequence[Mapping[str, Any]], max_groups: int = 40) -> Plot | None:
    """Per GRPO group: the range (min to max) of the combined reward, its rollouts and mean."""
    everything = [g for g in groups if g["rewards"]]
    if not everything:
        return None
    items = everything[:max_groups]
    fig, axes = new_figure(width=WIDTH, height=HEIGHT + 0.4)
    ax = axes[0][0]
    xs = list(range(len(items)))
    for x, group in zip(xs, items):
        flat = group["spread"] is not None and group["spread"] < 1e-12
        colour = ERROR if flat else BLUE
        ax.vlines(x, group["min"], group["max"], color=colour, linewidth=3, alpha=0.35)
        dots = thin(group["rewards"], 60)
        ax.scatter([x] * len(dots), dots, s=14, color=colour, zorder=3, linewidths=0)
        ax.scatter([x], [group["mean"]], marker="_", s=160, color="#212529", zorder=4)
    every = max(1, math.ceil(len(items) / 20))
    ticks = xs[::every]
    labels = [short(items[x]["group_id"], 16) for x in ticks]
    if len(items) > 4:
        ax.set_xticks(ticks, labels, rotation=45, ha="right")
    else:
        ax.set_xticks(ticks, labels)
    ax.set_xlim(-0.6, len(items) - 0.4)
    flat_count = sum(1 for g in everything if g["spread"] is not None and g["spread"] < 1e-12 and len(g["rewards"]) > 1)
    shown = (
        f"{len(items)} of {len(everything)} groups shown" if len(items) < len(everything) else f"{len(items)} groups"
    )
    ax.set_title(f"Reward spread within GRPO groups\n({shown}, {flat_count} with no spread)")
    ax.set_xlabel("group")
    ax.set_ylabel("combined reward")
    return render(
        fig,
        "plot-rewards-groups",
        "Reward spread within groups",
        "Each column is a group: dots are its rollouts, the bar spans min to max, the dash is the mean. "
        "Red groups have no spread: every rollout got the same reward, so GRPO learns nothing from them.",
    )


# -- tools and tokens -------------------------------------------------------------------------


@in_rc
def tool_calls(
    tools: Sequence[Mapping[str, Any]], latencies: Mapping[str, Sequence[float]], max_tools: int = 25
) -> Plot | None:
    """Calls per tool (ok / error, with the error rate) and latency per tool (box plot, ms)."""
    items = list(tools)[:max_tools]
    if not items:
        return None
    height = max(2.4, 0.36 * len(items) + 1.3)
    fig, axes = new_figure(1, 2, width=WIDE, height=height)
    ax = axes[0][0]
    ys = list(range(len(items)))
    ok = [t["calls"] - t["errors"] for t in items]
    errors = [t["errors"] for t in items]
    ax.barh(ys, ok, height=0.6, color=OK, label="ok")
    ax.barh(ys, errors, height=0.6, left=ok, color=ERROR, label="error")
    for y, tool in zip(ys, items):
        ax.text(tool["calls"], y, f" {tool['calls']} calls, {tool['error_rate']:.0%} failed", va="center", fontsize=8)
    labels = [short(t["tool_name"], 22) for t in items]
    ax.set_yticks(ys, labels)
    ax.set_ylim(len(items) - 0.4, -0.6)
    ax.set_xlim(0, max(t["calls"] for t in items) * 1.45)
    ax.set_title("Tool calls by tool")
    ax.set_xlabel("calls")
    ax.set_ylabel("tool")
    ax.legend(loc="lower right")
    ax = axes[0][1]
    data = [list(latencies.get(str(t["tool_name"]), [])) or [float("nan")] for t in items]
    finite = [v for values in data for v in values if v == v]
    if finite:
        boxplot(
            ax,
            data,
            positions=ys,
            widths=0.6,
            patch_artist=True,
            manage_ticks=False,
            showfliers=len(finite) <= 5000,
            flierprops={"markersize": 3},
            boxprops={"facecolor": "#d3f9d8", "edgecolor": OK},
            medianprops={"color": "#212529"},
        )
        positive = [v for v in finite if v > 0]
        if positive and max(positive) / max(min(positive), 1e-9) > 50:
            ax.set_xscale("log")
    else:
        no_data(ax, "no durations")
    ax.set_yticks(ys, labels)
    ax.set_ylim(len(items) - 0.4, -0.6)
    ax.set_title("Tool latency")
    ax.set_xlabel("latency (ms)")
    return render(
        fig,
        "plot-tools",
        "Tool calls and latency",
        "Left: calls per tool, ok (green) and failed (red), with the error rate. Right: distribution of "
        "each tool's call duration (box: quartiles, whiskers: 1.5 IQR, circles: outliers).",
    )


@in_rc
def tokens(
    models: Sequence[Mapping[str, Any]], per_rollout: Sequence[Mapping[str, Any]], max_models: int = 15
) -> Plot | None:
    """Tokens by model (stacked input / output) and tokens per rollout (histograms)."""
    items = [m for m in models if (m["input_tokens"] or 0) + (m["output_tokens"] or 0) > 0][:max_models]
    if not items:
        return None
    height = max(2.8, 0.36 * len(items) + 1.5)
    fig, axes = new_figure(1, 2, width=WIDE, height=height)
    ax = axes[0][0]
    ys = list(range(len(items)))
    inputs = [int(m["input_tokens"] or 0) for m in items]
    outputs = [int(m["output_tokens"] or 0) for m in items]
    ax.barh(ys, inputs, height=0.5, color=BLUE, label="input")
    ax.barh(ys, outputs, height=0.5, left=inputs, color=ORANGE, label="output")
    ax.set_yticks(ys, [short(m["model"], 22) for m in items])
    ax.set_ylim(max(len(items), 2) - 0.3, -0.7)
    ax.set_title("Tokens by model")
    ax.set_xlabel("tokens")
    ax.set_ylabel("model")
    ax.legend(loc="lower right")
    ax.ticklabel_format(axis="x", style="plain")
    ax = axes[0][1]
    ins = [int(r["input_tokens"] or 0) for r in per_rollout]
    outs = [int(r["output_tokens"] or 0) for r in per_rollout]
    if ins:
        both = ins + outs
        import numpy as np

        lo, hi = min(both), max(both)
        edges = np.linspace(lo, hi if hi > lo else lo + 1, 21)
        ax.hist(ins, bins=edges, color=BLUE, alpha=0.65, label="input")
        ax.hist(outs, bins=edges, color=ORANGE, alpha=0.65, label="output")
        ax.legend(loc="upper right")
    else:
        no_data(ax)
    ax.set_title("Tokens per rollout")
    ax.set_xlabel("tokens in the rollout")
    ax.set_ylabel("rollouts")
    return render(
        fig,
        "plot-tokens",
        "Token usage",
        "Left: input and output tokens summed per model. Right: tokens per rollout (sum over its LLM calls).",
    )


# -- coordination -----------------------------------------------------------------------------


@in_rc
def coordination(counts: Sequence[Mapping[str, Any]], rollouts: Sequence[Mapping[str, Any]]) -> Plot | None:
    """Events by type, rounds per rollout, and how many rollouts reached consensus."""
    if not counts:
        return None
    fig, axes = new_figure(1, 3, width=WIDE, gridspec_kw={"width_ratios": [2, 1.5, 1]})
    ax = axes[0][0]
    ys = list(range(len(counts)))
    ax.barh(ys, [c["events"] for c in counts], color=PALETTE[: len(counts)] if len(counts) <= len(PALETTE) else BLUE)
    ax.set_yticks(ys, [short(c["event_type"], 18) for c in counts])
    ax.invert_yaxis()
    ax.set_title("Events by type")
    ax.set_xlabel("events")
    ax = axes[0][1]
    rounds = [r["rounds"] for r in rollouts]
    if rounds:
        low, high = min(rounds), max(rounds)
        ax.hist(rounds, bins=[x - 0.5 for x in range(low, high + 2)], color=PURPLE, edgecolor="white", rwidth=0.8)
        step = max(1, (high - low + 1) // 10)
        ax.set_xticks(list(range(low, high + 1, step)))
        ax.set_xlim(low - 1, high + 1)
        ax.yaxis.get_major_locator().set_params(integer=True)
    else:
        no_data(ax)
    ax.set_title("Rounds per rollout")
    ax.set_xlabel("rounds")
    ax.set_ylabel("rollouts")
    ax = axes[0][2]
    yes = sum(1 for r in rollouts if r["consensus"])
    no = len(rollouts) - yes
    bars = ax.bar(["consensus", "none"], [yes, no], color=[OK, ERROR])
    ax.bar_label(bars, fontsize=8, padding=2)
    ax.margins(y=0.18)
    ax.set_title("Consensus")
    ax.set_ylabel("rollouts")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return render(
        fig,
        "plot-coordination",
        "Coordination",
        "Left: coordination events by type. Middle: rounds per multi-agent rollout (max round + 1, else "
        "restarts + 1). Right: rollouts where a majority of the last round's votes named the final answerer.",
    )


# -- training ---------------------------------------------------------------------------------

#: Panels of a training run's figure: (title, y label, test on a metric name). The two
#: log-probability families are different quantities and get their own panel and label:
#: ``logps/*`` (TRL's KTO and DPO trainers: ``logps/chosen``, ``logps/rejected``) is the log-probability
#: of a whole completion, the SUM over its tokens (TRL logs no token counts, so no per-token mean
#: can be derived); ``logp/*`` (offline GRPO: ``logp/positive``, ``logp/negative``) is the MEAN
#: log-probability per trained token.
TRAINING_PANELS: tuple[tuple[str, str, Any], ...] = (
    ("Loss", "loss", lambda n: n == "loss" or (n.endswith("loss") and n != "train_loss")),
    ("Reward", "reward / advantage", lambda n: n.startswith(("reward", "rewards/")) or n in ("advantage_mean",)),
    ("KL", "KL divergence", lambda n: n == "kl" or n.startswith(("kl/", "kl_")) or n.endswith("/kl")),
    (
        "Log-probabilities (per completion)",
        "sum of log p over the completion's tokens",
        lambda n: n.startswith("logps/"),
    ),
    ("Log-probabilities (per token)", "mean log p per token", lambda n: n.startswith("logp/") or n == "logp"),
)


def training_panels(metrics: Mapping[str, Sequence[tuple[float, float]]]) -> list[tuple[str, str, list[str]]]:
    """The panels a run has: (title, y label, metric names with at least two logged points)."""
    curves = [name for name, points in metrics.items() if len(points) >= 2]
    panels = []
    taken: set[str] = set()
    for title, label, test in TRAINING_PANELS:
        names = sorted(n for n in curves if n not in taken and test(n))
        taken.update(names)
        if names:
            panels.append((title, label, names))
    return panels


@in_rc
def training_run(
    run: Mapping[str, Any], metrics: Mapping[str, Sequence[tuple[float, float]]], index: int
) -> Plot | None:
    """A training run's loss, reward, KL and log-probability curves by optimizer step."""
    panels = training_panels(metrics)
    if not panels:
        return None
    cols = min(len(panels), 4)
    rows = math.ceil(len(panels) / cols)
    fig, axes = new_figure(rows, cols, width=WIDE, height=2.8 * rows + 0.4)
    for position, (title, label, names) in enumerate(panels):
        ax = axes[position // cols][position % cols]
        for colour_index, name in enumerate(names[:8]):
            points = metrics[name]
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                markersize=2.5,
                linewidth=1.4,
                color=PALETTE[colour_index % len(PALETTE)],
                label=short(name, 26),
            )
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(label)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(loc="best")
    for position in range(len(panels), rows * cols):
        axes[position // cols][position % cols].set_visible(False)
    run_name = f"{run.get('method')} run {str(run.get('run_id'))[:8]}"
    fig.suptitle(f"Training: {short(run_name, 60)}", fontweight="bold", fontsize=10.5)
    return render(
        fig,
        f"plot-training-{index}",
        f"Training run {run_name}",
        "Metrics logged by the trainer at each optimizer step (training_metrics). logps/* (KTO, DPO): a "
        "completion's log-probability, summed over its tokens; logp/* (offline GRPO): the mean per token.",
    )
