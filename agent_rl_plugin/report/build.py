"""``build_report(db, out, where=None)``: read the store, draw the plots, write one HTML file.

The file is self-contained (inline CSS, one inline script, plots as inline SVG; a
Content-Security-Policy forbids any network access) and written atomically (a temporary file
next to ``out``, then renamed). Rollout sections follow ``where`` (a condition over the
``rollouts`` view); training runs and training loops are listed whatever ``where`` says.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, Sequence

from agent_rl_plugin.report import health as hl
from agent_rl_plugin.report import html as h
from agent_rl_plugin.report import loops as lp
from agent_rl_plugin.report import plots as p
from agent_rl_plugin.report import queries as q
from agent_rl_plugin.report import sections as s
from agent_rl_plugin.report.queries import ReportError
from agent_rl_plugin.version import __version__

#: (id, navigation label) of every section, in page order.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("overview", "Overview"),
    hl.SECTION,
    ("rollouts", "Rollouts"),
    ("rewards", "Rewards"),
    ("groups", "Tasks & groups"),
    ("tools", "Tool calls"),
    ("tokens", "Tokens"),
    ("coordination", "Coordination"),
    ("training", "Training"),
    ("worst", "Worst rollouts"),
)
#: The section only a store with closed training loops (``loop_rounds`` rows) has; it comes
#: right after Training. Not in :data:`SECTIONS`, the sections every full store has.
LOOPS_SECTION = ("loops", "Training loops")
_AFTER = [sid for sid, _ in SECTIONS].index("training") + 1
_ORDER = (*SECTIONS[:_AFTER], LOOPS_SECTION, *SECTIONS[_AFTER:])

#: Progress steps, for ``progress(step, done, total)``.
STEPS = (
    "selecting rollouts",
    "rollouts",
    "capture health",
    "rewards",
    "tasks and groups",
    "tool calls",
    "tokens",
    "coordination",
    "training runs",
    "training loops",
    "traces",
    "writing",
)

Progress = Callable[[str, int, int], None]

#: Training runs listed (the latest); rows and curves per section: :mod:`.sections`.
MAX_RUNS = 20


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
    ``worst``: the most rollouts listed under "Worst rollouts", each with a step-by-step trace:
    the ``worst`` lowest combined rewards (unrewarded rollouts, failed first, only fill places
    left when fewer have a reward). ``progress(step, done, total)`` is called before each step. Raises
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
    summary = ReportSummary(
        path=os.path.abspath(os.fspath(out)),
        database=os.path.abspath(database) if database != "(connection)" else database,
        where=where,
    )
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
    now = datetime.now(UTC)
    meta = (
        f"database <code>{h.esc(summary.database)}</code> · generated {h.esc(now.strftime('%Y-%m-%d %H:%M:%S'))} UTC"
        + (f" · rollouts where <code>{h.esc(where)}</code>" if where else "")
        + f" · {summary.counts.get('rollouts', 0):,} rollouts"
    )
    footer = (
        f"agent-rl {h.esc(__version__)} · <code>agent-rl report</code> · one self-contained file: "
        "no network needed to open it"
    )
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


def _sections(
    connection: Any, sel: str, n_rollouts: int, summary: ReportSummary, worst: int, step: Callable[[str], None]
):
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
            text = (
                f"<b>No rollouts match</b> <code>{h.esc(summary.where)}</code>.<br>"
                'Check the condition with <code>agent-rl query "select rollout_id, task_id, status from rollouts"</code>.'
            )
        else:
            text = (
                "<b>Nothing recorded yet.</b><br>This database holds no rollouts. Record an agent "
                "(<code>arl.configure(db=...)</code>, see docs/instrumenting.md), or run "
                "<code>agent-rl demo</code> to see a full report."
            )
        add("overview", h.section("overview", "Overview", h.notice(text, "notice empty")))
        summary.notes.append("no rollouts" + (" match the filter" if summary.where else " recorded yet"))
        for name in STEPS[1 : STEPS.index("training runs")]:
            step(name)
        step("training runs")
        if runs:
            html_text, plots = s.training(connection, runs, summary.counts["training_runs"])
            add("training", html_text, plots)
        _loops(connection, summary, add, step)
        step("traces")
        nav = [(sid, label) for sid, label in _ORDER if sid in present]
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
        rollouts=int(info["rollouts"]),
        tasks=int(info["tasks"]),
        groups=int(info["groups"]),
        llm_calls=int(info["llm_calls"]),
        tool_calls=int(info["tool_calls"]),
        tool_errors=int(info["tool_errors"]),
        input_tokens=int(info["input_tokens"]),
        output_tokens=int(info["output_tokens"]),
        reward_names=len(reward_rows),
        rewarded_rollouts=len(rewarded),
    )
    add("overview", s.overview(info, rewarded, reward_rows, runs))

    step("capture health")
    html_text, health_counts = hl.section(connection, summary.where)
    summary.counts.update(health_counts)
    add(hl.SECTION[0], html_text)
    plots = [p.rollouts_over_time(times), p.status_and_duration(times)]
    add(
        "rollouts",
        h.section(
            "rollouts", "Rollouts", s.plot_grid(plots), "When the rollouts ran, how they ended and how long they took."
        ),
        plots,
    )

    step("rewards")
    html_text, plots = s.rewards(connection, sel, reward_values, reward_rows, rewarded)
    add("rewards", html_text, plots)

    step("tasks and groups")
    html_text, plots = s.groups(combined)
    add("groups", html_text, plots)

    step("tool calls")
    html_text, plots = s.tools(connection, sel)
    add("tools", html_text, plots)

    step("tokens")
    html_text, plots = s.tokens(connection, sel, info)
    add("tokens", html_text, plots)

    step("coordination")
    coordination = q.coordination(connection, sel)
    summary.counts["coordination_rollouts"] = len(coordination["rollouts"]) if coordination else 0
    # The rollouts that get a trace are chosen now, so the coordination table can link them.
    listed = s.listed(combined, worst)
    linked = {row["rollout_id"] for row, _ in listed}
    if coordination:
        html_text, plots = s.coordination(coordination, linked)
        add("coordination", html_text, plots)

    step("training runs")
    if runs:
        html_text, plots = s.training(connection, runs, summary.counts["training_runs"])
    else:
        html_text, plots = (
            h.section(
                "training",
                "Training",
                h.notice(
                    "<b>No training runs yet.</b> Train with <code>agent-rl train kto|grpo|gigpo</code> (see docs/training.md); "
                    "each run and its per-step metrics land in <code>training_runs</code> and <code>training_metrics</code>."
                ),
            ),
            [],
        )
    add("training", html_text, plots)
    _loops(connection, summary, add, step)

    step("traces")
    data = q.trace_data(connection, [row["rollout_id"] for row, _ in listed])
    add("worst", s.worst(listed, data, reward_rows, linked, worst))
    summary.traces = len(listed)
    summary.counts["traces"] = len(listed)
    nav = [(sid, label) for sid, label in _ORDER if sid in present]
    summary.sections = present
    summary.plots = [x.id for x in all_plots]
    return "".join(parts), nav


def _loops(connection: Any, summary: ReportSummary, add: Callable[..., None], step: Callable[[str], None]) -> None:
    """The Training loops section, when the store has loop rounds (not filtered by ``where``)."""
    step("training loops")
    found = lp.section(connection)
    summary.counts.update(found[2] if found else {"loops": 0, "loop_rounds": 0})
    if found:
        add(LOOPS_SECTION[0], found[0], found[1])
