// Rewards, episode reward weights, advantages (grouped by run) and labels of one rollout.

import { dataTable, fmtNum, fmtTime, h, labelChip, tableWrap } from "../dom.js";
import { trainingHash } from "../router.js";

const dash = (v) => (v === null || v === undefined ? "—" : v);

export function rewardsTable(rewards) {
  if (!rewards || !rewards.length) return h("p", { class: "muted" }, "No rewards.");
  return tableWrap(
    dataTable(
      [
        { title: "Name", cell: (r) => h("code", {}, r.name ?? "") },
        { title: "Step", num: true, cell: (r) => dash(r.step_index) },
        { title: "Value", num: true, cell: (r) => fmtNum(r.value) },
        { title: "Label", cell: (r) => r.label ?? "" },
        { title: "Plugin", cell: (r) => r.plugin ?? "" },
        { title: "Version", cell: (r) => r.plugin_version ?? "" },
        { title: "Source", cell: (r) => r.source ?? "" },
        { title: "Reason", cell: (r) => h("span", { class: "reason" }, r.reason ?? "") },
        { title: "Error", cell: (r) => (r.error ? h("span", { class: "err-text" }, r.error) : "") },
        { title: "Created", cell: (r) => fmtTime(r.created_at) },
      ],
      rewards,
      { class: "rewards" },
    ),
  );
}

export function episodeRewardsTable(rows, total) {
  if (!rows || !rows.length) return h("p", { class: "muted" }, "No episode rewards combined into total_reward.");
  return h(
    "div",
    {},
    h("p", { class: "muted" }, "total_reward = Σ weight × value = ", h("strong", {}, fmtNum(total))),
    tableWrap(
      dataTable(
        [
          { title: "Name", cell: (r) => h("code", {}, r.name ?? "") },
          { title: "Value", num: true, cell: (r) => fmtNum(r.value) },
          { title: "Weight", num: true, cell: (r) => fmtNum(r.weight) },
          { title: "Weighted", num: true, cell: (r) => fmtNum((r.value ?? 0) * (r.weight ?? 0)) },
          { title: "Source", cell: (r) => r.source ?? "" },
          { title: "Plugin", cell: (r) => r.plugin ?? "" },
        ],
        rows,
      ),
    ),
  );
}

export function advantagesTables(advantages) {
  if (!advantages || !advantages.length) return h("p", { class: "muted" }, "No advantages computed for this rollout.");
  const runs = new Map();
  for (const row of advantages) {
    const key = `${row.method ?? ""}\u0000${row.run_id ?? ""}`;
    if (!runs.has(key)) runs.set(key, []);
    runs.get(key).push(row);
  }
  return [...runs.values()].map((rows) => {
    rows.sort((a, b) => (a.step_index ?? -1) - (b.step_index ?? -1) || (a.action_index ?? -1) - (b.action_index ?? -1));
    const first = rows[0];
    return h(
      "div",
      { class: "advantage-run" },
      h("h3", {}, h("span", { class: "badge" }, first.method ?? "?"), " run ", h("code", {}, first.run_id ?? "")),
      tableWrap(
        dataTable(
          [
            { title: "Step", num: true, cell: (r) => dash(r.step_index) },
            { title: "Action", num: true, cell: (r) => dash(r.action_index) },
            { title: "Advantage", num: true, cell: (r) => fmtNum(r.value) },
            { title: "Episode adv.", num: true, cell: (r) => fmtNum(r.episode_advantage) },
            { title: "Step adv.", num: true, cell: (r) => fmtNum(r.step_advantage) },
            { title: "Reward", num: true, cell: (r) => fmtNum(r.reward) },
            { title: "Step return", num: true, cell: (r) => fmtNum(r.step_return) },
            { title: "Step group", num: true, cell: (r) => fmtNum(r.step_group_size) },
            { title: "State key", cell: (r) => (r.state_key ? h("code", {}, r.state_key) : "") },
          ],
          rows,
        ),
      ),
    );
  });
}

export function labelsTable(labels) {
  if (!labels || !labels.length) return h("p", { class: "muted" }, "No labels yet: u / d / 1-5 / n.");
  return tableWrap(
    dataTable(
      [
        { title: "Label", cell: (r) => labelChip(r.label, r.score) },
        { title: "Value", num: true, cell: (r) => fmtNum(r.value) },
        { title: "Step", num: true, cell: (r) => dash(r.step_index) },
        { title: "Labeller", cell: (r) => r.labeller ?? "" },
        { title: "Note", cell: (r) => r.note ?? "" },
        { title: "When", cell: (r) => fmtTime(r.created_at) },
      ],
      labels,
      { class: "labels" },
    ),
  );
}

export function trainingRunsList(runs) {
  if (!runs || !runs.length) return h("p", { class: "muted" }, "No training run selected this rollout.");
  return h(
    "ul",
    { class: "plain" },
    runs.map((r) =>
      h(
        "li",
        {},
        h("a", { href: trainingHash(r.run_id) }, `${r.method ?? "run"} ${r.run_id}`),
        h("span", { class: "muted" }, ` · ${r.model ?? ""} · ${r.status ?? ""} · ${fmtTime(r.started_at)}`),
      ),
    ),
  );
}
