// The labelling bar: thumbs up / down, a 1-5 score and a note for one target (a rollout, or one
// step of it), written as POST api/labels with the labeller's name. Shared by the list, the
// rollout view and the group view; the keys u, d, 1-5 and n call the same actions.

import { api } from "./api.js";
import { h, replace, shortId } from "./dom.js";
import { labeller, toast } from "./shell.js";

/**
 * getTarget() -> {rollout_id, step_index (null for the rollout), what: "text"} | null
 * onStart(target, fields) is called as a write starts (the list moves on to the next row at once, so
 * that u, u, d labels three rows however fast it is typed); onLabelled(label, target) with the
 * stored row after the write.
 */
export function labelBar({ getTarget, onLabelled, onStart }) {
  const targetText = h("span", { class: "target", "aria-live": "polite" });
  const note = h("input", {
    type: "text",
    class: "note",
    placeholder: "note (n) — Enter saves",
    "aria-label": "Note for the labelled rollout or step",
    maxLength: 4000,
  });
  const buttons = [
    h("button", { type: "button", class: "thumb up", title: "Label good (u)", onclick: () => write({ label: "good" }) }, "✓ good"),
    h("button", { type: "button", class: "thumb down", title: "Label bad (d)", onclick: () => write({ label: "bad" }) }, "✗ bad"),
    ...[1, 2, 3, 4, 5].map((n) =>
      h("button", { type: "button", class: "score", title: `Score ${n} (${n})`, onclick: () => write({ score: n }) }, String(n)),
    ),
  ];
  const save = h("button", { type: "button", class: "save-note", onclick: () => saveNote() }, "Save note");
  note.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      saveNote();
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      note.blur();
    }
  });
  const el = h(
    "div",
    { class: "label-bar", role: "group", "aria-label": "Label" },
    h("span", { class: "muted" }, "Label "),
    targetText,
    h("span", { class: "buttons" }, buttons),
    note,
    save,
  );

  function update() {
    const target = getTarget();
    const disabled = !target;
    for (const button of [...buttons, save]) button.disabled = disabled;
    note.disabled = disabled;
    if (!target) {
      replace(targetText, h("em", {}, "nothing selected"));
      el.classList.remove("step-target");
      return;
    }
    const stepped = target.step_index !== null && target.step_index !== undefined;
    el.classList.toggle("step-target", stepped);
    replace(
      targetText,
      stepped ? h("strong", {}, `step ${target.step_index}`) : null,
      stepped ? " of " : "",
      "rollout ",
      h("code", { title: target.rollout_id }, shortId(target.rollout_id)),
    );
  }

  async function write(fields) {
    const target = getTarget();
    if (!target) return null;
    const body = {
      rollout_id: target.rollout_id,
      step_index: target.step_index ?? null,
      label: fields.label ?? null,
      score: fields.score ?? null,
      note: fields.note ?? null,
      labeller: labeller() || null,
    };
    if (onStart) onStart(target, fields);
    try {
      const answer = await api.label(body);
      const row = answer.label;
      const where = body.step_index === null ? "" : ` (step ${body.step_index})`;
      toast(`${describe(row)} → ${shortId(body.rollout_id)}${where}`, "ok");
      if (onLabelled) onLabelled(row, target);
      return row;
    } catch (error) {
      toast(`Label not saved: ${error.message}${error.hint ? ` — ${error.hint}` : ""}`, "error");
      return null;
    }
  }

  async function saveNote() {
    const text = note.value.trim();
    if (!text) {
      note.blur();
      return;
    }
    const row = await write({ note: text });
    if (row) {
      note.value = "";
      note.blur();
    }
  }

  /** The keys u, d, 1-5, n; true when the key was one of them. */
  function key(name) {
    if (name === "u") write({ label: "good" });
    else if (name === "d") write({ label: "bad" });
    else if (/^[1-5]$/.test(name)) write({ score: Number(name) });
    else if (name === "n") {
      if (getTarget()) note.focus();
    } else return false;
    return true;
  }

  update();
  return { el, update, key, write };
}

export function describe(row) {
  if (!row) return "";
  if (row.label === "good") return "✓ good";
  if (row.label === "bad") return "✗ bad";
  if (row.score !== null && row.score !== undefined) return `score ${row.score}`;
  if (row.label === "note") return "note saved";
  return String(row.label ?? "label");
}
