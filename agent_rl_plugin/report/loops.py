"""The report's *Training loops* section: held-out success per round of every closed training
loop in the store (table ``loop_rounds``, migration ``0010``), grouped by advantage method and
environment.

* :func:`loop_rounds` reads the rows (the latest ``created_at`` per ``(loop_id, round)`` wins: a
  resumed loop may record a round twice); ``[]`` when the table is absent (a store older than
  migration ``0010``) or empty.
* :func:`summarise` turns them into one :class:`LoopSummary` per loop and one
  :class:`MethodGroup` per (method, env), with the mean curve over seeds and its min–max band.
* :func:`section` renders the HTML (a chart, a table per method, each loop's rounds) and
  returns ``None`` when there is no loop to show, so the report has no such section then.

Every value read from the store (loop ids, policy versions, methods, run ids...) is untrusted:
the tables escape it through :func:`agent_rl_plugin.report.html.table`, the chart's labels are
escaped by matplotlib's SVG writer. Like training runs, loops are not filtered by ``--where``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import duckdb

from agent_rl_plugin.report import html as h
from agent_rl_plugin.report.queries import fetch, has_table
from agent_rl_plugin.report.svg import PALETTE, WIDE, WIDTH, Plot, in_rc, new_figure, render, short

__all__ = [
    "PHASES",
    "THRESHOLD",
    "LoopSummary",
    "MethodGroup",
    "loop_rounds",
    "rounds_to",
    "section",
    "summarise",
]

#: The held-out success a loop is said to reach ("rounds to 0.8").
THRESHOLD = 0.8
#: The phases of a round, in the order the loop runs them (the keys of ``loop_rounds.seconds``).
PHASES = ("rollouts", "advantages", "dataset", "train", "reload", "eval")
#: A loop's per-round table is collapsed when it has more rounds than this.
OPEN_ROUNDS = 12
#: Most loops that get a per-round table (the most recently recorded ones).
MAX_DETAILED = 30
#: Most environments drawn as panels of the chart (the ones with most loops).
MAX_PANELS = 4

_EPS = 1e-9
_BADGES = {"done": "ok", "failed": "err", "skipped": "cancel"}


@dataclass
class LoopSummary:
    """One loop: its rounds (dicts, by round; ``seconds`` parsed), what its last row says about
    it (``method``, ``env``, ``seed``), and its held-out curve ``[(round, success)]`` (rounds
    without a held-out success left out)."""

    loop_id: str
    method: str
    env: str
    seed: Any
    rounds: list[dict[str, Any]]
    curve: list[tuple[int, float]]
    last_recorded: Any = None

    @property
    def rounds_to_threshold(self) -> int | None:
        return rounds_to(self.curve)

    @property
    def final_success(self) -> float | None:
        return self.curve[-1][1] if self.curve else None

    def mean_seconds(self) -> dict[str, float]:
        """Mean wall seconds per phase over the rounds that recorded that phase."""
        return _mean_phases([r["seconds"] for r in self.rounds])


@dataclass
class MethodGroup:
    """The loops of one (method, env), and per round the mean held-out success over the loops
    that have that round, with its min and max: ``band`` is ``[(round, mean, min, max, n)]``."""

    method: str
    env: str
    loops: list[LoopSummary] = field(default_factory=list)

    @property
    def band(self) -> list[tuple[int, float, float, float, int]]:
        per_round: dict[int, list[float]] = {}
        for loop in self.loops:
            for number, value in loop.curve:
                per_round.setdefault(number, []).append(value)
        return [
            (number, sum(values) / len(values), min(values), max(values), len(values))
            for number, values in sorted(per_round.items())
        ]


def loop_rounds(connection: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every loop round, by loop then round; for a round recorded twice the row with the latest
    ``created_at`` wins. ``seconds`` is parsed to a dict of finite floats (``{}`` when missing or
    malformed). ``[]`` when the table does not exist."""
    if not has_table(connection, "loop_rounds"):
        return []
    rows = fetch(
        connection,
        """
        SELECT loop_id, round, status, env, method, seed, policy_version, adapter_path, training_run_id,
               train_success, heldout_success, CAST(seconds AS VARCHAR) AS seconds, created_at
        FROM loop_rounds
        QUALIFY row_number() OVER (PARTITION BY loop_id, round ORDER BY created_at DESC) = 1
        ORDER BY loop_id, round
        """,
    )
    for row in rows:
        row["seconds"] = _phases(row["seconds"])
        for key in ("train_success", "heldout_success"):
            value = row[key]
            row[key] = float(value) if value is not None and math.isfinite(value) else None
    return rows


