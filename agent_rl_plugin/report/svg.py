"""The plumbing of the report's plots: matplotlib figures rendered to inline SVG text.

Figures are made with :class:`matplotlib.figure.Figure` and saved with the SVG backend, never
through ``pyplot``: no global backend is switched and no GUI is touched (the same as the Agg
backend, headless). Text stays text (``svg.fonttype = none``: small, selectable, searchable),
mathtext is off (a ``$`` in a task id is just a dollar sign), ids inside each SVG get a
per-plot prefix so that several SVGs share one HTML page without clashing, and the output is
deterministic (``svg.hashsalt``). Labels come from the store and are untrusted: matplotlib's
SVG writer escapes text, attributes and comments, and comments are dropped anyway.

Because mathtext is off, matplotlib's default log-axis labels (``$\\mathdefault{10^{2}}$``) would
print as that raw text: :func:`render` gives every log-scale axis plain numeric tick labels
(``1``, ``10``, ``100``, ``1,000``, ``0.01``, ``2e6``) instead, see :func:`plain_number`.

matplotlib (the ``report`` extra) is imported inside :func:`mpl` and the helpers that need it,
so that importing the report does not require it. The plots themselves are in
:mod:`agent_rl_plugin.report.plots`.
"""

from __future__ import annotations

import html
import io
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

#: Colours (matplotlib's tab10, colour-blind friendlier than the default for the status pair).
OK = "#2f9e44"
ERROR = "#e03131"
CANCELLED = "#868e96"
BLUE = "#1c7ed6"
ORANGE = "#f08c00"
PURPLE = "#7048e8"
STATUS_COLOURS = {"ok": OK, "error": ERROR, "cancelled": CANCELLED}
PALETTE = ["#1c7ed6", "#f08c00", "#2f9e44", "#e03131", "#7048e8", "#0c8599", "#d6336c", "#5c940d", "#868e96", "#e8590c"]

WIDTH = 6.4  # inches: half of the page (two plots side by side at their natural size)
HEIGHT = 3.0
WIDE = 12.4  # inches: the whole width of the page (~1190 px)

_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "agent-rl-report",
    "svg.image_inline": True,
    "text.parse_math": False,
    "font.size": 9.0,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica", "Liberation Sans"],
    "axes.titlesize": 10.5,
    "axes.titleweight": "bold",
    "axes.labelsize": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "legend.fontsize": 8.0,
    "legend.frameon": True,
    "legend.framealpha": 0.85,
    "legend.edgecolor": "none",
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "figure.dpi": 100,
    "savefig.bbox": None,
    "savefig.pad_inches": 0.08,
    "date.converter": "concise",
    "axes.formatter.useoffset": False,
}


@dataclass
class Plot:
    """One rendered plot: ``svg`` is the ``<svg>`` element's text, ready to inline."""

    id: str
    title: str
    svg: str
    caption: str = ""


def mpl():
    import matplotlib
    from matplotlib.figure import Figure

    return matplotlib, Figure


def available() -> bool:
    """Whether matplotlib can be imported (the ``report`` extra)."""
    try:
        mpl()
    except ImportError:
        return False
    return True


def short(text: Any, width: int = 24) -> str:
    """``text`` as one line of at most ``width`` characters (an ellipsis marks a cut)."""
    value = "(none)" if text is None else " ".join(str(text).split())
    return value if len(value) <= width else value[: width - 1] + "…"


def new_figure(rows: int = 1, cols: int = 1, width: float = WIDTH, height: float = HEIGHT, **kwargs: Any):
    _, Figure = mpl()
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, **kwargs)
    return fig, axes


_ID = re.compile(r'\bid="([^"]+)"')
_WIDTH = re.compile(r'\swidth="([0-9.]+)pt"')
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.DOTALL)


def to_svg(fig: Any, plot_id: str, title: str = "") -> str:
    """The figure as an ``<svg>`` element with ids prefixed by ``plot_id``, no comments, and
    ``title`` as its accessible name."""
    matplotlib, _ = mpl()
    buffer = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = _COMMENT.sub("", text)
    text = _METADATA.sub("", text)  # creator and date: bytes, and not deterministic
    ids = set(_ID.findall(text))
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", plot_id)

    def rename(name: str) -> str:
        return f"{prefix}-{name}"

    text = _ID.sub(lambda m: f'id="{rename(m.group(1))}"', text)
    text = re.sub(
        r'((?:xlink:)?href="#)([^"]+)"',
        lambda m: f'{m.group(1)}{rename(m.group(2)) if m.group(2) in ids else m.group(2)}"',
        text,
    )
    text = re.sub(
        r"url\(#([^)]+)\)", lambda m: f"url(#{rename(m.group(1)) if m.group(1) in ids else m.group(1)})", text
    )
    label = html.escape(title, quote=True)
    # Its natural width, for the page's CSS: the plot fills its box, up to twice that size, and
    # a wide plot keeps at least three quarters of it (its box scrolls on a narrow screen).
    width = _WIDTH.search(text[: text.index(">")])
    natural = f' style="--natural-width:{width.group(1)}pt"' if width else ""
    text = text.replace("<svg ", f'<svg class="chart" role="img" aria-label="{label}"{natural} ', 1)
    return "\n".join(line for line in text.splitlines() if line.strip())


