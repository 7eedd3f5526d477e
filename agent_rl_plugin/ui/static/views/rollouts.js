// The rollouts list: filters (kept in the URL hash), sortable columns, paging, a labelling queue,
// and keyboard labelling (j/k select, Enter opens, u/d/1-5 label and move on to the next row).

import { api } from "../api.js";
import { coalesce, errorBox, fmtMs, fmtNum, fmtTime, h, labelChip, replace, shortId, statusBadge } from "../dom.js";
import { labelBar } from "../labelling.js";
import { go, groupHash, hashFor, rememberListHash, rolloutHash } from "../router.js";
import { toast } from "../shell.js";

const FILTERS = ["task", "group", "agent", "status", "run", "min_reward", "max_reward", "q", "where", "queue"];
const PAGING = ["sort", "order", "limit", "offset"];

const COLUMNS = [
  { title: "Rollout", cell: (r) => rolloutCell(r) },
  { title: "Label", cls: "label-cell", cell: (r) => labelCell(r) },
  { title: "Reward", sort: "total_reward", num: true, cls: "reward", cell: (r) => fmtNum(r.total_reward) },
  { title: "Status", sort: "status", cell: (r) => statusBadge(r.status) },
  { title: "Task", sort: "task_id", cls: "narrow", cell: (r) => r.task_id ?? "" },
  { title: "Group", cls: "narrow", cell: (r) => (r.group_id ? h("a", { href: groupHash(r.group_id) }, r.group_id) : "") },
  { title: "Agent", cell: (r) => r.agent_name ?? "" },
  { title: "Spans", sort: "n_spans", num: true, cell: (r) => fmtNum(r.n_spans) },
  { title: "LLM", sort: "n_llm_calls", num: true, cell: (r) => fmtNum(r.n_llm_calls) },
  { title: "Tools", sort: "n_tool_calls", num: true, cell: (r) => toolsCell(r) },
  { title: "Tokens", num: true, cell: (r) => `${fmtNum(r.input_tokens)}/${fmtNum(r.output_tokens)}` },
  { title: "Duration", sort: "duration_ms", num: true, cell: (r) => fmtMs(r.duration_ms) },
  { title: "Started", sort: "start_time", cell: (r) => h("time", { title: fmtTime(r.start_time) }, fmtTime(r.start_time).slice(5)) },
];

function rolloutCell(row) {
  return h(
    "div",
    { class: "rollout-cell" },
    h("a", { href: rolloutHash(row.rollout_id), title: row.rollout_id, class: "rid" }, shortId(row.rollout_id)),
    row.name ? h("div", { class: "sub" }, row.name) : null,
    row.output_preview ? h("div", { class: "sub preview" }, row.output_preview) : null,
  );
}

function toolsCell(row) {
  if (!row.n_tool_errors) return fmtNum(row.n_tool_calls);
  return h("span", {}, fmtNum(row.n_tool_calls), " ", h("span", { class: "err-text" }, `(${row.n_tool_errors} failed)`));
}

function labelCell(row) {
  const chip = labelChip(row.label, row.label_score);
  if (!row.n_labels || row.n_labels < 2) return chip;
  return h("span", {}, chip, h("span", { class: "muted" }, ` ×${row.n_labels}`));
}

