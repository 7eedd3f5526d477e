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
from agent_rl_plugin.config import DEFAULT_REDACTION_PATTERNS, RLConfig
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


def _may_match_defaults(text: str) -> bool:
    """False only when no match of :data:`DEFAULT_REDACTION_PATTERNS` can be in ``text``."""
    return (
        "sk-" in text
        or "AKIA" in text
        or "gh" in text
        or "xox" in text
        or "AIza" in text
        or "bearer" in text.lower()
    )


@hookimpl(trylast=True)
def agent_rl_transform_attributes(attributes: dict[str, Any], span_name: str, config: RLConfig) -> None:
    if not config.capture_content:
        for key in [k for k in attributes if k in CONTENT_KEYS or k.startswith(CONTENT_PREFIXES)]:
            del attributes[key]
    if not config.redact:
        return
    patterns = tuple(config.redaction_patterns)
    regex = _compiled(patterns)
    if regex is None:
        return
    if patterns == DEFAULT_REDACTION_PATTERNS:
        # Fast path for the default patterns: every match of them contains one of a few
        # literals ("sk-", "AKIA", "gh", "xox", "AIza", or "bearer" in any case) and none can
        # span a NUL, so one scan of the candidate strings joined tells whether any can match.
        # Nothing to redact (the common case): no regex runs.
        candidates = [v for v in attributes.values() if isinstance(v, str) and len(v) >= 16]
        if not candidates or not _may_match_defaults("\x00".join(candidates)):
            return
    for key, value in attributes.items():
        if isinstance(value, str) and len(value) >= 16:
            redacted = regex.sub(REDACTED, value)
            if redacted is not value and redacted != value:
                attributes[key] = redacted
