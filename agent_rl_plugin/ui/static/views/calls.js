// LLM calls (messages with roles, tool calls inside messages, tokens) and tool calls (arguments,
// results, errors) of one rollout.

import { fmtMs, fmtNum, h, pre, statusBadge } from "../dom.js";

/** Messages in the shapes we meet: OpenAI-like {role, content, tool_calls} and GenAI {role, parts}. */
function message(msg) {
  if (msg === null || typeof msg !== "object") return h("div", { class: "msg" }, pre(msg));
  const role = typeof msg.role === "string" ? msg.role : "message";
  const safeRole = /^[a-z_]{1,20}$/.test(role) ? role : "other";
  const body = [];
  if (typeof msg.content === "string") {
    if (msg.content) body.push(pre(msg.content));
  } else if (Array.isArray(msg.content)) {
    for (const part of msg.content) body.push(contentPart(part));
  } else if (msg.content !== undefined && msg.content !== null) {
    body.push(pre(msg.content));
  }
  if (Array.isArray(msg.parts)) for (const part of msg.parts) body.push(contentPart(part));
  if (Array.isArray(msg.tool_calls)) for (const call of msg.tool_calls) body.push(toolCallInMessage(call));
  const extra = msg.tool_call_id || msg.id || msg.name;
  return h(
    "div",
    { class: ["msg", `role-${safeRole}`] },
    h("div", { class: "role" }, role, extra ? h("span", { class: "muted" }, ` · ${extra}`) : null),
    body.length ? body : h("div", { class: "muted" }, "(empty)"),
  );
}

function contentPart(part) {
  if (part === null || typeof part !== "object") return pre(part);
  if (part.type === "tool_call") return toolCallInMessage(part);
  if (part.type === "tool_call_response") {
    return h("div", { class: "call" }, h("span", { class: "muted" }, `result of ${part.id ?? "call"}: `), pre(part.response ?? part.result));
  }
  if (typeof part.text === "string") return pre(part.text);
  if (typeof part.content === "string") return pre(part.content);
  return pre(part);
}

function toolCallInMessage(call) {
  if (call === null || typeof call !== "object") return pre(call);
  const fn = call.function && typeof call.function === "object" ? call.function : call;
  let args = fn.arguments;
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch (_) {
      // shown as the string it is
    }
  }
  return h(
    "div",
    { class: "call" },
    h("span", { class: "kind k-tool" }, "tool call"),
    " ",
    h("code", {}, String(fn.name ?? "?")),
    call.id ? h("span", { class: "muted" }, ` (${call.id})`) : null,
    pre(args),
  );
}

function messages(list, title) {
  if (list === null || list === undefined) return null;
  const items = Array.isArray(list) ? list : [list];
  return h("div", { class: "io" }, h("div", { class: "label" }, `${title} (${items.length})`), items.map(message));
}

function llmCall(call, index) {
  const model = call.response_model || call.request_model || "";
  const tokens = `${fmtNum(call.input_tokens) || "?"} in / ${fmtNum(call.output_tokens) || "?"} out`;
  const inputs = Array.isArray(call.input_messages) ? call.input_messages : call.input_messages == null ? [] : [call.input_messages];
  // Earlier input messages repeat the previous calls: show the last ones open, the rest folded.
  const folded = inputs.length > 4 ? inputs.slice(0, inputs.length - 4) : [];
  const shown = inputs.slice(folded.length);
  return h(
    "article",
    { class: ["call-card", call.status === "error" ? "failed" : null], dataset: { spanId: call.span_id ?? "" } },
    h(
      "h3",
      {},
      h("span", { class: "kind k-llm" }, "llm"),
      ` #${index + 1} `,
      h("code", {}, model),
      " ",
      statusBadge(call.status),
      h("span", { class: "tokens" }, ` ${tokens} · ${fmtMs(call.duration_ms)}`),
      call.provider ? h("span", { class: "muted" }, ` · ${call.provider}`) : null,
    ),
    folded.length
      ? h("details", { class: "io" }, h("summary", {}, `${folded.length} earlier input messages`), folded.map(message))
      : null,
    messages(shown, "input messages"),
    call.reasoning ? h("details", { class: "io" }, h("summary", {}, "reasoning"), pre(call.reasoning)) : null,
    messages(call.output_messages, "output messages"),
    Array.isArray(call.finish_reasons) && call.finish_reasons.length
      ? h("div", { class: "muted small" }, `finish: ${call.finish_reasons.map(String).join(", ")}`)
      : null,
    call.error ? h("div", { class: "io error" }, h("div", { class: "label" }, "error"), pre(call.error)) : null,
  );
}

function toolCall(call) {
  return h(
    "article",
    { class: ["call-card", call.status === "error" ? "failed" : null], dataset: { spanId: call.span_id ?? "" } },
    h(
      "h3",
      {},
      h("span", { class: "kind k-tool" }, "tool"),
      " ",
      h("code", {}, String(call.tool_name ?? "?")),
      call.call_id ? h("span", { class: "muted" }, ` (${call.call_id})`) : null,
      " ",
      statusBadge(call.status),
      h("span", { class: "time" }, ` ${fmtMs(call.duration_ms)}`),
    ),
    h("div", { class: "io" }, h("div", { class: "label" }, "arguments"), pre(call.arguments)),
    h("div", { class: "io" }, h("div", { class: "label" }, "result"), pre(call.result)),
    call.error ? h("div", { class: "io error" }, h("div", { class: "label" }, "error"), pre(call.error)) : null,
  );
}

export function llmCalls(calls) {
  if (!calls || !calls.length) return h("p", { class: "muted" }, "No LLM calls.");
  const input = calls.reduce((n, c) => n + (c.input_tokens || 0), 0);
  const output = calls.reduce((n, c) => n + (c.output_tokens || 0), 0);
  return h(
    "div",
    {},
    h("p", { class: "muted" }, `${calls.length} calls · ${fmtNum(input)} input tokens · ${fmtNum(output)} output tokens`),
    calls.map(llmCall),
  );
}

export function toolCalls(calls) {
  if (!calls || !calls.length) return h("p", { class: "muted" }, "No tool calls.");
  return h("div", {}, calls.map(toolCall));
}
