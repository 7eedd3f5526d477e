"""Helpers shared by the normalisers: flattened-key parsing, JSON text, numbers, span kinds.

Every helper tolerates any attribute value (wrong types, bad JSON) and never raises on data.
"""

from __future__ import annotations

import json
from typing import Any

from agent_rl_plugin import semconv as sc

# Kinds of span as the normalisers reason about them.
LLM = "llm"
TOOL = "tool"
AGENT = "agent"
WORKFLOW = "workflow"
OTHER = "other"

#: ``gen_ai.operation.name`` written for each kind a foreign convention states.
OPERATION_OF_KIND = {
    LLM: sc.OP_CHAT,
    TOOL: sc.OP_EXECUTE_TOOL,
    AGENT: sc.OP_INVOKE_AGENT,
    WORKFLOW: "invoke_workflow",  # GenAI semconv value for a workflow (framework) span
}
_KIND_OF_OPERATION = {
    sc.OP_CHAT: LLM,
    sc.OP_TEXT_COMPLETION: LLM,
    sc.OP_GENERATE_CONTENT: LLM,
    sc.OP_EXECUTE_TOOL: TOOL,
    sc.OP_INVOKE_AGENT: AGENT,
    "invoke_workflow": WORKFLOW,
}
_KIND_OF_SPAN_KIND = {
    sc.SPAN_KIND_LLM: LLM,
    sc.SPAN_KIND_TOOL: TOOL,
    sc.SPAN_KIND_AGENT: AGENT,
    sc.SPAN_KIND_ROLLOUT: WORKFLOW,
}

TEXT_PLAIN = "text/plain"


def stated_kind(attributes: dict[str, Any]) -> str | None:
    """The kind a higher-precedence convention already gave the span: ``agent_rl.span.kind``
    first, then ``gen_ai.operation.name`` (an unknown value is :data:`OTHER`); ``None`` when
    neither is present, so the convention being translated may state it."""
    kind = attributes.get(sc.SPAN_KIND)
    if kind is not None:
        return _KIND_OF_SPAN_KIND.get(kind, OTHER) if isinstance(kind, str) else OTHER
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    if operation is not None:
        return _KIND_OF_OPERATION.get(operation, OTHER) if isinstance(operation, str) else OTHER
    return None


def dumps(value: Any) -> str:
    """JSON text of any value (tuples as lists, unknown objects as ``str``)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def json_text(value: Any, mime_type: Any = None) -> str | None:
    """``value`` as JSON text, the form the views' content columns hold.

    A string declared ``text/plain`` is encoded as a JSON string; any other string is kept when
    it is valid JSON and else encoded as a JSON string (nothing is lost either way); a
    non-string value is encoded."""
    if value is None:
        return None
    if isinstance(value, str):
        if mime_type == TEXT_PLAIN:
            return dumps(value)
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            return dumps(value)
        return value
    return dumps(list(value) if isinstance(value, tuple) else value)


def load_json(value: Any) -> Any:
    """``value`` parsed when it is a JSON string, else ``None``."""
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def as_int(value: Any) -> int | None:
    """An integer token count from an int, a whole float or a numeric string; else ``None``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                return None
            return int(number) if number.is_integer() else None
    return None


def as_text(value: Any) -> str | None:
    """A string attribute value as itself, any other non-``None`` value as its ``str``."""
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def set_missing(attributes: dict[str, Any], key: str, value: Any) -> None:
    """Add ``key`` when it is absent and ``value`` is not ``None`` (present keys always win)."""
    if value is not None and key not in attributes:
        attributes[key] = value


def fill_tokens(attributes: dict[str, Any], input_tokens: Any, output_tokens: Any, total_tokens: Any = None) -> None:
    """Add ``gen_ai.usage.input_tokens`` / ``output_tokens`` when missing, from these counts;
    a side missing everywhere is the total minus the other side (when that is not negative)."""
    have_in = sc.GEN_AI_USAGE_INPUT_TOKENS in attributes
    have_out = sc.GEN_AI_USAGE_OUTPUT_TOKENS in attributes
    if have_in and have_out:
        return
    n_in = as_int(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)) if have_in else as_int(input_tokens)
    n_out = as_int(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)) if have_out else as_int(output_tokens)
    total = as_int(total_tokens)
    if total is not None:
        if n_in is None and n_out is not None and total >= n_out:
            n_in = total - n_out
        elif n_out is None and n_in is not None and total >= n_in:
            n_out = total - n_in
    if not have_in:
        set_missing(attributes, sc.GEN_AI_USAGE_INPUT_TOKENS, n_in)
    if not have_out:
        set_missing(attributes, sc.GEN_AI_USAGE_OUTPUT_TOKENS, n_out)


def unflatten(attributes: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The keys under ``prefix`` as a tree: ``{"0": {"message": {"role": ...}}}`` for
    ``prefix + "0.message.role"``. A key that would replace a subtree (or go under a leaf) is
    left out of the tree (it stays in the span's attributes)."""
    root: dict[str, Any] = {}
    start = len(prefix)
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        parts = key[start:].split(".")
        node = root
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                break
            node = child
        else:
            if not isinstance(node.get(parts[-1]), dict):
                node[parts[-1]] = value
    return root


def indexed(node: Any) -> list[Any]:
    """The values of ``node`` under integer keys, in index order (gaps skipped)."""
    if not isinstance(node, dict):
        return []
    keys = [key for key in node if key.isdigit()]
    keys.sort(key=int)
    return [node[key] for key in keys]


def sub(node: Any, *path: str) -> Any:
    """``node[path[0]][path[1]]...``, or ``None`` when a step is missing or not a dict."""
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node
