// Hash routes: #/rollouts?filters, #/rollout/<id>, #/group/<gid>, #/console, #/training[/<run_id>].

export const VIEWS = ["rollouts", "rollout", "group", "console", "training"];

/** The current route: {view, id, params: {key: value}} (ids decoded). */
export function parseHash(hash = location.hash) {
  const text = hash.replace(/^#\/?/, "");
  const [path, search = ""] = splitOnce(text, "?");
  const [view, rest] = splitOnce(path, "/");
  const params = Object.fromEntries(new URLSearchParams(search));
  let id = null;
  if (rest) {
    try {
      id = decodeURIComponent(rest);
    } catch (_) {
      id = rest;
    }
  }
  if (!VIEWS.includes(view)) return { view: "rollouts", id: null, params };
  return { view, id, params };
}

function splitOnce(text, separator) {
  const at = text.indexOf(separator);
  return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + 1)];
}

/** The hash of a route: hashFor("rollout", id), hashFor("rollouts", null, {task: "x"}). */
export function hashFor(view, id = null, params = null) {
  let hash = `#/${view}`;
  if (id !== null && id !== undefined) hash += `/${encodeURIComponent(id)}`;
  if (params) {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) {
      if (value !== null && value !== undefined && value !== "") search.set(key, String(value));
    }
    const text = search.toString();
    if (text) hash += `?${text}`;
  }
  return hash;
}

export const rolloutHash = (id) => hashFor("rollout", id);
export const groupHash = (id) => hashFor("group", id);
export const trainingHash = (id) => hashFor("training", id);

/** Where "back to the list" goes: the last list URL the user had (filters kept). */
let lastListHash = "#/rollouts";

export function rememberListHash(hash) {
  lastListHash = hash;
}

export function listHash() {
  return lastListHash;
}

export function go(hash) {
  if (location.hash !== hash) location.hash = hash;
}

/** Change the hash without creating a history entry per keystroke (filters typing). */
export function replaceHash(hash) {
  if (location.hash !== hash) {
    history.replaceState(null, "", hash);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  }
}