export function rolloutsView(route) {
  let params = pick(route.params);
  let rows = [];
  let total = 0;
  let selectedId = null;
  let selectedIndex = 0;
  let facets = null;

  const controls = {
    task: h("select", { id: "f-task" }),
    group: h("select", { id: "f-group" }),
    agent: h("select", { id: "f-agent" }),
    status: h("select", { id: "f-status" }),
    run: h("select", { id: "f-run" }),
    queue: h(
      "select",
      { id: "f-queue" },
      h("option", { value: "" }, "all rollouts"),
      h("option", { value: "unlabelled" }, "unlabelled"),
      h("option", { value: "disagreeing" }, "disagreeing"),
    ),
    min_reward: h("input", { id: "f-min", type: "number", step: "any", class: "short" }),
    max_reward: h("input", { id: "f-max", type: "number", step: "any", class: "short" }),
    q: h("input", { id: "f-q", type: "search", placeholder: "text in ids, names, input, output, errors" }),
    where: h("input", {
      id: "f-where",
      type: "text",
      class: "sql",
      spellcheck: false,
      placeholder: "SQL condition, e.g. total_reward > 0.5 and n_tool_errors = 0",
    }),
  };
  const whereError = h("div", { class: "where-error" });
  const summary = h("p", { class: "summary muted", "aria-live": "polite" });
  const table = h("table", { class: "data rollouts", id: "rollouts-table" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const bar = labelBar({
    getTarget: () => (selectedId ? { rollout_id: selectedId, step_index: null } : null),
    onLabelled: labelled,
    onStart: (target, fields) => {
      if (!fields.note && target.rollout_id === selectedId) move(1);
    },
  });

  const field = (label, control) => h("label", { class: "field" }, h("span", {}, label), control);
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter rollouts", onsubmit: (e) => e.preventDefault() },
    field("Task", controls.task),
    field("Group", controls.group),
    field("Agent", controls.agent),
    field("Status", controls.status),
    field("Training run", controls.run),
    field("Queue", controls.queue),
    field("Min reward", controls.min_reward),
    field("Max reward", controls.max_reward),
    h("label", { class: "field grow" }, h("span", {}, "Search"), controls.q),
    h(
      "div",
      { class: "field where" },
      h("label", { for: "f-where" }, "SQL where"),
      h(
        "div",
        { class: "where-row" },
        controls.where,
        h("button", { type: "button", onclick: () => applyFilters() }, "Apply"),
        h("button", { type: "button", class: "secondary", onclick: clearFilters }, "Clear all"),
      ),
      whereError,
    ),
  );
  for (const name of ["task", "group", "agent", "status", "run", "queue", "min_reward", "max_reward"]) {
    controls[name].addEventListener("change", () => applyFilters());
  }
  let typing = null;
  controls.q.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => applyFilters(), 400);
  });
  for (const name of ["q", "where"]) {
    controls[name].addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        applyFilters();
      }
    });
  }

  const el = h(
    "div",
    { class: "view view-rollouts" },
    h("h1", {}, "Rollouts"),
    form,
    bar.el,
    summary,
    h("div", { class: "table-wrap" }, table),
    pager,
  );

  function pick(source) {
    const out = {};
    for (const key of [...FILTERS, ...PAGING]) if (source[key] !== undefined && source[key] !== "") out[key] = source[key];
    return out;
  }

  function applyFilters() {
    const next = { ...pick(params) };
    for (const name of FILTERS) {
      const value = controls[name].value.trim();
      if (value) next[name] = value;
      else delete next[name];
    }
    delete next.offset; // a new filter starts at the first page
    go(hashFor("rollouts", null, next));
  }

  function clearFilters() {
    go(hashFor("rollouts", null, { sort: params.sort, order: params.order, limit: params.limit }));
  }

  function setControls() {
    for (const name of FILTERS) {
      const control = controls[name];
      if (document.activeElement === control && name !== "queue") continue; // do not disturb typing
      control.value = params[name] ?? "";
    }
  }

  function fillSelect(select, values, allText, describe = (v) => [v, v]) {
    const current = params[select.id.slice(2)] ?? "";
    const options = [h("option", { value: "" }, allText)];
    const seen = new Set([""]);
    for (const value of values) {
      const [key, text] = describe(value);
      if (seen.has(key)) continue;
      seen.add(key);
      options.push(h("option", { value: key }, text));
    }
    if (!seen.has(current)) options.push(h("option", { value: current }, current));
    replace(select, options);
    select.value = current;
  }

  function renderFacets() {
    if (!facets) return;
    fillSelect(controls.task, facets.tasks || [], "all tasks");
    fillSelect(controls.group, facets.groups || [], "all groups");
    fillSelect(controls.agent, facets.agents || [], "all agents");
    fillSelect(controls.status, facets.statuses || [], "any status");
    fillSelect(controls.run, facets.training_runs || [], "any run", (r) => [
      r.run_id,
      `${r.method ?? ""} ${shortId(r.run_id)} ${r.started_at ? fmtTime(r.started_at) : ""}`.trim(),
    ]);
    controls.run.id = "f-run";
  }

  function renderHead() {
    const sort = params.sort || "start_time";
    const order = params.order || "desc";
    const head = h(
      "tr",
      {},
      COLUMNS.map((column) => {
        if (!column.sort) return h("th", { scope: "col", class: column.num ? "num" : null }, column.title);
        const active = column.sort === sort;
        const nextOrder = active && order === "desc" ? "asc" : "desc";
        return h(
          "th",
          {
            scope: "col",
            class: column.num ? "num" : null,
            "aria-sort": active ? (order === "asc" ? "ascending" : "descending") : "none",
          },
          h(
            "button",
            {
              type: "button",
              class: "sort",
              dataset: { sort: column.sort },
              onclick: () => go(hashFor("rollouts", null, { ...params, sort: column.sort, order: nextOrder, offset: null })),
            },
            column.title,
            active ? (order === "asc" ? " ▲" : " ▼") : "",
          ),
        );
      }),
    );
    return h("thead", {}, head);
  }

  function renderRows() {
    if (selectedId && !rows.some((r) => r.rollout_id === selectedId)) {
      selectedId = rows.length ? rows[Math.min(selectedIndex, rows.length - 1)].rollout_id : null;
    }
    if (!selectedId && rows.length) selectedId = rows[0].rollout_id;
    const body = h(
      "tbody",
      {},
      rows.map((row) =>
        h(
          "tr",
          {
            dataset: { rolloutId: row.rollout_id },
            "aria-selected": row.rollout_id === selectedId ? "true" : "false",
            class: row.rollout_id === selectedId ? "selected" : null,
            onclick: (event) => {
              if (!event.target.closest("a, button")) select(row.rollout_id, false);
            },
            ondblclick: () => go(rolloutHash(row.rollout_id)),
          },
          COLUMNS.map((column) => h("td", { class: [column.num ? "num" : null, column.cls] }, column.cell(row))),
        ),
      ),
    );
    replace(table, h("caption", { class: "sr-only" }, "Rollouts (j / k select, Enter opens)"), renderHead(), body);
    if (!rows.length) {
      body.append(h("tr", {}, h("td", { colSpan: COLUMNS.length, class: "empty" }, "No rollout matches.")));
    }
    selectedIndex = Math.max(0, rows.findIndex((r) => r.rollout_id === selectedId));
    bar.update();
  }

  function renderPager() {
    const limit = Number(params.limit || 100);
    const offset = Number(params.offset || 0);
    const last = Math.min(total, offset + rows.length);
    replace(summary, total ? `${(offset + 1).toLocaleString("en-US")}–${last.toLocaleString("en-US")} of ${total.toLocaleString("en-US")} rollouts` : "No rollouts.");
    const page = (o) => go(hashFor("rollouts", null, { ...params, offset: o || null }));
    const size = h(
      "select",
      { "aria-label": "Rows per page" },
      [25, 50, 100, 200, 500].map((n) => h("option", { value: String(n) }, `${n} per page`)),
    );
    size.value = String(limit);
    size.addEventListener("change", () => go(hashFor("rollouts", null, { ...params, limit: size.value, offset: null })));
    replace(
      pager,
      h("button", { type: "button", disabled: offset <= 0, onclick: () => page(Math.max(0, offset - limit)) }, "← Previous"),
      h("button", { type: "button", disabled: offset + limit >= total, onclick: () => page(offset + limit) }, "Next →"),
      size,
    );
  }

  function select(id, scroll = true) {
    selectedId = id;
    selectedIndex = Math.max(0, rows.findIndex((r) => r.rollout_id === id));
    for (const tr of table.tBodies[0]?.rows || []) {
      const on = tr.dataset.rolloutId === id;
      tr.classList.toggle("selected", on);
      tr.setAttribute("aria-selected", on ? "true" : "false");
      if (on && scroll) tr.scrollIntoView({ block: "nearest" });
    }
    bar.update();
  }

  function move(step) {
    if (!rows.length) return;
    const index = Math.min(rows.length - 1, Math.max(0, selectedIndex + step));
    select(rows[index].rollout_id);
  }

  function labelled(label, target) {
    const row = rows.find((r) => r.rollout_id === target.rollout_id);
    if (row && label.step_index == null && label.label !== "note") {
      row.label = label.label;
      row.label_value = label.value;
      row.label_score = label.score;
      row.labeller = label.labeller;
      row.n_labels = (row.n_labels || 0) + 1;
      const tr = [...(table.tBodies[0]?.rows || [])].find((t) => t.dataset.rolloutId === row.rollout_id);
      if (tr) replace(tr.querySelector("td.label-cell"), labelCell(row));
    }
  }

  // Parameters the server refused (400/403: a bad where, an unknown run): a live refresh does
  // not send them again (the answer would not change); editing the filters does.
  let refused = null;

  const loadRows = coalesce(async (live = false) => {
    const key = JSON.stringify(params);
    if (live && refused === key) return;
    try {
      const answer = await api.rollouts(params);
      rows = answer.rows || [];
      total = answer.total ?? rows.length;
      refused = null;
      replace(whereError);
      controls.where.removeAttribute("aria-invalid");
    } catch (error) {
      rows = [];
      total = 0;
      refused = error.status === 400 || error.status === 403 ? key : null;
      replace(whereError, errorBox(error));
      if (params.where) controls.where.setAttribute("aria-invalid", "true");
    }
    renderRows();
    renderPager();
  });

  async function loadFacets() {
    try {
      facets = await api.facets();
      renderFacets();
    } catch (error) {
      toast(`Filters unavailable: ${error.message}`, "error");
    }
  }

  return {
    el,
    title: "Rollouts",
    async load() {
      rememberListHash(location.hash || "#/rollouts");
      setControls();
      await Promise.all([loadFacets(), loadRows()]);
      setControls();
    },
    refresh: () => Promise.all([loadFacets(), loadRows(true)]),
    async update(next) {
      params = pick(next.params);
      selectedId = null; // new filters, order or page: start at the first row
      selectedIndex = 0;
      rememberListHash(location.hash || "#/rollouts");
      setControls();
      renderFacets();
      await loadRows();
    },
    key(name) {
      if (name === "j" || name === "ArrowDown") move(1);
      else if (name === "k" || name === "ArrowUp") move(-1);
      else if (name === "Enter") {
        if (selectedId) go(rolloutHash(selectedId));
      } else if (name === "g") {
        const row = rows.find((r) => r.rollout_id === selectedId);
        if (row && row.group_id) go(groupHash(row.group_id));
      } else return bar.key(name);
      return true;
    },
  };
}
