// Training: the runs (method, model, status, rows, final metrics), the learning-loop rounds, and
// one run's metric curves (loss first) and config.

import { api } from "../api.js";
import { lineChart } from "../chart.js";
import { dataTable, errorBox, fmtNum, fmtTime, h, pre, replace, section, statusBadge, tableWrap } from "../dom.js";
import { hashFor, trainingHash } from "../router.js";

const HEADLINE = ["loss", "train_loss", "policy_loss", "reward", "kl"];

function finalMetrics(metrics) {
  if (!metrics || typeof metrics !== "object") return "";
  const entries = Object.entries(metrics).filter(([, v]) => typeof v === "number");
  entries.sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
  const shown = entries.slice(0, 4).map(([k, v]) => `${k} ${fmtNum(v)}`);
  return shown.join(" · ") + (entries.length > 4 ? ` (+${entries.length - 4})` : "");
}

function rank(name) {
  const at = HEADLINE.indexOf(name);
  return at < 0 ? HEADLINE.length : at;
}

export function trainingView(route) {
  const body = h("div", { class: "training-body" });
  const el = h("div", { class: "view view-training" }, body);

  async function loadList() {
    let data;
    try {
      data = await api.training();
    } catch (error) {
      replace(body, h("h1", {}, "Training"), errorBox(error));
      return;
    }
    const runs = data.runs || [];
    const rounds = data.loop_rounds || [];
    replace(
      body,
      h("h1", {}, "Training runs"),
      runs.length
        ? tableWrap(
            dataTable(
              [
                { title: "Run", cell: (r) => h("a", { href: trainingHash(r.run_id), title: r.run_id }, r.run_id) },
                { title: "Method", cell: (r) => r.method ?? "" },
                { title: "Model", cell: (r) => r.model ?? "" },
                { title: "Status", cell: (r) => statusBadge(r.status) },
                { title: "Started", cell: (r) => fmtTime(r.started_at) },
                { title: "Finished", cell: (r) => fmtTime(r.finished_at) },
                { title: "Rows", num: true, cell: (r) => fmtNum(r.n_rows) },
                { title: "Final metrics", cell: (r) => finalMetrics(r.final_metrics) },
                { title: "Error", cell: (r) => (r.error ? h("span", { class: "err-text" }, r.error) : "") },
              ],
              runs,
              { class: "runs" },
            ),
          )
        : h("p", { class: "notice empty" }, "No training runs yet: `agent-rl train` records them here."),
      rounds.length
        ? section(
            "Learning-loop rounds",
            h("div", { class: "charts" }, loopCharts(rounds)),
            tableWrap(
              dataTable(
                [
                  { title: "Loop", cell: (r) => h("code", {}, r.loop_id ?? "") },
                  { title: "Round", num: true, cell: (r) => fmtNum(r.round) },
                  { title: "Status", cell: (r) => statusBadge(r.status) },
                  { title: "Method", cell: (r) => r.method ?? "" },
                  { title: "Train success", num: true, cell: (r) => fmtNum(r.train_success) },
                  { title: "Held-out success", num: true, cell: (r) => fmtNum(r.heldout_success) },
                  {
                    title: "Training run",
                    cell: (r) => (r.training_run_id ? h("a", { href: trainingHash(r.training_run_id) }, r.training_run_id) : ""),
                  },
                  { title: "When", cell: (r) => fmtTime(r.created_at) },
                ],
                rounds,
              ),
            ),
          )
        : null,
    );
  }

  // One chart per loop: train and held-out success by round (is the agent getting better?).
  function loopCharts(rounds) {
    const loops = new Map();
    for (const r of rounds) {
      if (!loops.has(r.loop_id)) loops.set(r.loop_id, []);
      loops.get(r.loop_id).push(r);
    }
    return [...loops.entries()].map(([loopId, rows]) =>
      h(
        "figure",
        { class: "metric-chart loop-chart", dataset: { loop: String(loopId ?? "") } },
        lineChart(
          [
            { name: "train success", points: rows.map((r) => [r.round, r.train_success]) },
            { name: "held-out success", points: rows.map((r) => [r.round, r.heldout_success]) },
          ],
          { xLabel: "round", yLabel: "success", title: `success by round, loop ${loopId}`, integerX: true },
        ),
        h(
          "figcaption",
          {},
          h("code", {}, String(loopId ?? "")),
          h("span", { class: "muted" }, ` · ${rows.length} rounds · `),
          h("span", { class: "legend c0" }, "train"),
          " ",
          h("span", { class: "legend c1" }, "held-out"),
        ),
      ),
    );
  }

  async function loadRun(id) {
    let data;
    try {
      data = await api.trainingRun(id);
    } catch (error) {
      replace(body, backLink(), h("h1", {}, "Training run ", h("code", {}, id)), errorBox(error));
      return;
    }
    const run = data.run || {};
    const names = Object.keys(data.series || {}).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    const facts = [
      ["Method", run.method],
      ["Model", run.model],
      ["Status", statusBadge(run.status)],
      ["Started", fmtTime(run.started_at)],
      ["Finished", fmtTime(run.finished_at)],
      ["Rows", fmtNum(run.n_rows)],
      ["Final metrics", finalMetrics(run.final_metrics)],
    ];
    replace(
      body,
      backLink(),
      h("h1", {}, "Training run ", h("code", {}, run.run_id ?? id)),
      h("dl", { class: "facts grid" }, facts.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v ?? "")))),
      run.error ? h("div", { class: "io error" }, pre(run.error)) : null,
      section(
        "Metrics",
        names.length
          ? h(
              "div",
              { class: "charts" },
              names.map((name) =>
                h(
                  "figure",
                  { class: "metric-chart", dataset: { metric: name } },
                  lineChart([{ name, points: data.series[name] || [] }], { xLabel: "step", yLabel: name, title: `${name} by step`, integerX: true }),
                  h("figcaption", {}, name, h("span", { class: "muted" }, ` · ${(data.series[name] || []).length} points`)),
                ),
              ),
            )
          : h("p", { class: "muted" }, "No metrics were logged for this run."),
      ),
      section("Config", pre(run.config)),
      run.dataset_sql ? section("Dataset SQL", pre(run.dataset_sql), h("a", { href: hashFor("rollouts", null, { run: run.run_id }) }, "The rollouts it selected →")) : null,
    );
  }

  const load = () => (route.id ? loadRun(route.id) : loadList());
  return { el, title: route.id ? `Training run ${route.id}` : "Training", load, refresh: load, key: () => false };
}

function backLink() {
  return h("nav", { class: "neighbours", "aria-label": "Back" }, h("a", { href: "#/training", class: "back" }, "← all training runs"));
}