def rounds_to(curve: Sequence[tuple[int, float]], threshold: float = THRESHOLD) -> int | None:
    """The first round whose held-out success is at least ``threshold`` (``None``: never)."""
    for number, value in curve:
        if value >= threshold - _EPS:
            return number
    return None


def summarise(rows: Sequence[Mapping[str, Any]]) -> list[MethodGroup]:
    """The loops of ``rows`` (as :func:`loop_rounds` returns them), grouped by (method, env),
    groups sorted by method then env, loops within a group by seed then id."""
    by_loop: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_loop.setdefault(str(row["loop_id"]), []).append(dict(row))
    groups: dict[tuple[str, str], MethodGroup] = {}
    for loop_id, rounds in by_loop.items():
        rounds.sort(key=lambda r: r["round"])
        last = rounds[-1]
        method, env = str(last.get("method") or "(none)"), str(last.get("env") or "(none)")
        curve = [(int(r["round"]), r["heldout_success"]) for r in rounds if r.get("heldout_success") is not None]
        recorded = max((r["created_at"] for r in rounds if r.get("created_at") is not None), default=None)
        loop = LoopSummary(loop_id, method, env, last.get("seed"), rounds, curve, recorded)
        groups.setdefault((method, env), MethodGroup(method, env)).loops.append(loop)
    for group in groups.values():
        group.loops.sort(key=_loop_order)
    return [groups[key] for key in sorted(groups)]


def section(connection: duckdb.DuckDBPyConnection) -> tuple[str, list[Plot], dict[str, int]] | None:
    """The section's HTML, its plots and counts (``loops``, ``loop_rounds``); ``None`` when the
    store has no loop round (or no ``loop_rounds`` table)."""
    rows = loop_rounds(connection)
    if not rows:
        return None
    groups = summarise(rows)
    loops = [loop for group in groups for loop in group.loops]
    plots = [x for x in [success_plot(groups)] if x is not None]
    body = "".join(h.figure(x, wide=True) for x in plots)
    if not plots:
        body += h.notice("No round recorded a held-out success yet, so there is no curve to draw.")
    body += "<h3>By method</h3>" + "".join(_method_table(group) for group in groups)
    body += "<h3>Rounds of each loop</h3>" + _round_tables(loops)
    intro = (
        f"Closed training loops (<code>agent-rl loop</code>, table <code>loop_rounds</code>): {len(loops)} "
        f"loop{'s' if len(loops) != 1 else ''}, {len(rows)} rounds. Round 0 is the starting policy "
        "(evaluated only); round k trained on rollouts of policy k−1. Held-out success: the share of "
        "held-out starts the policy solves acting greedily. A round recorded twice (a resumed loop) "
        "shows its latest row. <code>--where</code> does not filter loops."
    )
    return h.section("loops", "Training loops", body, intro), plots, {"loops": len(loops), "loop_rounds": len(rows)}


# -- the chart ---------------------------------------------------------------------------------