def plain_number(value: float) -> str:
    """A tick value as plain text a reader (and ``Number()``, once commas are dropped) reads as a
    number: ``1``, ``20``, ``1,000``, ``0.05``; below 1e-4 or from 1e6 on, ``2e-5`` / ``3e6``.
    Negative values use the minus sign matplotlib uses (U+2212)."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    sign = "\u2212" if value < 0 else ""
    size = abs(value)
    text = f"{size:,.6g}" if 1e-4 <= size < 1e6 else "e"
    if "e" in text:  # outside that range, or rounded up to 1e6
        exponent = math.floor(math.log10(size))
        mantissa = round(size / 10**exponent, 5)
        if mantissa >= 10:  # rounding carried over
            mantissa, exponent = mantissa / 10, exponent + 1
        text = f"{mantissa:g}e{exponent}"
    return sign + text


def _plain_formatter() -> Any:
    from matplotlib.ticker import LogFormatter

    class PlainLogFormatter(LogFormatter):
        """matplotlib's choice of which log ticks get a label, with :func:`plain_number` text."""

        def __call__(self, x: float, pos: Any = None) -> str:
            return plain_number(float(x)) if super().__call__(x, pos) else ""

    return PlainLogFormatter()


def plain_log_ticks(fig: Any) -> None:
    """Give every log-scale axis of ``fig`` plain numeric tick labels (no mathtext markup)."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_major_formatter(_plain_formatter())
                axis.set_minor_formatter(_plain_formatter())


def render(fig: Any, plot_id: str, title: str, caption: str = "") -> Plot:
    """The figure as a :class:`Plot` (log axes get plain numeric tick labels first)."""
    plain_log_ticks(fig)
    return Plot(plot_id, title, to_svg(fig, plot_id, title), caption)


def in_rc(function):
    """Run a plot function with the report's matplotlib settings (fonts, grid, no mathtext)."""

    def wrapper(*args: Any, **kwargs: Any):
        matplotlib, _ = mpl()
        with matplotlib.rc_context(_RC):
            return function(*args, **kwargs)

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


def boxplot(ax: Any, data: Any, **kwargs: Any) -> Any:
    """A horizontal box plot (``orientation=`` from matplotlib 3.10, ``vert=False`` before)."""
    matplotlib, _ = mpl()
    major, minor = (int(p) for p in matplotlib.__version__.split(".")[:2])
    if (major, minor) >= (3, 10):
        return ax.boxplot(data, orientation="horizontal", **kwargs)
    return ax.boxplot(data, vert=False, **kwargs)


#: Most points one scatter plot draws (more are thinned evenly: each is an SVG element).
MAX_POINTS = 2000


def thin(items: Sequence[Any], most: int) -> list[Any]:
    """At most ``most`` of ``items``, evenly spaced, first and last kept."""
    if len(items) <= most:
        return list(items)
    step = (len(items) - 1) / (most - 1)
    return [items[round(i * step)] for i in range(most)]


def no_data(ax: Any, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#868e96")
    ax.set_xticks([])
    ax.set_yticks([])


def hist_bins(values: Sequence[float], max_bins: int = 30) -> Any:
    import numpy as np

    lo, hi = min(values), max(values)
    if lo == hi:
        return (
            np.array([lo - 0.5, hi + 0.5])
            if lo == int(lo)
            else np.array([lo - abs(lo) * 0.05 - 0.05, hi + abs(hi) * 0.05 + 0.05])
        )
    return min(max_bins, max(5, int(math.sqrt(len(values)) * 2)))


class TimeAxis:
    """x positions for timestamps: dates when they span two minutes or more, else seconds (or
    milliseconds) after the first one, so that a burst of rollouts gets readable ticks."""

    def __init__(self, times: Sequence[datetime]) -> None:
        self.first = min(times)
        self.span_s = (max(times) - self.first).total_seconds()
        self.mode = "dates" if self.span_s >= 120 else ("s" if self.span_s >= 2 else "ms")
        self.per_second = {"dates": 1 / 86400, "s": 1.0, "ms": 1000.0}[self.mode]

    def x(self, when: datetime) -> float:
        if self.mode == "dates":
            from matplotlib import dates as mdates

            return float(mdates.date2num(when))
        return (when - self.first).total_seconds() * self.per_second

    @property
    def label(self) -> str:
        if self.mode == "dates":
            return "start time (UTC)"
        unit = "seconds" if self.mode == "s" else "milliseconds"
        return f"{unit} after the first start ({self.first:%Y-%m-%d %H:%M:%S} UTC)"

    def apply(self, ax: Any) -> None:
        if self.mode == "dates":
            from matplotlib import dates as mdates

            locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
