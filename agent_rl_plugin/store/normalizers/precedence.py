"""The order the built-in normalisers run in, which is their precedence.

Every normaliser only *adds* keys that are still missing, so what runs first wins. Per key:

1. ``agent_rl.*`` keys already on the span (this package's own instrumentation);
2. current GenAI keys already on the span (``gen_ai.input.messages``, ``gen_ai.usage.*``, ...):
   the canonical vocabulary the views read, never rewritten;
3. OpenInference (``openinference``);
4. OpenLLMetry / Traceloop (``openllmetry``), then the deprecated GenAI names OpenLLMetry and
   older GenAI instrumentations write (``genai``: ``gen_ai.system``, flattened
   ``gen_ai.prompt.N.*``, ``gen_ai.usage.prompt_tokens``, ``llm.request.type``).

One rule runs before them all (``covered``): a span that ``agent_rl.covered`` marks (another
tracer's span started inside a captured LLM client call or under an LLM span: the same model
call, recorded by its ``chat`` span already) is a client request: its ``gen_ai.operation.name``
moves to ``agent_rl.covered.operation`` and becomes ``client_request``, so it is never a second
row of ``llm_calls``. Other exporters see that span as its tracer made it (plus the marker).

The *kind* of a span (LLM call, tool call, agent, workflow) is decided once, by the first of
these that states one (``agent_rl.span.kind``, ``gen_ai.operation.name``,
``openinference.span.kind``, ``traceloop.span.kind``, ``llm.request.type``); a lower convention
then fills missing keys as for that kind, never restating it.
"""

from __future__ import annotations

from typing import Any, Callable

from agent_rl_plugin.semconv import COVERED, COVERED_OPERATION, GEN_AI_OPERATION_NAME, OP_CLIENT_REQUEST, SPAN_KIND
from agent_rl_plugin.store.normalizers.genai import normalize_genai
from agent_rl_plugin.store.normalizers.openinference import normalize_openinference
from agent_rl_plugin.store.normalizers.openllmetry import normalize_openllmetry

Normalizer = Callable[[dict[str, Any], str], None]


def normalize_covered(attributes: dict[str, Any], span_name: str) -> None:
    """A span marked ``agent_rl.covered`` becomes a client request (see the module docstring)."""
    if attributes.get(COVERED) is None or attributes.get(SPAN_KIND) == OP_CLIENT_REQUEST:
        return
    operation = attributes.get(GEN_AI_OPERATION_NAME)
    if operation is not None and COVERED_OPERATION not in attributes:
        attributes[COVERED_OPERATION] = operation
    attributes[GEN_AI_OPERATION_NAME] = OP_CLIENT_REQUEST
    attributes[SPAN_KIND] = OP_CLIENT_REQUEST


normalize_covered.triggers = frozenset({COVERED})  # type: ignore[attr-defined]  # see TRIGGERS_ATTRIBUTE


#: A normaliser may carry a ``triggers`` attribute: a frozenset of attribute keys without any of
#: which it does nothing. :class:`~agent_rl_plugin.store.rows.SpanConverter` skips a run of such
#: normalisers at once when a span holds none of their keys (every built-in one has it).
TRIGGERS_ATTRIBUTE = "triggers"

#: ``(name, normalize)`` in precedence order (first wins), as registered with
#: ``agent_rl_register_normalizers``.
BUILTIN_NORMALIZERS: tuple[tuple[str, Normalizer], ...] = (
    ("covered", normalize_covered),
    ("openinference", normalize_openinference),
    ("openllmetry", normalize_openllmetry),
    ("genai", normalize_genai),
)


def normalize_all(attributes: dict[str, Any], span_name: str) -> None:
    """Apply every built-in normaliser in precedence order (what the store does), in place."""
    for _, normalize in BUILTIN_NORMALIZERS:
        normalize(attributes, span_name)