@in_rc
def success_plot(groups: Sequence[MethodGroup]) -> Plot | None:
    """Held-out success by round: one thin line per loop coloured by method, and for a method
    with two loops or more their mean per round (thick) with a min–max band; one panel per
    environment (at most :data:`MAX_PANELS`)."""
    drawable = [g for g in groups if any(loop.curve for loop in g.loops)]
    if not drawable:
        return None
    methods = sorted({g.method for g in drawable})
    colours = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}
    envs = sorted({g.env for g in drawable}, key=lambda e: (-sum(len(g.loops) for g in drawable if g.env == e), e))
    shown = envs[:MAX_PANELS]
    fig, axes = new_figure(1, len(shown), width=WIDE if len(shown) > 1 else WIDTH + 2.0, height=3.4)
    for panel, env in enumerate(shown):
        ax = axes[0][panel]
        for group in (g for g in drawable if g.env == env):
            _draw_group(ax, group, colours[group.method])
        ax.axhline(THRESHOLD, color="#868e96", linestyle=":", linewidth=1)
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"Held-out success · {short(env, 40)}")
        ax.set_xlabel("round")
        ax.set_ylabel("held-out success (share of starts)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(loc="lower right")
    caption = (
        "Held-out success after each round, one thin line per loop coloured by advantage method. Where a method "
        "has two loops or more (seeds), the thick line is their mean per round and the shaded band spans their "
        f"minimum to maximum. Dotted: {THRESHOLD:g}."
    )
    if len(envs) > len(shown):
        caption += f" The {len(shown)} environments with most loops of {len(envs)}."
    return render(fig, "plot-loops-heldout", "Held-out success per round", caption)


def _draw_group(ax: Any, group: MethodGroup, colour: str) -> None:
    drawn = sum(1 for loop in group.loops if loop.curve)
    several = drawn >= 2
    for loop in group.loops:
        if not loop.curve:
            continue
        ax.plot(
            [x for x, _ in loop.curve],
            [y for _, y in loop.curve],
            color=colour,
            linewidth=1.0 if several else 1.8,
            alpha=0.45 if several else 1.0,
            marker="o",
            markersize=2.5,
            label=None if several else f"{short(group.method, 16)} ({short(loop.loop_id, 24)})",
        )
    if several:
        band = group.band
        xs = [b[0] for b in band]
        ax.fill_between(xs, [b[2] for b in band], [b[3] for b in band], color=colour, alpha=0.15, linewidth=0)
        ax.plot(
            xs,
            [b[1] for b in band],
            color=colour,
            linewidth=2.4,
            label=f"{short(group.method, 16)}: mean of {drawn} (band min–max)",
        )


# -- the tables --------------------------------------------------------------------------------


def _method_table(group: MethodGroup) -> str:
    phases = _phase_names(r["seconds"] for loop in group.loops for r in loop.rounds)
    rows = []
    for loop in group.loops:
        statuses: dict[str, int] = {}
        for r in loop.rounds:
            statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
        reached = loop.rounds_to_threshold
        means = loop.mean_seconds()
        rows.append(
            {
                "loop_id": loop.loop_id,
                "seed": loop.seed,
                "rounds": loop.rounds[-1]["round"],
                "statuses": ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
                "reached": reached if reached is not None else "not reached",
                "final": loop.final_success,
                **{f"s_{p}": means.get(p) for p in phases},
            }
        )
    reached_values = [loop.rounds_to_threshold for loop in group.loops]
    hits = [v for v in reached_values if v is not None]
    finals = [loop.final_success for loop in group.loops if loop.final_success is not None]
    loop_means = [loop.mean_seconds() for loop in group.loops]
    if len(group.loops) >= 2:
        rows.append(
            {
                "loop_id": f"mean of {len(group.loops)} loops",
                "reached": (
                    f"{sum(hits) / len(hits):.3g} ({len(hits)} of {len(reached_values)} reached)"
                    if hits
                    else "not reached"
                ),
                "final": sum(finals) / len(finals) if finals else None,
                **{f"s_{p}": _mean([m[p] for m in loop_means if p in m]) for p in phases},
            }
        )
    columns = [
        ("loop_id", "loop"),
        ("seed", "seed"),
        ("rounds", "last round"),
        ("statuses", "rounds by status"),
        ("reached", f"rounds to {THRESHOLD:g}"),
        ("final", "final held-out"),
    ] + [(f"s_{p}", f"{p} s") for p in phases]
    numeric = ["seed", "rounds", "reached", "final"] + [f"s_{p}" for p in phases]
    title = f"<h4>{h.esc(group.method)} · {h.esc(group.env)}</h4>"
    return title + h.table(columns, rows, numeric=numeric)


def _round_tables(loops: Sequence[LoopSummary]) -> str:
    shown = sorted(loops, key=lambda x: (x.last_recorded is not None, str(x.last_recorded)), reverse=True)
    shown = shown[:MAX_DETAILED]
    note = (
        f'<p class="muted">The {MAX_DETAILED} most recently recorded loops of {len(loops)}.</p>'
        if len(loops) > MAX_DETAILED
        else ""
    )
    parts = []
    for loop in sorted(shown, key=lambda x: (x.method, x.env, *_loop_order(x))):
        phases = _phase_names(r["seconds"] for r in loop.rounds)
        rows = []
        for r in loop.rounds:
            run_id = r.get("training_run_id")
            rows.append(
                {
                    "round": r["round"],
                    "status_html": _badge(r.get("status")),
                    "train": r.get("train_success"),
                    "heldout": r.get("heldout_success"),
                    "version": r.get("policy_version"),
                    "run_html": f'<code title="{h.esc(run_id)}">{h.esc(str(run_id)[:8])}</code>' if run_id else "",
                    "total": sum(r["seconds"].values()) if r["seconds"] else None,
                    "recorded": r.get("created_at"),
                    **{f"s_{p}": r["seconds"].get(p) for p in phases},
                }
            )
        columns = [
            ("round", "round"),
            ("status_html", "status"),
            ("train", "train success"),
            ("heldout", "held-out success"),
            ("version", "policy version"),
            ("run_html", "training run"),
        ] + [(f"s_{p}", f"{p} s") for p in phases]
        columns += [("total", "total s"), ("recorded", "recorded (UTC)")]
        numeric = ["round", "train", "heldout", "total"] + [f"s_{p}" for p in phases]
        table = h.table(columns, rows, raw=("status_html", "run_html"), numeric=numeric, css="data compact")
        final = loop.final_success
        summary = (
            f"<code>{h.esc(loop.loop_id)}</code> · {h.esc(loop.method)} · {h.esc(loop.env)} · seed "
            f"{h.esc(loop.seed)} · {len(loop.rounds)} rounds"
            + (f" · final held-out {h.esc(h.fmt(final))}" if final is not None else "")
        )
        is_open = " open" if len(loop.rounds) <= OPEN_ROUNDS else ""
        parts.append(f'<details class="io"{is_open}><summary>{summary}</summary>{table}</details>')
    return note + "".join(parts)


# -- helpers -----------------------------------------------------------------------------------


def _loop_order(loop: LoopSummary) -> tuple[Any, ...]:
    seed = loop.seed
    number = seed if isinstance(seed, int) else 0
    return (seed is None, not isinstance(seed, int), number, str(seed), loop.loop_id)


def _badge(status: Any) -> str:
    text = str(status or "unknown")
    return f'<span class="badge {_BADGES.get(text, "other")}">{h.esc(text)}</span>'


def _phases(value: Any) -> dict[str, float]:
    """``loop_rounds.seconds`` as {phase: seconds}: finite numbers only, ``{}`` if unreadable."""
    if value is None:
        return {}
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    out = {}
    for key, number in parsed.items():
        if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number):
            out[str(key)] = float(number)
    return out


def _phase_names(seconds: Any) -> list[str]:
    """The phases present in any of ``seconds`` (dicts): :data:`PHASES` order, then the rest."""
    names: set[str] = set()
    for item in seconds:
        names.update(item)
    return [p for p in PHASES if p in names] + sorted(names - set(PHASES))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _mean_phases(seconds: Sequence[Mapping[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for phase in _phase_names(seconds):
        mean = _mean([s[phase] for s in seconds if phase in s])
        if mean is not None:
            out[phase] = mean
    return out
