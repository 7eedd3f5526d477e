// The SQL console: a query box (Ctrl+Enter runs), the cookbook one click away, the result as a
// table and a quick chart of the first numeric column against the first column.

import { api } from "../api.js";
import { barChart, lineChart } from "../chart.js";
import { errorBox, fmtNum, h, jsonText, replace } from "../dom.js";

const NUMERIC = /^(TINYINT|SMALLINT|INTEGER|INT|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|REAL|DOUBLE|DECIMAL.*|NUMERIC.*)$/i;
const TEMPORAL = /^(DATE|TIMESTAMP.*|TIME.*)$/i;

// Kept across visits of the view (the typed query and the last result survive navigation).
const memory = { sql: "select task_id, count(*) as rollouts, avg(total_reward) as mean_reward\nfrom rollouts\ngroup by 1\norder by 1", result: null, error: null };

export function consoleView() {
  const box = h("textarea", {
    id: "sql",
    class: "sql",
    rows: 8,
    spellcheck: "false",
    "aria-label": "SQL query (Ctrl+Enter runs it)",
  });
  box.value = memory.sql;
  box.addEventListener("input", () => {
    memory.sql = box.value;
  });
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      run();
    } else if (event.key === "Escape") {
      box.blur();
    }
  });
  const runButton = h("button", { type: "button", class: "primary", onclick: () => run() }, "Run (Ctrl+Enter)");
  const status = h("div", { class: "query-status muted", "aria-live": "polite" });
  const errors = h("div", { class: "query-error" });
  const chart = h("figure", { class: "quick-chart", hidden: true });
  const results = h("div", { class: "table-wrap results" });
  const cookbook = h("nav", { class: "cookbook", "aria-label": "Cookbook queries" }, h("p", { class: "muted" }, "Loading the cookbook…"));

  const el = h(
    "div",
    { class: "view view-console" },
    h("h1", {}, "SQL console"),
    h(
      "div",
      { class: "console-layout" },
      h(
        "div",
        { class: "console-main" },
        h("p", { class: "muted" }, "Read-only SQL over the store's views (rollouts, spans, steps, llm_calls, tool_calls, rewards, advantages, labels, training_runs, training_metrics…)."),
        box,
        h("div", { class: "toolbar" }, runButton, status),
        errors,
        chart,
        results,
      ),
      h("aside", { class: "console-side" }, h("h2", {}, "Cookbook"), cookbook),
    ),
  );

  async function run(sql = box.value) {
    if (!sql.trim()) return;
    runButton.disabled = true;
    replace(status, "Running…");
    try {
      memory.result = await api.query(sql, 1000);
      memory.error = null;
    } catch (error) {
      memory.result = null;
      memory.error = error;
    } finally {
      runButton.disabled = false;
    }
    showResult();
  }

  function showResult() {
    const { result, error } = memory;
    replace(errors, error ? errorBox(error) : null);
    if (!result) {
      replace(status, error ? "The query failed." : "");
      replace(results);
      chart.hidden = true;
      return;
    }
    const rows = result.rows || [];
    replace(
      status,
      `${rows.length.toLocaleString("en-US")} rows in ${fmtNum(result.seconds)} s`,
      result.truncated ? h("strong", { class: "truncated" }, " — truncated: only the first rows are shown") : null,
    );
    replace(results, resultTable(result));
    const figure = quickChart(result);
    chart.hidden = !figure;
    replace(chart, figure);
  }

  async function loadCookbook() {
    try {
      const { queries } = await api.cookbook();
      const sections = new Map();
      for (const q of queries || []) {
        if (!sections.has(q.section)) sections.set(q.section, []);
        sections.get(q.section).push(q);
      }
      replace(
        cookbook,
        [...sections].map(([name, items]) =>
          h(
            "div",
            { class: "cookbook-section" },
            h("h3", {}, name ?? ""),
            h(
              "ul",
              { class: "plain" },
              items.map((q) =>
                h(
                  "li",
                  {},
                  h(
                    "button",
                    {
                      type: "button",
                      class: "link",
                      title: q.sql,
                      onclick: () => {
                        box.value = q.sql;
                        memory.sql = q.sql;
                        run(q.sql);
                      },
                    },
                    q.title ?? "",
                  ),
                ),
              ),
            ),
          ),
        ),
      );
    } catch (error) {
      replace(cookbook, errorBox(error));
    }
  }

  return {
    el,
    title: "SQL console",
    async load() {
      showResult();
      await loadCookbook();
    },
    refresh: async () => {},
    key(name) {
      if (name === "/" || name === "e") {
        box.focus();
        return true;
      }
      return false;
    },
    run,
  };
}

function cellText(value) {
  if (value === null || value === undefined) return h("span", { class: "null" }, "NULL");
  if (typeof value === "number") return fmtNum(value, 6);
  const text = jsonText(value);
  return text.length > 400 ? `${text.slice(0, 400)}…` : text;
}

function resultTable(result) {
  const columns = result.columns || [];
  const types = result.types || [];
  return h(
    "table",
    { class: "data result", id: "query-result" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        columns.map((c, i) => h("th", { scope: "col", class: NUMERIC.test(types[i] || "") ? "num" : null, title: types[i] || "" }, c)),
      ),
    ),
    h(
      "tbody",
      {},
      (result.rows || []).map((row) =>
        h(
          "tr",
          {},
          row.map((value, i) => h("td", { class: NUMERIC.test(types[i] || "") ? "num" : null }, cellText(value))),
        ),
      ),
    ),
  );
}

/** The first numeric column (after the first) against the first column, or null. */
export function quickChart(result) {
  const columns = result.columns || [];
  const types = result.types || [];
  const rows = result.rows || [];
  if (columns.length < 2 || !rows.length) return null;
  const numeric = (i) => NUMERIC.test(types[i] || "") || rows.every((r) => r[i] === null || typeof r[i] === "number");
  const yIndex = columns.findIndex((_, i) => i > 0 && numeric(i) && rows.some((r) => typeof r[i] === "number"));
  if (yIndex < 0) return null;
  const caption = h("figcaption", { class: "muted" }, `${columns[yIndex]} by ${columns[0]}`);
  const ys = rows.map((r) => (typeof r[yIndex] === "number" ? r[yIndex] : NaN));
  if (TEMPORAL.test(types[0] || "")) {
    const points = rows.map((r, i) => [Date.parse(`${r[0]}${/[zZ]|[+-]\d\d:?\d\d$/.test(String(r[0])) ? "" : "Z"}`), ys[i]]);
    return h("div", {}, lineChart([{ name: columns[yIndex], points }], { xLabel: columns[0], yLabel: columns[yIndex], time: true, title: caption.textContent }), caption);
  }
  if (numeric(0)) {
    const points = rows.map((r, i) => [typeof r[0] === "number" ? r[0] : NaN, ys[i]]);
    return h("div", {}, lineChart([{ name: columns[yIndex], points }], { xLabel: columns[0], yLabel: columns[yIndex], title: caption.textContent }), caption);
  }
  const labels = rows.map((r) => (r[0] === null || r[0] === undefined ? "NULL" : jsonText(r[0])));
  return h("div", {}, barChart(labels, ys, { xLabel: columns[0], yLabel: columns[yIndex], title: caption.textContent }), caption);
}
