// One rollout: facts, input and output, steps (selectable label targets), the span tree, LLM and
// tool calls, rewards, advantages, labels, the training runs that used it, previous / next.

import { api } from "../api.js";
import { coalesce, errorBox, fmtMs, fmtNum, fmtTime, h, labelChip, pre, replace, section, statusBadge } from "../dom.js";
import { labelBar } from "../labelling.js";
import { go, groupHash, listHash, rolloutHash } from "../router.js";
import { llmCalls, toolCalls } from "./calls.js";
import { advantagesTables, episodeRewardsTable, labelsTable, rewardsTable, trainingRunsList } from "./scores.js";
import { spanTree } from "./trace.js";

export function rolloutView(route) {
  const id = route.id;
  let data = null;
  let selectedStep = null; // a step_index, or null: the rollout itself is the label target
  let selectedSpan = null;

  const title = h("h1", {}, "Rollout ", h("code", { class: "rid" }, id));
  const neighbours = h("nav", { class: "neighbours", "aria-label": "Previous and next rollout" });
  const facts = h("div", { class: "facts-wrap" });
  const bar = labelBar({
    getTarget: () => (data ? { rollout_id: id, step_index: selectedStep } : null),
    onLabelled: () => refresh(),
  });
  const clearStep = h("button", { type: "button", class: "secondary", hidden: true, onclick: () => chooseStep(null) }, "Label the whole rollout");
  const body = h("div", { class: "rollout-body" });
  const el = h("div", { class: "view view-rollout" }, neighbours, title, facts, h("div", { class: "label-row" }, bar.el, clearStep), body);

  function chooseStep(index) {
    selectedStep = index;
    clearStep.hidden = index === null;
    for (const tr of body.querySelectorAll("tr[data-step]")) {
      const on = tr.dataset.step === String(index);
      tr.classList.toggle("selected", on);
      tr.setAttribute("aria-selected", on ? "true" : "false");
      if (on) tr.scrollIntoView({ block: "nearest" });
    }
    bar.update();
  }

  function moveStep(delta) {
    const steps = (data && data.steps) || [];
    if (!steps.length) return;
    const indices = steps.map((s) => s.step_index);
    const at = indices.indexOf(selectedStep);
    const next = at < 0 ? (delta > 0 ? 0 : indices.length - 1) : Math.min(indices.length - 1, Math.max(0, at + delta));
    chooseStep(indices[next]);
  }

  function renderNeighbours() {
    const n = (data && data.neighbours) || {};
    replace(
      neighbours,
      h("a", { href: listHash(), class: "back" }, "← list"),
      n.previous ? h("a", { href: rolloutHash(n.previous), rel: "prev" }, "‹ previous (k)") : h("span", { class: "muted" }, "‹ previous"),
      n.next ? h("a", { href: rolloutHash(n.next), rel: "next" }, "next (j) ›") : h("span", { class: "muted" }, "next ›"),
      data && data.rollout.group_id ? h("a", { href: groupHash(data.rollout.group_id) }, "group view (g)") : null,
    );
  }

  function renderFacts() {
    const r = data.rollout;
    const latest = (data.labels || []).find((l) => l.step_index === null || l.step_index === undefined);
    const items = [
      ["Task", r.task_id ?? ""],
      ["Group", r.group_id ? h("a", { href: groupHash(r.group_id) }, r.group_id) : "—", data.group ? ` (${data.group.n_rollouts} rollouts)` : ""],
      ["Agent", r.agent_name ?? ""],
      ["Name", r.name ?? ""],
      ["Status", statusBadge(r.status)],
      ["Reward", h("strong", {}, fmtNum(r.total_reward))],
      ["Tokens", `${fmtNum(r.input_tokens)} in / ${fmtNum(r.output_tokens)} out`],
      ["Duration", fmtMs(r.duration_ms)],
      ["Started", fmtTime(r.start_time)],
      ["Calls", `${fmtNum(r.n_llm_calls)} LLM · ${fmtNum(r.n_tool_calls)} tools (${fmtNum(r.n_tool_errors) || 0} failed) · ${fmtNum(r.n_spans)} spans`],
      ["Label", latest ? labelChip(latest.label, latest.score) : labelChip(null, null)],
    ];
    replace(
      facts,
      h("dl", { class: "facts grid" }, items.map(([k, ...v]) => h("div", {}, h("dt", {}, k), h("dd", {}, ...v)))),
      r.error ? h("div", { class: "io error" }, h("div", { class: "label" }, "error"), pre(r.error)) : null,
    );
  }

  function stepsTable() {
    const steps = data.steps || [];
    if (!steps.length) return h("p", { class: "muted" }, "No steps.");
    const stepLabels = new Map();
    for (const label of data.labels || []) {
      if (label.step_index === null || label.step_index === undefined || stepLabels.has(label.step_index)) continue;
      stepLabels.set(label.step_index, label);
    }
    const stepRewards = new Map();
    for (const reward of data.rewards || []) {
      if (reward.step_index === null || reward.step_index === undefined) continue;
      if (!stepRewards.has(reward.step_index)) stepRewards.set(reward.step_index, []);
      stepRewards.get(reward.step_index).push(`${reward.name}=${fmtNum(reward.value)}`);
    }
    return h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data steps" },
        h("caption", { class: "sr-only" }, "Steps: click one, or [ and ], to label it"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["#", "Kind", "Name", "Status", "Duration", "Step rewards", "Label", "Output"].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        h(
          "tbody",
          {},
          steps.map((step) => {
            const label = stepLabels.get(step.step_index);
            return h(
              "tr",
              {
                dataset: { step: String(step.step_index) },
                "aria-selected": step.step_index === selectedStep ? "true" : "false",
                class: step.step_index === selectedStep ? "selected" : null,
                onclick: (event) => {
                  if (!event.target.closest("a, button, details")) chooseStep(step.step_index === selectedStep ? null : step.step_index);
                },
              },
              h("td", { class: "num" }, h("button", { type: "button", class: "link", title: "Label this step", onclick: () => chooseStep(step.step_index) }, String(step.step_index))),
              h("td", {}, h("span", { class: ["kind", `k-${/^[a-z]+$/.test(step.kind || "") ? step.kind : "other"}`] }, step.kind ?? "")),
              h("td", {}, step.name ?? ""),
              h("td", {}, statusBadge(step.status)),
              h("td", { class: "num" }, fmtMs(step.duration_ms)),
              h("td", {}, (stepRewards.get(step.step_index) || []).join(", ")),
              h("td", {}, label ? labelChip(label.label, label.score) : ""),
              h("td", { class: "step-output" }, step.error ? h("span", { class: "err-text" }, String(step.error)) : preview(step.output)),
            );
          }),
        ),
      ),
    );
  }

  function renderBody() {
    const r = data.rollout;
    replace(
      body,
      h(
        "div",
        { class: "io-pair" },
        section("Input", pre(r.input)),
        section("Output", pre(r.output)),
      ),
      section("Steps", h("p", { class: "muted" }, "Select a step (click, or [ and ]) to label it instead of the whole rollout."), stepsTable()),
      section(
        "Spans",
        spanTree(data.spans, { selectedSpanId: () => selectedSpan, onSelect: (spanId) => (selectedSpan = spanId) }),
      ),
      section("LLM calls", llmCalls(data.llm_calls)),
      section("Tool calls", toolCalls(data.tool_calls)),
      section("Rewards", rewardsTable(data.rewards), h("h3", {}, "What total_reward combines"), episodeRewardsTable(data.episode_rewards, r.total_reward)),
      section("Advantages", advantagesTables(data.advantages)),
      section("Labels", labelsTable(data.labels)),
      section("Training runs that used it", trainingRunsList(data.training_runs)),
    );
  }

  const refresh = coalesce(async () => {
    try {
      data = await api.rollout(id);
    } catch (error) {
      replace(body, errorBox(error));
      replace(facts);
      data = null;
      bar.update();
      return;
    }
    const steps = new Set((data.steps || []).map((s) => s.step_index));
    if (selectedStep !== null && !steps.has(selectedStep)) selectedStep = null;
    clearStep.hidden = selectedStep === null;
    renderNeighbours();
    renderFacts();
    renderBody();
    bar.update();
  });

  return {
    el,
    title: `Rollout ${id}`,
    load: refresh,
    refresh,
    key(name) {
      const n = (data && data.neighbours) || {};
      if (name === "j") {
        if (n.next) go(rolloutHash(n.next));
      } else if (name === "k") {
        if (n.previous) go(rolloutHash(n.previous));
      } else if (name === "]") moveStep(1);
      else if (name === "[") moveStep(-1);
      else if (name === "g") {
        if (data && data.rollout.group_id) go(groupHash(data.rollout.group_id));
      } else if (name === "Escape") {
        if (selectedStep !== null) chooseStep(null);
        else go(listHash());
      } else return bar.key(name);
      return true;
    },
  };
}

function preview(value) {
  if (value === null || value === undefined) return "";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 160 ? `${text.slice(0, 160)}…` : text;
}
