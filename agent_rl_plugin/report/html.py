"""HTML of the report: the page template (inline CSS and one small inline script), escaping and
tables (the step-by-step trace viewer is :mod:`agent_rl_plugin.report.traces`).

Everything that comes from the store (ids, names, messages, tool arguments and results, errors)
is untrusted: it goes through :func:`esc` (``html.escape`` with quotes) and nowhere else, and is
only ever placed in element content or double-quoted attributes. As a second line of defence the
page carries a Content-Security-Policy that allows no network access at all (``default-src
'none'``) and runs only the report's own script (by its SHA-256), so a ``<script>`` that
slipped through would not run.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

#: Longest text shown for one message, argument, result or error (the rest is cut, and says so).
MAX_TEXT = 6000
#: Input messages of an LLM call: the last ones shown (earlier ones are the previous steps), and
#: the longest text of each.
MAX_INPUT_MESSAGES = 8
MAX_INPUT_TEXT = 2000


def esc(value: Any) -> str:
    """``value`` as HTML text (``None`` is empty)."""
    if value is None:
        return ""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def anchor_id(rollout_id: str) -> str:
    """The element id of a rollout's trace (ids with other characters are hashed)."""
    text = str(rollout_id)
    if re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", text):
        return f"rollout-{text}"
    return "rollout-h" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: numbers rounded to ``digits`` significant figures, timestamps to the second."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.{digits}g}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) < 1:
            return f"{value:.{digits}g}"
        text = f"{value:.{max(0, digits - len(str(int(abs(value)))))}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def pct(value: Any) -> str:
    return "" if value is None else f"{float(value):.0%}"


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` escaped, at most ``limit`` characters (a note says how much was left out)."""
    if len(text) <= limit:
        return esc(text)
    return esc(text[:limit]) + f'<span class="more">… {len(text) - limit:,} more characters not shown</span>'


def table(
    columns: Sequence[tuple[str, str]],
    rows: Iterable[Mapping[str, Any]],
    *,
    formats: Mapping[str, Any] | None = None,
    raw: Iterable[str] = (),
    numeric: Iterable[str] = (),
    css: str = "data",
) -> str:
    """An HTML table. ``columns``: (key, header). Cells are escaped, except keys in ``raw``
    (already HTML); ``formats`` maps keys to functions producing the cell text."""
    formats = formats or {}
    raw = set(raw)
    numeric = set(numeric)
    head = "".join(f"<th{' class=num' if k in numeric else ''}>{esc(h)}</th>" for k, h in columns)
    body = []
    for row in rows:
        cells = []
        for key, _ in columns:
            value = row.get(key)
            if key in raw:
                text = "" if value is None else str(value)
            else:
                text = esc(formats[key](value) if key in formats else fmt(value))
            cells.append(f"<td{' class=num' if key in numeric else ''}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    if not body:
        return '<p class="muted">none</p>'
    return f'<div class="table-wrap"><table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def figure(plot: Any, wide: bool = False) -> str:
    """A plot as ``<figure class="plot">`` with its SVG inline and its caption."""
    caption = f"<figcaption>{esc(plot.caption)}</figcaption>" if plot.caption else ""
    return f'<figure class="plot{" wide" if wide else ""}" id="{esc(plot.id)}">{plot.svg}{caption}</figure>'


def section(section_id: str, title: str, body: str, intro: str = "") -> str:
    intro_html = f'<p class="intro">{intro}</p>' if intro else ""
    return f'<section id="{esc(section_id)}"><h2>{esc(title)}</h2>{intro_html}{body}</section>'


def notice(text: str, css: str = "notice") -> str:
    return f'<div class="{css}">{text}</div>'


def cards(items: Sequence[tuple[str, Any, str]]) -> str:
    """Summary cards: (label, value, optional detail)."""
    out = []
    for label, value, detail in items:
        detail_html = f'<div class="card-detail">{esc(detail)}</div>' if detail else ""
        out.append(
            f'<div class="card"><div class="card-value">{esc(fmt(value))}</div>'
            f'<div class="card-label">{esc(label)}</div>{detail_html}</div>'
        )
    return f'<div class="cards">{"".join(out)}</div>'


def status_badge(status: Any) -> str:
    text = str(status or "unknown")
    css = {"ok": "ok", "error": "err", "cancelled": "cancel"}.get(text, "other")
    return f'<span class="badge {css}">{esc(text)}</span>'


def rollout_link(rollout_id: str, linked: set[str]) -> str:
    """The rollout id (shortened), linked to its trace when the report has it."""
    label = esc(rollout_id[:12] + ("…" if len(rollout_id) > 12 else ""))
    title = esc(rollout_id)
    if rollout_id in linked:
        return f'<a href="#{esc(anchor_id(rollout_id))}" title="{title}"><code>{label}</code></a>'
    return f'<code title="{title}">{label}</code>'


# -- the page ---------------------------------------------------------------------------------

CSS = """
:root { --gutter:clamp(10px, 2vw, 28px); --fg:#212529; --muted:#6c757d; --line:#dee2e6; --bg:#f8f9fa; --accent:#1c7ed6; --ok:#2f9e44; --err:#e03131; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 -apple-system, "Segoe UI", "DejaVu Sans", Roboto, Helvetica, Arial, sans-serif; color:var(--fg); background:#fff; }
header { padding:18px var(--gutter) 10px; border-bottom:1px solid var(--line); background:var(--bg); }
header h1 { margin:0 0 4px; font-size:22px; }
header .meta { color:var(--muted); font-size:13px; }
header .meta code { color:var(--fg); }
nav { position:sticky; top:0; z-index:5; background:#fff; border-bottom:1px solid var(--line); padding:6px var(--gutter); font-size:13px; display:flex; flex-wrap:wrap; gap:2px 14px; }
nav a { color:var(--accent); text-decoration:none; white-space:nowrap; }
nav a:hover { text-decoration:underline; }
main { padding:8px var(--gutter) 40px; max-width:none; width:100%; }
section { margin-top:26px; }
h2 { font-size:18px; border-bottom:2px solid var(--line); padding-bottom:4px; margin:0 0 10px; }
h3 { font-size:15px; margin:18px 0 6px; }
h4 { font-size:13px; margin:12px 0 4px; color:var(--muted); text-transform:uppercase; letter-spacing:.04em; }
p.intro { color:var(--muted); margin:0 0 10px; max-width:920px; }
.muted { color:var(--muted); }
.cards { display:flex; flex-wrap:wrap; gap:10px; margin:8px 0 4px; }
.card { border:1px solid var(--line); border-radius:6px; padding:8px 14px; min-width:120px; background:#fff; }
.card-value { font-size:20px; font-weight:600; }
.card-label { color:var(--muted); font-size:12px; }
.card-detail { color:var(--muted); font-size:11px; }
.plots { display:flex; flex-wrap:wrap; gap:14px; }
figure.plot { margin:6px 0; flex:1 1 520px; min-width:0; overflow-x:auto; border:1px solid var(--line); border-radius:6px; padding:8px; background:#fff; }
figure.plot.wide { flex-basis:100%; }
figure.plot svg { display:block; margin:0 auto; width:100%; height:auto; max-width:calc(var(--natural-width, 100%) * 2); }
figure.plot.wide svg { min-width:calc(var(--natural-width, 0px) * 0.75); }
figcaption { color:var(--muted); font-size:12px; margin-top:4px; }
.table-wrap { overflow-x:auto; margin:6px 0 10px; }
table.data { border-collapse:collapse; font-size:13px; }
table.data th, table.data td { border-bottom:1px solid var(--line); padding:3px 10px 3px 0; text-align:left; vertical-align:top; }
table.data th { font-weight:600; background:#fff; position:sticky; top:0; }
table.data td.num, table.data th.num { text-align:right; font-variant-numeric:tabular-nums; }
table.data td { max-width:520px; overflow-wrap:break-word; }
table.data td.num, table.data td:has(> a), table.data td:has(> code), table.data td:has(> .badge) { white-space:nowrap; }
table.compact { font-size:12px; }
.notice { border:1px solid #a5d8ff; background:#e7f5ff; border-radius:6px; padding:12px 16px; margin:12px 0; }
.notice.empty { font-size:16px; padding:28px; text-align:center; }
.notice.warn { border-color:#ffd8a8; background:#fff4e6; }
.badge { display:inline-block; font-size:11px; padding:0 6px; border-radius:9px; background:#e9ecef; vertical-align:1px; }
.badge.ok { background:#d3f9d8; color:#2b8a3e; } .badge.err { background:#ffe3e3; color:#c92a2a; } .badge.cancel { background:#e9ecef; color:#495057; }
code { font-family:"DejaVu Sans Mono", Menlo, Consolas, monospace; font-size:12px; }
details.trace { border:1px solid var(--line); border-radius:6px; margin:6px 0; background:#fff; }
details.trace > summary { cursor:pointer; padding:6px 10px; background:var(--bg); border-radius:6px; }
details.trace[open] > summary { border-bottom:1px solid var(--line); border-radius:6px 6px 0 0; }
details.trace:target > summary { outline:2px solid var(--accent); }
.trace-body { padding:6px 14px 12px; }
dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:4px 0; font-size:13px; }
dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
ul.tree, ul.tree ul { list-style:none; margin:0; padding-left:18px; border-left:1px dotted #ced4da; }
ul.tree { padding-left:4px; border-left:none; }
li.node { margin:4px 0; }
li.node .head { font-size:13px; }
li.node.failed > .head .name { color:var(--err); }
.kind { display:inline-block; font-size:10.5px; font-weight:600; padding:0 5px; border-radius:3px; color:#fff; background:#868e96; vertical-align:1px; }
.k-llm.kind { background:#1c7ed6; } .k-tool.kind { background:#2f9e44; } .k-agent.kind { background:#7048e8; }
.k-rollout.kind { background:#c2255c; } .k-event.kind { background:#f08c00; } .k-reward.kind { background:#e8590c; } .k-exception.kind { background:#e03131; }
.time, .tokens { color:var(--muted); font-size:12px; }
.step { font-size:11px; border:1px solid var(--line); border-radius:3px; padding:0 4px; color:var(--muted); }
.chip { font-size:11px; border-radius:3px; padding:0 4px; background:#fff3bf; }
.chip.good { background:#d3f9d8; } .chip.bad { background:#ffe3e3; }
.io { margin:3px 0 3px 4px; font-size:12.5px; }
.io .label, .io > summary { color:var(--muted); font-size:11.5px; cursor:default; }
.io > summary { cursor:pointer; }
.io.error pre { background:#fff5f5; border-color:#ffc9c9; color:#c92a2a; }
pre.text { margin:2px 0; padding:5px 8px; background:var(--bg); border:1px solid var(--line); border-radius:4px; white-space:pre-wrap; overflow-wrap:anywhere; max-height:320px; overflow:auto; font:12px/1.4 "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.msg { margin:3px 0; padding-left:6px; border-left:3px solid #ced4da; }
.msg .role { font-size:11px; font-weight:600; text-transform:uppercase; color:var(--muted); }
.msg.role-user { border-left-color:#74c0fc; } .msg.role-assistant { border-left-color:#b197fc; } .msg.role-tool { border-left-color:#8ce99a; } .msg.role-system { border-left-color:#ffd43b; }
.call { font-size:12px; margin:2px 0; }
.more { color:var(--muted); font-style:italic; }
.err-text { color:var(--err); }
#report-errors { color:var(--err); white-space:pre-wrap; }
footer { color:var(--muted); font-size:12px; padding:16px var(--gutter); border-top:1px solid var(--line); }
"""

#: The page's only script: records script errors into #report-errors, marks each plot's SVG
#: ``data-rendered="1"`` once it has a nonzero box (``body[data-plots-rendered]`` counts them),
#: and opens a trace's ``<details>`` when a link points at it.
SCRIPT = """
(function () {
  var errors = [];
  function record(message) {
    errors.push(String(message));
    var box = document.getElementById('report-errors');
    if (box) { box.textContent = errors.join('\\n'); box.hidden = false; }
    if (document.body) { document.body.setAttribute('data-errors', String(errors.length)); }
  }
  window.addEventListener('error', function (e) {
    var target = e.target && e.target !== window ? (e.target.src || e.target.href || e.target.tagName) : '';
    record(e.message || ('failed to load ' + target));
  }, true);
  window.addEventListener('unhandledrejection', function (e) { record('unhandled rejection: ' + e.reason); });
  var consoleError = console.error;
  console.error = function () { record(Array.prototype.join.call(arguments, ' ')); return consoleError.apply(console, arguments); };
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id) { return; }
    var el = document.getElementById(id);
    if (el && el.tagName === 'DETAILS') { el.open = true; el.scrollIntoView(); }
  }
  function check() {
    var figures = document.querySelectorAll('figure.plot');
    var rendered = 0;
    figures.forEach(function (figure) {
      var svg = figure.querySelector('svg');
      var box = svg ? svg.getBoundingClientRect() : null;
      var ok = !!(svg && box.width > 0 && box.height > 0 && svg.querySelector('g') && svg.getBBox().width > 0);
      if (svg) { svg.setAttribute('data-rendered', ok ? '1' : '0'); }
      if (ok) { rendered += 1; }
    });
    document.body.setAttribute('data-plots', String(figures.length));
    document.body.setAttribute('data-plots-rendered', String(rendered));
    document.body.setAttribute('data-errors', String(errors.length));
    document.body.setAttribute('data-checked', '1');
    openTarget();
  }
  window.addEventListener('hashchange', openTarget);
  if (document.readyState === 'loading') { document.addEventListener('DOMContentLoaded', check); } else { check(); }
})();
"""


def script_hash(script: str = SCRIPT) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def page(title: str, meta_html: str, nav: Sequence[tuple[str, str]], body: str, footer: str) -> str:
    """The whole document."""
    csp = (
        f"default-src 'none'; script-src '{script_hash()}'; style-src 'unsafe-inline'; "
        "img-src data:; font-src data:; base-uri 'none'; form-action 'none'"
    )
    nav_html = "".join(f'<a href="#{esc(anchor)}">{esc(label)}</a>' for anchor, label in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="agent-rl report">'
        f"<title>{esc(title)}</title><style>{CSS}</style><script>{SCRIPT}</script></head>"
        f'<body><header><h1>{esc(title)}</h1><div class="meta">{meta_html}</div>'
        '<pre id="report-errors" hidden></pre></header>'
        + (f"<nav>{nav_html}</nav>" if nav else "")
        + f"<main>{body}</main><footer>{footer}</footer></body></html>\n"
    )
