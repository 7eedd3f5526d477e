// Small SVG charts (no library): a line chart with numeric or time x, and a bar chart with string
// x, both with axes, tick labels and axis titles. Labels are SVG text nodes (never markup).

import { fmtNum, svg } from "./dom.js";

const COMPACT = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });

/** A tick label: short (1.2M, 0.005, 2.5). */
function tickText(value) {
  return Math.abs(value) >= 1e5 ? COMPACT.format(value) : fmtNum(value);
}

const WIDTH = 640;
const HEIGHT = 260;
const PAD = { left: 64, right: 16, top: 14, bottom: 46 };
const MAX_BARS = 60;

/** About `count` round tick values covering [lo, hi]. */
export function niceTicks(lo, hi, count = 5) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (lo === hi) {
    const pad = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1;
    lo -= pad;
    hi += pad;
  }
  const raw = (hi - lo) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) || raw;
  const first = Math.floor(lo / step + 1e-9);
  const last = Math.ceil(hi / step - 1e-9);
  const ticks = [];
  for (let i = first; i <= last; i++) ticks.push(Number((i * step).toPrecision(12)));
  return ticks;
}

function frame(title) {
  return svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "chart",
    role: "img",
    "aria-label": title,
    preserveAspectRatio: "xMidYMid meet",
  });
}

function scale(domain, range) {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  const span = d1 - d0 || 1;
  return (v) => r0 + ((v - d0) / span) * (r1 - r0);
}

function yAxis(root, ticks, y, label) {
  const x0 = PAD.left;
  root.append(svg("line", { x1: x0, x2: x0, y1: PAD.top, y2: HEIGHT - PAD.bottom, class: "axis" }));
  for (const t of ticks) {
    const py = y(t);
    root.append(svg("line", { x1: x0, x2: WIDTH - PAD.right, y1: py, y2: py, class: "grid" }));
    root.append(svg("text", { x: x0 - 6, y: py + 4, "text-anchor": "end", class: "tick" }, tickText(t)));
  }
  if (label) {
    const cy = (PAD.top + HEIGHT - PAD.bottom) / 2;
    root.append(svg("text", { x: 14, y: cy, transform: `rotate(-90 14 ${cy})`, "text-anchor": "middle", class: "axis-title" }, label));
  }
}

function xTitle(root, label) {
  if (label) root.append(svg("text", { x: (PAD.left + WIDTH - PAD.right) / 2, y: HEIGHT - 6, "text-anchor": "middle", class: "axis-title" }, label));
}

function timeText(ms, spanMs) {
  const iso = new Date(ms).toISOString();
  if (spanMs < 2 * 86400000) return iso.slice(11, 19);
  return iso.slice(0, 10);
}

/**
 * A line chart. series: [{name, points: [[x, y], ...]}] (x numbers; with time = true, epoch ms;
 * with integerX = true, x ticks on whole numbers only).
 */
