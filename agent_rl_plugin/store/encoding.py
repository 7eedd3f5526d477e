"""JSON encoding of span attributes for the store: fast for the common case, safe for the rest.

Contract:

* :func:`fast_encode` is the hot path: one C encoder call, compact separators, no NaN.
* :func:`encode_json` never raises: values JSON cannot encode become their safe ``repr``
  (bytes as UTF-8 text or ``<N bytes>``, sets as lists), NaN/inf as ``"nan"``/``"inf"``/``"-inf"``,
  cycles and deep nesting as repr.
* :func:`encode_attributes` additionally cuts string values longer than ``max_size`` with the
  marker of :func:`agent_rl_plugin.serialize.truncate`; a value already cut that way is kept.
* :func:`clean_text` replaces lone surrogates (which UTF-8 cannot hold) by U+FFFD.
"""

from __future__ import annotations

import json
import math
import re
from json.encoder import encode_basestring
from typing import Any, Callable, Mapping

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.serialize import safe_repr, truncate

c_make_encoder: Callable[..., Any] | None
try:  # the C accelerator of the json module (CPython has it)
    from _json import make_encoder as c_make_encoder
except ImportError:  # pragma: no cover
    c_make_encoder = None


def _default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return f"<{len(value)} bytes>"
    return safe_repr(value)


_iterencode = (
    c_make_encoder(None, _default, encode_basestring, None, ":", ",", False, False, False)
    if c_make_encoder is not None
    else None
)
#: The C encoder :func:`fast_encode` calls (``"".join(c_iterencode(value, 0))`` is its result for
#: a dict or list), for callers that inline the hot path; ``None`` without the C accelerator.
c_iterencode: Callable[[Any, int], Any] | None = _iterencode
_py_encode = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, default=_default, check_circular=False, separators=(",", ":")
).encode


def fast_encode(value: Any) -> str:
    """Compact JSON of a dict or list, NaN refused (``ValueError``), unknown objects as repr.

    Reuses one C encoder (``json.dumps`` with options builds a new one per call)."""
    if _iterencode is None or isinstance(value, str):  # pragma: no cover - C accelerator missing
        return _py_encode(value)
    return "".join(_iterencode(value, 0))


def _sanitize(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy: non-finite floats as text, cycles and deep nesting as repr."""
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if depth > 20:
        return safe_repr(value)
    if isinstance(value, Mapping):
        return {str(k): _sanitize(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_sanitize(v, depth + 1) for v in value]
    return _default(value)


def encode_json(value: Any) -> str:
    """JSON text for ``value``; never raises (see the module contract)."""
    try:
        return fast_encode(value)
    except (ValueError, TypeError, RecursionError, OverflowError):
        try:
            return fast_encode(_sanitize(value))
        except Exception:
            return fast_encode(safe_repr(value))


_MARKER = re.compile(re.escape(sc.TRUNCATION_MARKER).replace(re.escape("{original}"), r"\d+") + r"\Z")


def _too_long(value: Any, max_size: int) -> bool:
    """A string over ``max_size`` characters not already cut by
    :func:`~agent_rl_plugin.serialize.truncate` (a cut value keeps its marker and original size)."""
    if not isinstance(value, str) or len(value) <= max_size:
        return False
    return not (len(value) <= max_size + 48 and _MARKER.search(value[-48:]) is not None)


def encode_attributes(attributes: Mapping[str, Any], max_size: int | None) -> str:
    """One JSON object for ``attributes``; string values over ``max_size`` are cut."""
    text = encode_json(attributes)
    if max_size is not None and len(text) > max_size:
        cut: dict[str, Any] = {}
        changed = False
        for key, value in attributes.items():
            if _too_long(value, max_size):
                value, changed = truncate(value, max_size), True
            elif isinstance(value, (list, tuple)) and any(_too_long(v, max_size) for v in value):
                value = [truncate(v, max_size) if _too_long(v, max_size) else v for v in value]
                changed = True
            cut[key] = value
        if changed:
            text = encode_json(cut)
    return text


def clean_text(value: Any) -> Any:
    """``value`` with characters UTF-8 cannot encode (lone surrogates) replaced by U+FFFD."""
    if isinstance(value, str):
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in value)
    return value
