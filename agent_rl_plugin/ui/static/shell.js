// The page around the views: toasts (an aria-live region), the key help overlay, the labeller name.

import { h, replace } from "./dom.js";

// -- toasts -----------------------------------------------------------------------------------

export function toast(message, kind = "info") {
  const region = document.getElementById("toasts");
  const item = h("div", { class: ["toast", kind], role: kind === "error" ? "alert" : "status" }, message);
  region.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 8000 : 3500);
}

// -- help overlay -----------------------------------------------------------------------------

export const KEYS = [
  ["j / k", "next / previous rollout (list: move the selection; rollout view: open the next / previous one)"],
  ["Enter", "open the selected rollout"],
  ["u", "thumbs up: label the rollout (or the selected step) good"],
  ["d", "thumbs down: label it bad"],
  ["1 … 5", "give it a score"],
  ["n", "write a note (Enter saves it, Escape leaves the box)"],
  ["[ / ]", "rollout view: select the previous / next step (then u, d, 1-5 label that step)"],
  ["g", "the group of the current rollout"],
  ["c / t / l", "the SQL console / training runs / the rollouts list"],
  ["Ctrl+Enter", "console: run the query"],
  ["?", "this help"],
  ["Escape", "close this help; clear the step selection; back to the list"],
];

let helpDialog = null;
let returnFocus = null;

export function helpOpen() {
  return helpDialog !== null && !helpDialog.hidden;
}

export function showHelp() {
  if (!helpDialog) {
    helpDialog = h(
      "div",
      { class: "overlay", role: "dialog", "aria-modal": "true", "aria-labelledby": "help-title", hidden: true },
      h(
        "div",
        { class: "overlay-box" },
        h("h2", { id: "help-title" }, "Keyboard"),
        h(
          "table",
          { class: "data keys" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Key"), h("th", { scope: "col" }, "Does"))),
          h(
            "tbody",
            {},
            KEYS.map(([key, text]) => h("tr", {}, h("td", {}, h("kbd", {}, key)), h("td", {}, text))),
          ),
        ),
        h("p", { class: "muted" }, "Keys do nothing while you type in a box."),
        h("button", { type: "button", class: "close", onclick: hideHelp }, "Close"),
      ),
    );
    helpDialog.addEventListener("click", (event) => {
      if (event.target === helpDialog) hideHelp();
    });
    document.body.append(helpDialog);
  }
  returnFocus = document.activeElement;
  helpDialog.hidden = false;
  helpDialog.querySelector("button.close").focus();
}

export function hideHelp() {
  if (!helpDialog || helpDialog.hidden) return;
  helpDialog.hidden = true;
  if (returnFocus && returnFocus.focus) returnFocus.focus();
}

// -- the labeller name ------------------------------------------------------------------------

const LABELLER_KEY = "agent-rl-ui.labeller";
let serverLabeller = null;

export function setServerLabeller(name) {
  serverLabeller = name || null;
  const input = document.getElementById("labeller");
  if (input && !input.value && document.activeElement !== input) input.value = labeller() || "";
}

/** The name labels are written with: the one typed in the header, else the server's default. */
export function labeller() {
  const input = document.getElementById("labeller");
  if (input && input.value.trim()) return input.value.trim();
  let stored = null;
  try {
    stored = localStorage.getItem(LABELLER_KEY);
  } catch (_) {
    stored = null;
  }
  return (stored && stored.trim()) || serverLabeller;
}

export function bindLabellerInput(input) {
  input.value = labeller() || "";
  input.addEventListener("change", () => {
    try {
      if (input.value.trim()) localStorage.setItem(LABELLER_KEY, input.value.trim());
      else localStorage.removeItem(LABELLER_KEY);
    } catch (_) {
      // storage may be off: the name then lasts until the page is reloaded
    }
    toast(`Labels are now written as “${labeller() || "the server's default"}”.`);
  });
}

// -- the not-signed-in banner -----------------------------------------------------------------

export function showBanner(text, hint) {
  const banner = document.getElementById("banner");
  replace(banner, h("strong", {}, text), hint ? h("div", {}, hint) : null);
  banner.hidden = false;
}

export function hideBanner() {
  document.getElementById("banner").hidden = true;
}