export function lineChart(series, { xLabel = "", yLabel = "", time = false, title = "chart", integerX = false } = {}) {
  const root = frame(title);
  const all = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  if (!all.length) {
    root.append(svg("text", { x: WIDTH / 2, y: HEIGHT / 2, "text-anchor": "middle", class: "tick" }, "no numeric values"));
    return root;
  }
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  const xLo = Math.min(...xs);
  const xHi = Math.max(...xs);
  const yTicks = niceTicks(Math.min(...ys), Math.max(...ys));
  const y = scale([yTicks[0], yTicks[yTicks.length - 1]], [HEIGHT - PAD.bottom, PAD.top]);
  const x = scale(xLo === xHi ? [xLo - 1, xHi + 1] : [xLo, xHi], [PAD.left + 4, WIDTH - PAD.right]);
  yAxis(root, yTicks, y, yLabel);
  root.append(svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: HEIGHT - PAD.bottom, y2: HEIGHT - PAD.bottom, class: "axis" }));
  let xTicks = time ? timeTicks(xLo, xHi) : niceTicks(xLo, xHi, 6).filter((t) => t >= xLo && t <= xHi);
  if (integerX) {
    // Whole x values only (rounds, steps): every integer when there are few, else the whole nice ticks.
    xTicks = xHi - xLo <= 12 ? Array.from({ length: Math.floor(xHi) - Math.ceil(xLo) + 1 }, (_, i) => Math.ceil(xLo) + i) : xTicks.filter((t) => Number.isInteger(t));
  }
  for (const t of xTicks) {
    const px = x(t);
    root.append(svg("line", { x1: px, x2: px, y1: HEIGHT - PAD.bottom, y2: HEIGHT - PAD.bottom + 5, class: "axis" }));
    const text = time ? timeText(t, xHi - xLo) : tickText(t);
    root.append(svg("text", { x: px, y: HEIGHT - PAD.bottom + 18, "text-anchor": "middle", class: "tick" }, text));
  }
  xTitle(root, xLabel);
  series.forEach((s, index) => {
    const points = s.points.filter(([px, py]) => Number.isFinite(px) && Number.isFinite(py)).sort((a, b) => a[0] - b[0]);
    if (!points.length) return;
    const d = points.map(([px, py], i) => `${i ? "L" : "M"}${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ");
    root.append(svg("path", { d, class: `line c${index % 6}`, fill: "none" }, svg("title", {}, s.name)));
    if (points.length <= 80) {
      for (const [px, py] of points) {
        root.append(svg("circle", { cx: x(px).toFixed(1), cy: y(py).toFixed(1), r: 2.5, class: `dot c${index % 6}` }, svg("title", {}, `${fmtNum(px)}: ${fmtNum(py)}`)));
      }
    }
  });
  root.dataset.points = String(all.length);
  return root;
}

function timeTicks(lo, hi) {
  if (hi <= lo) return [lo];
  const out = [];
  for (let i = 0; i <= 4; i++) out.push(lo + ((hi - lo) * i) / 4);
  return out;
}

/** A bar chart of values per string label (the first MAX_BARS). */
export function barChart(labels, values, { xLabel = "", yLabel = "", title = "chart" } = {}) {
  const root = frame(title);
  const n = Math.min(labels.length, MAX_BARS);
  const shown = values.slice(0, n).map((v) => (Number.isFinite(v) ? v : 0));
  if (!n) return root;
  const yTicks = niceTicks(Math.min(0, ...shown), Math.max(0, ...shown));
  const y = scale([yTicks[0], yTicks[yTicks.length - 1]], [HEIGHT - PAD.bottom, PAD.top]);
  yAxis(root, yTicks, y, yLabel);
  const inner = WIDTH - PAD.left - PAD.right;
  const slot = inner / n;
  const zero = y(0);
  for (let i = 0; i < n; i++) {
    const top = Math.min(zero, y(shown[i]));
    const height = Math.max(1, Math.abs(y(shown[i]) - zero));
    const bx = PAD.left + i * slot + slot * 0.15;
    root.append(
      svg("rect", { x: bx.toFixed(1), y: top.toFixed(1), width: (slot * 0.7).toFixed(1), height: height.toFixed(1), class: "bar c0" }, svg("title", {}, `${labels[i]}: ${fmtNum(values[i])}`)),
    );
    if (n <= 24) {
      const text = String(labels[i]);
      root.append(
        svg("text", { x: (bx + slot * 0.35).toFixed(1), y: HEIGHT - PAD.bottom + 14, "text-anchor": "middle", class: "tick" }, text.length > 12 ? `${text.slice(0, 11)}…` : text),
      );
    }
  }
  root.append(svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: zero, y2: zero, class: "axis" }));
  xTitle(root, xLabel + (labels.length > n ? ` (first ${n} of ${labels.length})` : ""));
  root.dataset.points = String(n);
  return root;
}
