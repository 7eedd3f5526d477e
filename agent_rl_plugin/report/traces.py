"""The report's step-by-step trace viewer: one rollout's spans, messages, tool calls, events
and rewards as nested HTML (:func:`trace_html`).

Everything shown comes from the store and is untrusted: it goes through
:func:`~agent_rl_plugin.report.html.esc` (or :func:`~agent_rl_plugin.report.html.cut`, which
escapes too) and is only placed in element content or double-quoted attributes.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.report.html import (
    MAX_INPUT_MESSAGES,
    MAX_INPUT_TEXT,
    MAX_TEXT,
    anchor_id,
    cut,
    esc,
    fmt,
    status_badge,
    table,
)


def _loads(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _pretty(value: Any) -> str:
    """JSON values indented; text as it is."""
    parsed = _loads(value)
    if isinstance(parsed, (dict, list)):
        compact = json.dumps(parsed, ensure_ascii=False)
        return compact if len(compact) <= 100 else json.dumps(parsed, indent=2, ensure_ascii=False)
    if isinstance(parsed, str):
        return parsed
    return json.dumps(parsed, ensure_ascii=False) if parsed is not None else ""


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text") if part.get("text") is not None else part.get("content")
                texts.append(text if isinstance(text, str) else json.dumps(part, ensure_ascii=False))
            else:
                texts.append(str(part))
        return "\n".join(texts)
    return json.dumps(content, ensure_ascii=False)


def _tool_calls(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            function = call
        calls.append((str(function.get("name", "?")), function.get("arguments")))
    for part in message.get("parts") or []:
        if isinstance(part, dict) and part.get("type") == "tool_call":
            calls.append((str(part.get("name", "?")), part.get("arguments")))
    return calls


def _message_text(message: Mapping[str, Any]) -> str:
    text = _content_text(message.get("content"))
    if not text and message.get("parts"):
        pieces = []
        for part in message["parts"]:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                pieces.append(str(part.get("content", "")))
            elif part.get("type") == "tool_call_response":
                pieces.append(_pretty(part.get("response")))
        text = "\n".join(pieces)
    return text


def messages_html(messages_json: Any, last: int | None = None, limit: int = MAX_TEXT) -> tuple[str, int]:
    """The messages of an LLM call as HTML blocks (only the ``last`` ones, if given; texts cut
    at ``limit``), and how many there are."""
    messages = _loads(messages_json)
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        return f'<pre class="text">{cut(_pretty(messages), limit)}</pre>', 1
    blocks = []
    shown = messages
    if last is not None and len(messages) > last:
        shown = messages[-last:]
        hidden = len(messages) - last
        blocks.append(
            f'<p class="more">{hidden} earlier message{"s" if hidden != 1 else ""} not shown '
            "(see the previous steps)</p>"
        )
    for message in shown:
        if not isinstance(message, dict):
            blocks.append(f'<div class="msg"><pre class="text">{cut(_pretty(message), limit)}</pre></div>')
            continue
        role = str(message.get("role", "?"))
        extra = (
            f' <span class="muted">(answers {esc(message["tool_call_id"])})</span>'
            if message.get("tool_call_id")
            else ""
        )
        name = f' <span class="muted">{esc(message["name"])}</span>' if message.get("name") else ""
        text = _message_text(message)
        body = f'<pre class="text">{cut(text, limit)}</pre>' if text else ""
        for call_name, arguments in _tool_calls(message):
            body += f'<div class="call">→ <b>{esc(call_name)}</b>(<code>{cut(_pretty(arguments), min(limit, 2000))}</code>)</div>'
        css = re.sub(r"[^a-z]", "", role.lower())[:16] or "other"
        blocks.append(f'<div class="msg role-{css}"><span class="role">{esc(role)}</span>{name}{extra}{body}</div>')
    return "".join(blocks), len(messages)


def _kind(span: Mapping[str, Any]) -> str:
    op = span.get("operation") or ""
    kind = span.get("span_kind") or ""
    attrs = span.get("attributes") or {}
    if op in sc.LLM_OPERATIONS or kind == sc.SPAN_KIND_LLM:
        return "llm"
    if op == sc.OP_EXECUTE_TOOL or kind == sc.SPAN_KIND_TOOL:
        return "tool"
    if kind == sc.SPAN_KIND_ROLLOUT or attrs.get(sc.ROLLOUT_ROOT):
        return "rollout"
    if op == sc.OP_INVOKE_AGENT or kind == sc.SPAN_KIND_AGENT:
        return "agent"
    if kind == sc.SPAN_KIND_EVENT:
        return "event"
    return "span"


_KIND_LABEL = {"llm": "LLM", "tool": "tool", "rollout": "rollout", "agent": "agent", "event": "event", "span": "span"}


def _reward_chips(rewards: Sequence[Mapping[str, Any]]) -> str:
    chips = []
    for reward in rewards:
        if reward.get("error"):
            chips.append(f'<span class="chip bad" title="{esc(reward["error"])}">★ {esc(reward["name"])}: error</span>')
            continue
        value = reward.get("value")
        css = "good" if value is not None and value > 0 else ("bad" if value is not None and value < 0 else "")
        title = f' title="{esc(reward["reason"])}"' if reward.get("reason") else ""
        chips.append(f'<span class="chip {css}"{title}>★ {esc(reward["name"])} = {esc(fmt(value))}</span>')
    return " ".join(chips)


class TraceRenderer:
    """Renders one rollout's spans as a nested list (see :func:`trace_html`)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.spans = data.get("spans", [])
        self.steps: Mapping[tuple[str, int], int] = data.get("steps", {})
        self.step_rewards: dict[int, list[Mapping[str, Any]]] = {}
        for reward in data.get("rewards", []):
            if reward.get("step_index") is not None:
                self.step_rewards.setdefault(int(reward["step_index"]), []).append(reward)
        self.start_ns = min((s["start_ns"] for s in self.spans if s.get("start_ns") is not None), default=0)

    def tree(self) -> str:
        by_id = {s["span_id"]: {**s, "children": []} for s in self.spans}
        roots: list[dict[str, Any]] = []
        for span in by_id.values():
            parent = by_id.get(span.get("parent_span_id")) if span.get("parent_span_id") else None
            (parent["children"] if parent else roots).append(span)
        if not roots:
            return '<p class="muted">no spans stored for this rollout</p>'
        return '<ul class="tree">' + "".join(self.span(root) for root in roots) + "</ul>"

    def _step(self, span_id: str, event_index: int = -1) -> str:
        index = self.steps.get((span_id, event_index))
        if index is None:
            return ""
        chips = _reward_chips(self.step_rewards.get(index, []))
        return f'<span class="step">step {index}</span>' + (f" {chips}" if chips else "")

    def span(self, span: Mapping[str, Any]) -> str:
        attrs = span.get("attributes") or {}
        kind = _kind(span)
        offset = ((span.get("start_ns") or self.start_ns) - self.start_ns) / 1e6
        duration = span.get("duration_ms")
        timing = f'<span class="time">+{offset:,.1f} ms · {fmt(duration) if duration is not None else "?"} ms</span>'
        error = span.get("status_code") == "ERROR"
        head = [
            f'<span class="kind k-{kind}">{_KIND_LABEL[kind]}</span>',
            f'<span class="name">{esc(span.get("name"))}</span>',
        ]
        if kind == "llm":
            tokens_in = attrs.get(sc.GEN_AI_USAGE_INPUT_TOKENS)
            tokens_out = attrs.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)
            if tokens_in is not None or tokens_out is not None:
                head.append(f'<span class="tokens">{esc(fmt(tokens_in))} → {esc(fmt(tokens_out))} tokens</span>')
        head.append(timing)
        if error:
            head.append('<span class="badge err">error</span>')
        if kind in ("llm", "tool"):
            head.append(self._step(span["span_id"]))
        body = self.content(span, kind, attrs)
        children = sorted(span["children"], key=lambda s: s.get("start_ns") or 0)
        items = []
        child_index = 0
        for event_index, event in enumerate(span.get("events") or []):
            event_time = _number(event.get("time_ns") or event.get("time"))
            while child_index < len(children) and _number(children[child_index].get("start_ns")) <= event_time:
                items.append(self.span(children[child_index]))
                child_index += 1
            rendered = self.event(span["span_id"], event_index, event)
            if rendered:
                items.append(rendered)
        items.extend(self.span(child) for child in children[child_index:])
        nested = f"<ul>{''.join(items)}</ul>" if items else ""
        css = f"node k-{kind}" + (" failed" if error else "")
        return f'<li class="{css}"><div class="head">{" ".join(h for h in head if h)}</div>{body}{nested}</li>'

    def content(self, span: Mapping[str, Any], kind: str, attrs: Mapping[str, Any]) -> str:
        parts = []
        if kind == "llm":
            if sc.GEN_AI_INPUT_MESSAGES in attrs:
                blocks, count = messages_html(attrs[sc.GEN_AI_INPUT_MESSAGES], MAX_INPUT_MESSAGES, MAX_INPUT_TEXT)
                parts.append(
                    f'<details class="io"><summary>input: {count} message{"s" if count != 1 else ""}</summary>{blocks}</details>'
                )
            if attrs.get(sc.REASONING):
                parts.append(
                    f'<details class="io"><summary>reasoning</summary><pre class="text">{cut(str(attrs[sc.REASONING]))}</pre></details>'
                )
            if sc.GEN_AI_OUTPUT_MESSAGES in attrs:
                blocks, _ = messages_html(attrs[sc.GEN_AI_OUTPUT_MESSAGES])
                parts.append(f'<div class="io out"><div class="label">output</div>{blocks}</div>')
        elif kind == "tool":
            if sc.GEN_AI_TOOL_CALL_ARGUMENTS in attrs:
                parts.append(
                    f'<div class="io"><div class="label">arguments</div><pre class="text">{cut(_pretty(attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS]))}</pre></div>'
                )
            if sc.GEN_AI_TOOL_CALL_RESULT in attrs:
                parts.append(
                    f'<div class="io"><div class="label">result</div><pre class="text">{cut(_pretty(attrs[sc.GEN_AI_TOOL_CALL_RESULT]))}</pre></div>'
                )
        elif kind in ("agent", "rollout"):
            if attrs.get(sc.ROLLOUT_INPUT) and kind == "agent":
                parts.append(
                    f'<details class="io"><summary>input</summary><pre class="text">{cut(_pretty(attrs[sc.ROLLOUT_INPUT]))}</pre></details>'
                )
            if attrs.get(sc.ROLLOUT_OUTPUT):
                parts.append(
                    f'<div class="io"><div class="label">output</div><pre class="text">{cut(_pretty(attrs[sc.ROLLOUT_OUTPUT]))}</pre></div>'
                )
        if span.get("status_code") == "ERROR":
            error_type, message = attrs.get(sc.ERROR_TYPE), span.get("status_message")
            if error_type and message and str(error_type) in str(message):
                error_type = None
            error = ": ".join(str(x) for x in (error_type, message) if x)
            parts.append(
                f'<div class="io error"><div class="label">error</div><pre class="text">{cut(error or "error")}</pre></div>'
            )
        return "".join(parts)

    def event(self, span_id: str, event_index: int, event: Mapping[str, Any]) -> str:
        attrs = event.get("attributes") or {}
        name = event.get("name")
        if name == sc.EVENT_NAME:
            bits = [f'<span class="kind k-event">event</span> <b>{esc(attrs.get(sc.EVENT_TYPE, "event"))}</b>']
            for key, label in ((sc.EVENT_ROUND, "round"), (sc.EVENT_AGENT_ID, "agent"), (sc.EVENT_TARGET, "→")):
                if attrs.get(key) is not None:
                    bits.append(f'<span class="muted">{esc(label)}</span> {esc(attrs[key])}')
            bits.append(self._step(span_id, event_index))
            body = ""
            if attrs.get(sc.EVENT_REASON):
                body += f'<div class="io"><div class="label">reason</div><pre class="text">{cut(str(attrs[sc.EVENT_REASON]))}</pre></div>'
            if attrs.get(sc.EVENT_CONTENT):
                body += f'<div class="io"><div class="label">content</div><pre class="text">{cut(_pretty(attrs[sc.EVENT_CONTENT]))}</pre></div>'
            if attrs.get(sc.EVENT_DATA):
                body += f'<details class="io"><summary>data</summary><pre class="text">{cut(_pretty(attrs[sc.EVENT_DATA]))}</pre></details>'
            return f'<li class="node k-event"><div class="head">{" ".join(b for b in bits if b)}</div>{body}</li>'
        if name == sc.EVENT_EVALUATION_RESULT:
            reward = {
                "name": attrs.get(sc.GEN_AI_EVALUATION_NAME),
                "value": _float(attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)),
                "reason": attrs.get(sc.GEN_AI_EVALUATION_EXPLANATION),
            }
            step = attrs.get(sc.STEP_INDEX)
            where = f' <span class="muted">step {esc(step)}</span>' if step is not None else ""
            reason = f' <span class="muted">{esc(reward["reason"])}</span>' if reward["reason"] else ""
            return f'<li class="node k-reward"><div class="head"><span class="kind k-reward">reward</span> emitted {_reward_chips([reward])}{where}{reason}</div></li>'
        if name == "exception":
            trace = attrs.get("exception.stacktrace")
            stack = (
                f'<details class="io"><summary>stack trace</summary><pre class="text">{cut(str(trace))}</pre></details>'
                if trace
                else ""
            )
            return (
                f'<li class="node k-exception"><div class="head"><span class="kind k-exception">exception</span> '
                f"<b>{esc(attrs.get('exception.type'))}</b>: {esc(attrs.get('exception.message'))}</div>{stack}</li>"
            )
        return ""


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("inf")


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def trace_html(rollout: Mapping[str, Any], data: Mapping[str, Any], why: str) -> str:
    """One rollout as ``<details id=rollout-...>``: summary line, input/output, rewards, tree."""
    rid = str(rollout["rollout_id"])
    reward = rollout.get("reward")
    summary = (
        f"<code>{esc(rid[:16])}</code> {status_badge(rollout.get('status'))} "
        f'<span class="muted">task</span> {esc(rollout.get("task_id"))} '
        f'<span class="muted">group</span> {esc(rollout.get("group_id"))} '
        f'<span class="muted">reward</span> <b>{esc(fmt(reward)) if reward is not None else "none"}</b> '
        f'<span class="muted">· {esc(fmt(rollout.get("duration_ms")))} ms · {esc(why)}</span>'
    )
    facts = [("rollout id", f"<code>{esc(rid)}</code>")]
    if rollout.get("error"):
        facts.append(("error", f'<span class="err-text">{esc(rollout["error"])}</span>'))
    facts.append(
        (
            "calls",
            esc(
                f"{rollout.get('n_llm_calls', 0)} LLM, {rollout.get('n_tool_calls', 0)} tool "
                f"({rollout.get('n_tool_errors', 0)} failed)"
            ),
        )
    )
    facts_html = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts)
    rewards = data.get("rewards", [])
    reward_table = (
        table(
            [
                ("name", "reward"),
                ("step_index", "step"),
                ("value", "value"),
                ("source", "source"),
                ("plugin", "plugin"),
                ("reason", "reason"),
                ("error", "error"),
            ],
            rewards,
            numeric=("value", "step_index"),
            css="data compact",
        )
        if rewards
        else '<p class="muted">no rewards yet (agent-rl score)</p>'
    )
    tree = TraceRenderer(data).tree()
    return (
        f'<details class="trace" id="{esc(anchor_id(rid))}"><summary>{summary}</summary>'
        f'<div class="trace-body"><dl class="facts">{facts_html}</dl>'
        f"<h4>Rewards</h4>{reward_table}<h4>Steps</h4>{tree}</div></details>"
    )
