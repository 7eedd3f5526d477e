// One group side by side: what GRPO compares. A row per rollout (best first) with each reward,
// the total, the advantage per run and the label; keyboard labelling as in the list.

import { api } from "../api.js";
import { coalesce, errorBox, fmtMs, fmtNum, h, labelChip, replace, shortId, statusBadge } from "../dom.js";
import { labelBar } from "../labelling.js";
import { go, listHash, rolloutHash } from "../router.js";

export function groupView(route) {
  const id = route.id;
  let data = null;
  let selectedId = null;

  const head = h("div", { class: "group-head" });
  const table = h("table", { class: "data group", id: "group-table" });
  const bar = labelBar({
    getTarget: () => (selectedId ? { rollout_id: selectedId, step_index: null } : null),
    onLabelled: (label, target) => {
      const row = data && data.rollouts.find((r) => r.rollout_id === target.rollout_id);
      if (row && label.label !== "note") {
        row.label = label.label;
        row.label_score = label.score;
        render();
      }
    },
    onStart: (target, fields) => {
      if (!fields.note && target.rollout_id === selectedId) move(1);
    },
  });
  const el = h(
    "div",
    { class: "view view-group" },
    h("nav", { class: "neighbours", "aria-label": "Back" }, h("a", { href: listHash(), class: "back" }, "← list")),
    h("h1", {}, "Group ", h("code", {}, id)),
    head,
    bar.el,
    h("div", { class: "table-wrap" }, table),
  );

  function rows() {
    return (data && data.rollouts) || [];
  }

  function select(rolloutId) {
    selectedId = rolloutId;
    for (const tr of table.tBodies[0]?.rows || []) {
      const on = tr.dataset.rolloutId === rolloutId;
      tr.classList.toggle("selected", on);
      tr.setAttribute("aria-selected", on ? "true" : "false");
      if (on) tr.scrollIntoView({ block: "nearest" });
    }
    bar.update();
  }

  function move(step) {
    const list = rows();
    if (!list.length) return;
    const at = list.findIndex((r) => r.rollout_id === selectedId);
    select(list[Math.min(list.length - 1, Math.max(0, at + step))].rollout_id);
  }

  function render() {
    const names = data.reward_names || [];
    const runs = data.advantage_runs || [];
    replace(
      head,
      h(
        "p",
        { class: "muted" },
        `Task ${data.task_id ?? "?"} · ${rows().length} rollouts · mean reward ${fmtNum(data.mean_reward)} · std ${fmtNum(data.std_reward)} · best first`,
      ),
      runs.length
        ? h(
            "p",
            { class: "muted" },
            "Advantage runs: ",
            runs.map((r, i) => [i ? ", " : "", h("span", { class: "badge" }, r.method ?? "?"), " ", h("code", {}, shortId(r.run_id))]),
          )
        : null,
    );
    if (!selectedId && rows().length) selectedId = rows()[0].rollout_id;
    replace(
      table,
      h("caption", { class: "sr-only" }, "Rollouts of the group, best first"),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "col" }, "Rollout"),
          h("th", { scope: "col" }, "Status"),
          names.map((n) => h("th", { scope: "col", class: "num" }, n)),
          h("th", { scope: "col", class: "num" }, "Total"),
          runs.map((r) => h("th", { scope: "col", class: "num", title: r.run_id }, `adv. ${r.method ?? ""} ${String(r.run_id ?? "").slice(0, 6)}`)),
          h("th", { scope: "col", class: "num" }, "Steps"),
          h("th", { scope: "col", class: "num" }, "Duration"),
          h("th", { scope: "col" }, "Label"),
          h("th", { scope: "col" }, "Output"),
        ),
      ),
      h(
        "tbody",
        {},
        rows().map((row) =>
          h(
            "tr",
            {
              dataset: { rolloutId: row.rollout_id },
              class: row.rollout_id === selectedId ? "selected" : null,
              "aria-selected": row.rollout_id === selectedId ? "true" : "false",
              onclick: (event) => {
                if (!event.target.closest("a, button")) select(row.rollout_id);
              },
            },
            h("td", {}, h("a", { href: rolloutHash(row.rollout_id), title: row.rollout_id }, shortId(row.rollout_id))),
            h("td", {}, statusBadge(row.status)),
            names.map((n) => h("td", { class: "num" }, fmtNum((row.rewards || {})[n]))),
            h("td", { class: "num" }, h("strong", {}, fmtNum(row.total_reward))),
            runs.map((r) => h("td", { class: "num" }, advantageCell((row.advantages || {})[r.run_id]))),
            h("td", { class: "num" }, fmtNum(row.n_steps)),
            h("td", { class: "num" }, fmtMs(row.duration_ms)),
            h("td", {}, labelChip(row.label, row.label_score)),
            h("td", { class: "preview" }, row.output_preview ?? ""),
          ),
        ),
      ),
    );
    bar.update();
  }

  const refresh = coalesce(async () => {
    try {
      data = await api.group(id);
    } catch (error) {
      replace(head, errorBox(error));
      replace(table);
      data = null;
      return;
    }
    if (selectedId && !rows().some((r) => r.rollout_id === selectedId)) selectedId = null;
    render();
  });

  return {
    el,
    title: `Group ${id}`,
    load: refresh,
    refresh,
    key(name) {
      if (name === "j" || name === "ArrowDown") move(1);
      else if (name === "k" || name === "ArrowUp") move(-1);
      else if (name === "Enter") {
        if (selectedId) go(rolloutHash(selectedId));
      } else if (name === "Escape") go(listHash());
      else return bar.key(name);
      return true;
    },
  };
}

function advantageCell(value) {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "—");
  return h("span", { class: value > 0 ? "pos" : value < 0 ? "neg" : null }, fmtNum(value));
}
