// The span tree of one rollout: spans nested by parent_span_id, each with a timing bar placed by
// offset_ms / duration_ms (CSSOM left / width), and the attributes of the clicked span.

import { fmtMs, h, jsonText, pre, replace } from "../dom.js";

/** Spans in tree order with their depth: [{span, depth}] (orphans and cycles become roots). */
export function treeOrder(spans) {
  const byId = new Map(spans.map((s) => [s.span_id, s]));
  const children = new Map();
  const roots = [];
  for (const span of spans) {
    const parent = span.parent_span_id;
    if (parent && byId.has(parent) && parent !== span.span_id) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(span);
    } else {
      roots.push(span);
    }
  }
  const out = [];
  const seen = new Set();
  const walk = (span, depth) => {
    if (seen.has(span.span_id)) return;
    seen.add(span.span_id);
    out.push({ span, depth });
    for (const child of children.get(span.span_id) || []) walk(child, depth + 1);
  };
  for (const root of roots) walk(root, 0);
  for (const span of spans) if (!seen.has(span.span_id)) walk(span, 0); // parent cycles
  return out;
}

const KIND_CLASS = new Set(["llm", "tool", "agent", "rollout", "event", "reward", "exception", "step"]);

function kindBadge(span) {
  const kind = span.span_kind || span.operation || "";
  const cls = KIND_CLASS.has(kind) ? `k-${kind}` : null;
  return kind ? h("span", { class: ["kind", cls] }, kind) : null;
}

/**
 * The tree with its attributes panel. selectedSpanId() / onSelect(spanId) let the rollout view
 * keep the clicked span across live refreshes.
 */
export function spanTree(spans, { selectedSpanId, onSelect }) {
  const ordered = treeOrder(spans || []);
  const end = ordered.reduce((most, { span }) => Math.max(most, (span.offset_ms || 0) + (span.duration_ms || 0)), 1e-9);
  const details = h("div", { class: "span-details", "aria-live": "polite" });
  const list = h("ol", { class: "span-tree", "aria-label": "Spans" });

  const show = (span) => {
    for (const button of list.querySelectorAll("button.span-row")) {
      const on = button.dataset.spanId === span.span_id;
      button.classList.toggle("selected", on);
      button.setAttribute("aria-pressed", on ? "true" : "false");
    }
    replace(details, spanDetails(span));
  };

  for (const { span, depth } of ordered) {
    const bar = h("span", { class: ["bar", span.status_code === "ERROR" ? "failed" : null] });
    const left = Math.max(0, Math.min(100, ((span.offset_ms || 0) / end) * 100));
    bar.style.left = `${left}%`;
    bar.style.width = `${Math.max(0.4, Math.min(100 - left, ((span.duration_ms || 0) / end) * 100))}%`;
    const name = h("span", { class: "span-name" }, kindBadge(span), " ", span.name ?? "(unnamed)");
    name.style.paddingLeft = `${Math.min(depth, 12) * 14}px`;
    const button = h(
      "button",
      {
        type: "button",
        class: ["span-row", span.status_code === "ERROR" ? "failed" : null],
        dataset: { spanId: span.span_id },
        "aria-pressed": "false",
        onclick: () => {
          show(span);
          if (onSelect) onSelect(span.span_id);
        },
      },
      name,
      h("span", { class: "track" }, bar),
      h("span", { class: "time" }, fmtMs(span.duration_ms)),
    );
    list.append(h("li", {}, button));
  }
  const el = h(
    "div",
    { class: "trace" },
    h("div", { class: "trace-head muted" }, h("span", {}, "span"), h("span", {}, `timeline (0 – ${fmtMs(end)})`), h("span", {}, "duration")),
    list,
    details,
  );
  const chosen = ordered.find(({ span }) => span.span_id === (selectedSpanId && selectedSpanId()));
  if (chosen) show(chosen.span);
  else replace(details, h("p", { class: "muted" }, "Click a span to see its attributes."));
  return el;
}

function spanDetails(span) {
  const facts = [
    ["name", span.name],
    ["span id", span.span_id],
    ["parent", span.parent_span_id ?? "—"],
    ["kind", [span.span_kind, span.operation, span.kind].filter(Boolean).join(" · ")],
    ["start", `+${fmtMs(span.offset_ms)}`],
    ["duration", fmtMs(span.duration_ms)],
    ["status", [span.status_code, span.status_message].filter(Boolean).join(": ")],
  ];
  const attributes = span.attributes && typeof span.attributes === "object" ? Object.entries(span.attributes) : [];
  return h(
    "div",
    {},
    h("h3", {}, "Span ", h("code", {}, span.name ?? "")),
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "")])),
    h("h4", {}, "Attributes"),
    attributes.length
      ? h(
          "table",
          { class: "data compact attrs" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "key"), h("th", { scope: "col" }, "value"))),
          h(
            "tbody",
            {},
            attributes.map(([key, value]) => h("tr", {}, h("td", {}, h("code", {}, key)), h("td", {}, valueCell(value)))),
          ),
        )
      : h("p", { class: "muted" }, attributes.length === 0 && span.attributes ? jsonText(span.attributes) : "none"),
    Array.isArray(span.events) && span.events.length ? [h("h4", {}, "Events"), pre(span.events)] : null,
  );
}

function valueCell(value) {
  const text = jsonText(value);
  if (text.length > 200 || text.includes("\n")) return pre(value);
  return text;
}
