"""The report's *Capture health* section: the summary ``agent-rl doctor`` prints, as HTML.

:func:`section` runs :func:`agent_rl_plugin.data.health.check_traces` on the report's
connection (with the report's ``where``; no tokenizer checks) and renders one row per finding:
severity, check, count out of how many, counts per agent, the message, example ids and the fix.
Every value read from the store (agent names, ids) goes through
:func:`agent_rl_plugin.report.html.table`, which escapes it.
"""

from __future__ import annotations

from typing import Any

from agent_rl_plugin.data.health import HealthReport, check_traces
from agent_rl_plugin.report import html as h

__all__ = ["SECTION", "render", "section"]

#: (id, navigation label) of the section.
SECTION = ("health", "Capture health")
_BADGE = {"error": "err", "warning": "other", "info": "other"}


def section(connection: Any, where: str | None) -> tuple[str, dict[str, int]]:
    """The section's HTML and its counts (``health_errors``, ``health_warnings``, ``health_info``)."""
    report = check_traces(connection, where=where)
    return render(report), counts(report)


def counts(report: HealthReport) -> dict[str, int]:
    """How many checks found errors, warnings and info findings."""
    overall = report.overall()
    return {f"health_{s}": sum(1 for f in overall if f.severity == s) for s in ("error", "warning", "info")}


def render(report: HealthReport) -> str:
    """The section for ``report`` (a notice when every check passed)."""
    overall = report.overall()
    intro = (
        "What makes the recorded traces unfit for training, with a fix for each; the same checks as "
        "<code>agent-rl doctor</code> (see docs/doctor.md)."
    )
    if not [f for f in overall if f.severity != "info"]:
        text = "<b>Healthy.</b> No check found an error or a warning."
    else:
        errors, warnings = len(report.errors), len(report.warnings)
        text = f"<b>{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}.</b>"
    css = "notice" if not report.errors else "notice warn"
    rows = []
    for finding in overall:
        agents = report.by_agent(finding.code)
        rows.append(
            {
                "severity": f'<span class="badge {_BADGE.get(finding.severity, "other")}">{h.esc(finding.severity)}</span>',
                "code": finding.code,
                "count": f"{finding.count:,} / {finding.total:,}",
                "agents": ", ".join(f"{name} {f.count:,}" for name, f in sorted(agents.items())),
                "message": finding.message,
                "examples": ", ".join(finding.examples),
                "fix": finding.fix,
            }
        )
    columns = [
        ("severity", "severity"),
        ("code", "check"),
        ("count", "count"),
        ("agents", "by agent"),
        ("message", "what"),
        ("examples", "e.g."),
        ("fix", "fix"),
    ]
    body = h.notice(text, css) + (h.table(columns, rows, raw=["severity"]) if rows else "")
    if report.skipped:
        body += f'<p class="muted">Not checked: {h.esc(", ".join(sorted(report.skipped)))}.</p>'
    return h.section(SECTION[0], SECTION[1], body, intro)
