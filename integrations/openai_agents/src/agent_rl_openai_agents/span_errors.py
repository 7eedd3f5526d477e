"""The Agents SDK's span errors (``SpanError``: ``{"message": ..., "data": {...}}``) as text.

Pure functions, no SDK import; each accepts ``None`` / empty (no error), a ``SpanError`` dict,
or any other value (its ``str``). What the processor records for a failed span: the error kind
(:func:`error_kind`: the ``message``, else ``"error"``) with the detail (:func:`error_detail`:
``data["error"]`` or ``data``, as JSON when not a string); an event's ``error`` field is
:func:`error_text` (``"message: detail"``).
"""

from __future__ import annotations

import json
from typing import Any

from agent_rl_openai_agents.convert import as_plain

__all__ = ["error_text", "error_kind", "error_detail"]


def error_text(error: Any) -> str | None:
    """'message: detail' of an SDK ``SpanError`` (``None`` when there is none)."""
    if not error:
        return None
    if isinstance(error, dict):
        message = str(error.get("message") or "error")
        data = error.get("data")
        detail = data.get("error") if isinstance(data, dict) else data
        return f"{message}: {detail}" if detail not in (None, "") else message
    return str(error)


def error_kind(error: Any) -> str:
    """The error's ``message`` (``"error"`` when it has none or is not a ``SpanError``)."""
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return "error"


def error_detail(error: Any) -> str | None:
    """The error's detail (``data["error"]``, else ``data``; JSON when not a string), ``None``
    when it has none or is not a ``SpanError``."""
    if isinstance(error, dict):
        data = error.get("data")
        detail = data.get("error") if isinstance(data, dict) else data
        if detail in (None, ""):
            return None
        return detail if isinstance(detail, str) else json.dumps(as_plain(detail), default=str)
    return None
