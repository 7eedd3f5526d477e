// The page: routes the hash to a view, dispatches keys, polls api/version and refreshes the
// current view in place when the store changed.

import { api, onUnauthorized } from "./api.js";
import { h, replace } from "./dom.js";
import { listHash, parseHash } from "./router.js";
import { bindLabellerInput, helpOpen, hideBanner, hideHelp, setServerLabeller, showBanner, showHelp } from "./shell.js";
import { consoleView } from "./views/console.js";
import { groupView } from "./views/group.js";
import { rolloutView } from "./views/rollout.js";
import { rolloutsView } from "./views/rollouts.js";
import { trainingView } from "./views/training.js";

const POLL_MS = 2000;
const FACTORIES = { rollouts: rolloutsView, rollout: rolloutView, group: groupView, console: consoleView, training: trainingView };

const main = document.getElementById("main");
let current = null; // {route, view}
let version = null;
let polling = false;
let authFailed = false;

function sameTarget(a, b) {
  return a && b && a.view === b.view && a.id === b.id;
}

function markNav(route) {
  const section = route.view === "rollout" || route.view === "group" ? "rollouts" : route.view;
  for (const link of document.querySelectorAll("#nav a[data-view]")) {
    if (link.dataset.view === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

async function showRoute() {
  const route = parseHash();
  markNav(route);
  if (current && sameTarget(current.route, route)) {
    current.route = route;
    const view = current.view;
    if (view.update) await guard(() => view.update(route));
    if (current && current.view === view) main.dataset.ready = route.view;
    return;
  }
  const view = FACTORIES[route.view](route);
  current = { route, view };
  replace(main, view.el);
  document.title = `${view.title} · agent-rl ui`;
  window.scrollTo(0, 0);
  await guard(() => view.load());
  if (current && current.view === view) main.dataset.ready = route.view;
}

async function guard(action) {
  try {
    await action();
  } catch (error) {
    replace(main, h("div", { class: "error-box", role: "alert" }, h("strong", {}, error.message || String(error)), error.hint ? h("div", { class: "hint" }, error.hint) : null));
  }
}

// -- live updates -----------------------------------------------------------------------------

async function poll() {
  if (polling || document.visibilityState !== "visible") return;
  polling = true;
  try {
    const answer = await api.version();
    if (authFailed) {
      authFailed = false;
      hideBanner();
    }
    showStore(answer);
    const changed = version !== null && answer.version !== version;
    version = answer.version;
    if (changed && current) await refreshInPlace(current.view);
    setLive(true);
  } catch (error) {
    setLive(false, error);
  } finally {
    polling = false;
  }
}

/** Refresh the view's data, keeping the scroll position (selection and inputs are the view's). */
async function refreshInPlace(view) {
  const x = window.scrollX;
  const y = window.scrollY;
  try {
    await view.refresh();
  } catch (error) {
    setLive(false, error);
    return;
  }
  if (window.scrollY !== y || window.scrollX !== x) window.scrollTo(x, y);
}

function showStore(answer) {
  const db = document.getElementById("db-path");
  if (db.textContent !== String(answer.db ?? "")) {
    db.textContent = String(answer.db ?? "");
    db.title = String(answer.db ?? "");
  }
  setServerLabeller(answer.labeller);
  document.getElementById("served").hidden = !answer.served;
}

function setLive(ok, error) {
  const live = document.getElementById("live");
  live.classList.toggle("down", !ok);
  live.textContent = ok ? "● live" : "● offline";
  live.title = ok ? `checked ${new Date().toLocaleTimeString()}` : (error && error.message) || "the server does not answer";
}

onUnauthorized((error) => {
  authFailed = true;
  showBanner(error.message, error.hint);
});

// -- keys -------------------------------------------------------------------------------------

function typing(target) {
  if (!target || !target.closest) return false;
  return Boolean(target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']"));
}

function onKey(event) {
  if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
  if (typing(event.target)) return;
  const key = event.key;
  if (helpOpen()) {
    if (key === "Escape" || key === "?") {
      event.preventDefault();
      hideHelp();
    }
    return;
  }
  // Enter and Space on a focused link or button keep their own meaning.
  if ((key === "Enter" || key === " ") && event.target.closest && event.target.closest("a, button, summary")) return;
  if (key === "?") {
    event.preventDefault();
    showHelp();
    return;
  }
  if (current && current.view.key && current.view.key(key)) {
    event.preventDefault();
    return;
  }
  const global = { c: "#/console", t: "#/training", l: listHash() }[key];
  if (global) {
    event.preventDefault();
    location.hash = global;
  } else if (key === "Escape" && current && current.route.view !== "rollouts") {
    event.preventDefault();
    location.hash = listHash();
  }
}

// -- start ------------------------------------------------------------------------------------

function start() {
  bindLabellerInput(document.getElementById("labeller"));
  document.getElementById("help-button").addEventListener("click", showHelp);
  document.addEventListener("keydown", onKey);
  window.addEventListener("hashchange", showRoute);
  document.addEventListener("visibilitychange", poll);
  setInterval(poll, POLL_MS);
  poll();
  showRoute();
}

start();
