"""``agent-rl report``: one self-contained HTML file about a store.

* :mod:`~agent_rl_plugin.report.queries`: the SQL of each section (read-only);
* :mod:`~agent_rl_plugin.report.plots`: the figures, rendered by :mod:`~agent_rl_plugin.report.svg`
  (matplotlib to inline SVG);
* :mod:`~agent_rl_plugin.report.html`: the page, escaping and tables;
* :mod:`~agent_rl_plugin.report.traces`: the step-by-step trace viewer;
* :mod:`~agent_rl_plugin.report.build`: :func:`build_report`, which puts them together.

See docs/report.md.
"""

from __future__ import annotations

from agent_rl_plugin.report.build import SECTIONS, ReportSummary, build_report
from agent_rl_plugin.report.queries import ReportError

__all__ = ["SECTIONS", "ReportError", "ReportSummary", "build_report"]
