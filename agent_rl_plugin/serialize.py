"""Turning arbitrary Python values into safe OTel attribute values.

Contract: :func:`to_json_attribute` never raises. Values JSON cannot encode are stored as their
``repr`` (and if even ``repr`` raises, as ``<unreprable TYPE>``); strings longer than
``max_size`` characters are cut and end with ``...[truncated N bytes]`` where N is the original
size in UTF-8 bytes, so a reader always knows a value was cut and by how much.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agent_rl_plugin.semconv import TRUNCATION_MARKER


def safe_repr(value: Any) -> str:
    """``repr(value)``, or a placeholder when ``__repr__`` itself raises."""
    try:
        return repr(value)
    except Exception:
        return f"<unreprable {type(value).__name__}>"


def _default(value: Any) -> Any:
    if hasattr(value, "model_dump") and callable(value.model_dump):  # pydantic models
        try:
            return value.model_dump(mode="json")
        except Exception:
            pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return dataclasses.asdict(value)
        except Exception:
            pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return safe_repr(value)


# What ``json.dumps(value, default=_default, ensure_ascii=False, allow_nan=True)`` builds on
# every call, built once (``encode`` keeps no state between calls, so sharing it is safe).
_ENCODER = json.JSONEncoder(default=_default, ensure_ascii=False, allow_nan=True)
_encode = _ENCODER.encode
_encode_str = json.encoder.encode_basestring  # what the encoder uses for str (ensure_ascii=False)


def to_json(value: Any) -> str:
    """JSON text for ``value``; unknown objects become their repr. Never raises."""
    try:
        cls = type(value)
        if cls is str:  # the common cases, exactly as json.dumps writes them
            return _encode_str(value)
        if cls is int:
            return int.__repr__(value)
        return _encode(value)
    except Exception:  # circular references, __repr__ errors deep inside, ...
        return json.dumps(safe_repr(value), ensure_ascii=False)


def truncate(text: str, max_size: int) -> str:
    """``text`` cut to at most ``max_size`` characters plus a marker naming the original size."""
    if len(text) <= max_size:
        return text
    original = len(text.encode("utf-8", errors="replace"))
    return text[:max_size] + TRUNCATION_MARKER.format(original=original)


def to_json_attribute(value: Any, max_size: int) -> str:
    """JSON text for ``value`` (a ``str`` stays as is), cut to ``max_size``."""
    text = value if isinstance(value, str) else to_json(value)
    return truncate(text, max_size)


def to_attribute_value(value: Any, max_size: int) -> str | bool | int | float:
    """A primitive OTel attribute value: bool/int/float kept, everything else JSON text."""
    if isinstance(value, (bool, int, float)):
        return value
    return to_json_attribute(value, max_size)
