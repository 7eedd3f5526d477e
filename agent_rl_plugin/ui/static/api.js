// The HTTP API (relative URLs only: the UI works wherever it is mounted).

export class ApiError extends Error {
  constructor(status, message, hint) {
    super(message);
    this.status = status;
    this.hint = hint || null;
  }
}

const listeners = new Set();

/** Called with the ApiError of every 401 answer (the page shows the "open the link" message). */
export function onUnauthorized(callback) {
  listeners.add(callback);
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (response.ok) return body;
  const error = new ApiError(
    response.status,
    (body && body.error) || `${response.status} ${response.statusText}`,
    body && body.hint,
  );
  if (response.status === 401) {
    error.message = `Not signed in${body && body.error ? ` (${body.error})` : ""}.`;
    error.hint = "Open the link that `agent-rl ui` printed: it carries the access token.";
    for (const callback of listeners) callback(error);
  }
  throw error;
}

/** Waits before retrying a 503 answer ("store temporarily locked"): reads only. */
const RETRY_MS = [250, 600, 1500];

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function send(url, init = {}) {
  const retries = init.method && init.method !== "GET" ? [] : RETRY_MS;
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await fetch(url, { credentials: "same-origin", cache: "no-store", ...init });
    } catch (exc) {
      throw new ApiError(0, "The server does not answer.", "Is `agent-rl ui` still running?");
    }
    if (response.status === 503 && attempt < retries.length) {
      await sleep(retries[attempt]);
      continue;
    }
    return answer(response);
  }
}

export function get(path, params) {
  return send(`api/${path}${query(params)}`);
}

export function post(path, body) {
  return send(`api/${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Agent-RL-UI": "1" },
    body: JSON.stringify(body),
  });
}

export const enc = encodeURIComponent;

export const api = {
  version: () => get("version"),
  facets: () => get("facets"),
  rollouts: (params) => get("rollouts", params),
  rollout: (id) => get(`rollouts/${enc(id)}`),
  group: (id) => get(`groups/${enc(id)}`),
  cookbook: () => get("cookbook"),
  query: (sql, maxRows = 1000) => post("query", { sql, max_rows: maxRows }),
  training: () => get("training"),
  trainingRun: (id) => get(`training/${enc(id)}`),
  label: (body) => post("labels", body),
};
