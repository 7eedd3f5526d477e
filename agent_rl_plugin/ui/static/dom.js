// DOM building and value formatting. Every value from the API is untrusted: it only ever becomes
// text (textContent / text nodes) or a validated attribute, never HTML.

const SAFE_HREF = /^#\//; // only in-app hash links are generated from data

/** h("a", {href: "#/x", class: "c", onclick: fn}, "text", child, [more]) -> Element */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = Array.isArray(value) ? value.filter(Boolean).join(" ") : value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "href") {
      el.setAttribute("href", SAFE_HREF.test(String(value)) ? String(value) : "#/");
    } else if (key === "style") {
      throw new Error("use CSSOM properties, not style strings");
    } else if (key in el && typeof value !== "string") {
      el[key] = value; // properties such as value, checked, disabled, tabIndex
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  return append(el, children);
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// -- formatting -------------------------------------------------------------------------------

export function fmtNum(value, digits = 3) {
  if (value === null || value === undefined || value === "") return "";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return String(value);
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  const abs = Math.abs(value);
  if (abs >= 1e6 || abs < 1e-3) return value.toPrecision(digits);
  if (abs >= 1000) return Math.round(value).toLocaleString("en-US");
  return String(Number(value.toPrecision(digits)));
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms >= 1000) return `${fmtNum(ms / 1000)} s`;
  return `${fmtNum(ms)} ms`;
}

export function fmtTime(iso) {
  if (!iso) return "";
  return String(iso).replace("T", " ").slice(0, 19);
}

/** Any parsed JSON value as readable text (strings as they are). */
export function jsonText(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch (_) {
    return String(value);
  }
}

export const MAX_TEXT = 20000;

/** A <pre> with untrusted text, cut to MAX_TEXT characters (and saying so). */
export function pre(value, cls = "text") {
  const text = jsonText(value);
  if (text.length <= MAX_TEXT) return h("pre", { class: cls }, text);
  return h(
    "pre",
    { class: cls },
    text.slice(0, MAX_TEXT),
    h("span", { class: "more" }, `\n… ${(text.length - MAX_TEXT).toLocaleString("en-US")} more characters`),
  );
}

export function shortId(id) {
  const text = String(id ?? "");
  return text.length > 14 ? `${text.slice(0, 12)}…` : text;
}

export function statusBadge(status) {
  const cls = status === "ok" ? "ok" : status === "error" ? "err" : "";
  return h("span", { class: ["badge", cls] }, status ?? "");
}

/** The label chip of a rollout / group row: good, bad, score n, or nothing. */
export function labelChip(label, score) {
  if (!label && (score === null || score === undefined)) return h("span", { class: "muted" }, "–");
  if (label === "good") return h("span", { class: "chip good", title: "labelled good" }, "✓ good");
  if (label === "bad") return h("span", { class: "chip bad", title: "labelled bad" }, "✗ bad");
  if (score !== null && score !== undefined) return h("span", { class: "chip" }, `score ${score}`);
  return h("span", { class: "chip" }, String(label));
}

export function section(title, ...children) {
  return h("section", { class: "panel" }, h("h2", {}, title), ...children);
}

export function tableWrap(table) {
  return h("div", { class: "table-wrap" }, table);
}

/** A simple data table: columns = [{title, num?, cell: row => node|text}] */
export function dataTable(columns, rows, attrs = {}) {
  return h(
    "table",
    { class: ["data", attrs.class] },
    attrs.caption ? h("caption", {}, attrs.caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.title)))),
    h(
      "tbody",
      {},
      rows.map((row) =>
        h(
          "tr",
          {},
          columns.map((c) => h("td", { class: c.num ? "num" : null }, c.cell(row))),
        ),
      ),
    ),
  );
}

export function errorBox(error) {
  if (!error) return h("div", { class: "error-box", role: "alert", hidden: true });
  return h(
    "div",
    { class: "error-box", role: "alert" },
    h("strong", {}, error.message || String(error)),
    error.hint ? h("div", { class: "hint" }, "Hint: ", error.hint) : null,
  );
}

export function emptyNotice(text) {
  return h("p", { class: "notice empty" }, text);
}

/** `fn` that never runs twice at once: a call while it runs makes it run once more afterwards,
 * with the arguments of the latest call (live refreshes and label writes both ask for fresh
 * data; one request at a time is enough). */
export function coalesce(fn) {
  let running = null;
  let again = false;
  let args = [];
  const run = async (...latest) => {
    args = latest;
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await fn(...args);
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
  return run;
}
