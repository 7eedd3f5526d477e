"""Built-in plugin: mask secrets in captured content, and drop content when capture is off.

Implements ``agent_rl_transform_attributes``. With ``config.redact`` (the default), every
string attribute value has matches of ``config.redaction_patterns`` replaced by
``[REDACTED]``. With ``config.capture_content=False``, message, argument and result attributes
(ours and those of GenAI/OpenInference/OpenLLMetry instrumentations) are removed.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from agent_rl_plugin import semconv
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl

REDACTED = "[REDACTED]"

CONTENT_KEYS = frozenset(
    {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
        semconv.ROLLOUT_INPUT,
        semconv.ROLLOUT_OUTPUT,
        semconv.REASONING,
        semconv.EVENT_CONTENT,
        "input.value",
        "output.value",
        "traceloop.entity.input",
        "traceloop.entity.output",
    }
)
CONTENT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.")


@lru_cache(maxsize=16)
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def redact_text(text: str, patterns: tuple[str, ...]) -> str:
    """``text`` with every match of ``patterns`` replaced by ``[REDACTED]``."""
    regex = _compiled(patterns)
    return text if regex is None else regex.sub(REDACTED, text)


@hookimpl(trylast=True)
def agent_rl_transform_attributes(attributes: dict[str, Any], span_name: str, config: RLConfig) -> None:
    if not config.capture_content:
        for key in [k for k in attributes if k in CONTENT_KEYS or k.startswith(CONTENT_PREFIXES)]:
            del attributes[key]
    if not config.redact:
        return
    regex = _compiled(tuple(config.redaction_patterns))
    if regex is None:
        return
    for key, value in attributes.items():
        if isinstance(value, str) and len(value) >= 16:
            redacted = regex.sub(REDACTED, value)
            if redacted is not value and redacted != value:
                attributes[key] = redacted
