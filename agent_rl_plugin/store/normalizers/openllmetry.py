"""The ``openllmetry`` normaliser: OpenLLMetry / Traceloop span keys -> GenAI keys.

Attribute names follow ``opentelemetry-semantic-conventions-ai`` (``SpanAttributes``, 0.5.1) and
the ``traceloop-sdk`` decorators (0.62.4: ``@workflow``, ``@task``, ``@agent``, ``@tool``). The
LLM spans of OpenLLMetry's instrumentations carry GenAI names: current ones since about 0.50
(handled by nothing, they are canonical), the deprecated flattened ``gen_ai.prompt.N.*`` /
``gen_ai.completion.N.*`` before (handled by the ``genai`` normaliser, which runs after this
one). Keys already present are never overwritten.

=====================================  ========================================================
OpenLLMetry / Traceloop                canonical key
=====================================  ========================================================
``traceloop.span.kind`` workflow,      ``gen_ai.operation.name`` ``invoke_workflow`` (a
task                                   parentless one is a rollout root)
``traceloop.span.kind`` agent          ``invoke_agent``
``traceloop.span.kind`` tool           ``execute_tool``
``traceloop.entity.name``              ``gen_ai.agent.name`` (agent), ``gen_ai.tool.name`` (tool)
``traceloop.entity.input``             ``gen_ai.tool.call.arguments`` (tool: the ``kwargs`` of
                                       the recorded ``{"args", "kwargs"}`` when there are no
                                       positional ones, the ``args`` when there are no
                                       keyword ones), else ``agent_rl.input``
``traceloop.entity.output``            ``gen_ai.tool.call.result`` (tool), else
                                       ``agent_rl.output``
``llm.request.type``                   ``gen_ai.operation.name`` (via the ``genai`` normaliser)
``llm.usage.total_tokens``,            the missing side of ``gen_ai.usage.input_tokens`` /
``gen_ai.usage.total_tokens``          ``output_tokens`` (total minus the other side)
=====================================  ========================================================
"""

from __future__ import annotations

from typing import Any

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store.normalizers._util import (
    AGENT,
    LLM,
    OPERATION_OF_KIND,
    TOOL,
    WORKFLOW,
    as_text,
    dumps,
    fill_tokens,
    json_text,
    load_json,
    set_missing,
    stated_kind,
)

SPAN_KIND = "traceloop.span.kind"
ENTITY_NAME = "traceloop.entity.name"
ENTITY_INPUT = "traceloop.entity.input"
ENTITY_OUTPUT = "traceloop.entity.output"
LLM_USAGE_TOTAL_TOKENS = "llm.usage.total_tokens"
GEN_AI_USAGE_TOTAL_TOKENS = "gen_ai.usage.total_tokens"
LEGACY_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
LEGACY_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"

KINDS = {"workflow": WORKFLOW, "task": WORKFLOW, "agent": AGENT, "tool": TOOL}
_TRIGGERS = (SPAN_KIND, LLM_USAGE_TOTAL_TOKENS, GEN_AI_USAGE_TOTAL_TOKENS)


def tool_arguments(value: Any) -> str | None:
    """Traceloop's recorded call ``{"args": [...], "kwargs": {...}}`` as the tool's arguments."""
    parsed = load_json(value)
    if isinstance(parsed, dict) and set(parsed) == {"args", "kwargs"}:
        args, kwargs = parsed["args"], parsed["kwargs"]
        if not args and isinstance(kwargs, dict):
            return dumps(kwargs)
        if not kwargs and isinstance(args, list):
            return dumps(args)
    return json_text(value)


def normalize_openllmetry(attributes: dict[str, Any], span_name: str) -> None:
    """Add canonical keys translated from Traceloop ones, in place (see the module table)."""
    for key in _TRIGGERS:
        if key in attributes:
            break
    else:
        return
    kind = stated_kind(attributes)
    if kind is None:
        own = attributes.get(SPAN_KIND)
        kind = KINDS.get(own.lower()) if isinstance(own, str) else None
        if kind is not None:
            attributes[sc.GEN_AI_OPERATION_NAME] = OPERATION_OF_KIND[kind]
    name = as_text(attributes.get(ENTITY_NAME))
    if kind == TOOL:
        set_missing(attributes, sc.GEN_AI_TOOL_NAME, name)
        if sc.GEN_AI_TOOL_CALL_ARGUMENTS not in attributes:
            set_missing(attributes, sc.GEN_AI_TOOL_CALL_ARGUMENTS, tool_arguments(attributes.get(ENTITY_INPUT)))
        if sc.GEN_AI_TOOL_CALL_RESULT not in attributes:
            set_missing(attributes, sc.GEN_AI_TOOL_CALL_RESULT, json_text(attributes.get(ENTITY_OUTPUT)))
    elif kind in (AGENT, WORKFLOW):
        if kind == AGENT:
            set_missing(attributes, sc.GEN_AI_AGENT_NAME, name)
        if sc.ROLLOUT_INPUT not in attributes:
            set_missing(attributes, sc.ROLLOUT_INPUT, json_text(attributes.get(ENTITY_INPUT)))
        if sc.ROLLOUT_OUTPUT not in attributes:
            set_missing(attributes, sc.ROLLOUT_OUTPUT, json_text(attributes.get(ENTITY_OUTPUT)))
    total = attributes.get(LLM_USAGE_TOTAL_TOKENS)
    if total is None:
        total = attributes.get(GEN_AI_USAGE_TOTAL_TOKENS)
    if total is not None and kind in (LLM, None):
        fill_tokens(attributes, attributes.get(LEGACY_PROMPT_TOKENS), attributes.get(LEGACY_COMPLETION_TOKENS), total)


#: Without any of these keys the normaliser does nothing (the store's converter then skips it).
normalize_openllmetry.triggers = frozenset(_TRIGGERS)  # type: ignore[attr-defined]
