"""Small span helpers shared by the instrumentation layer.

Contract:

* Nothing here raises into agent code: every helper that touches a span, serialises a value or
  calls a hook catches its own failures and reports them through :func:`log_failure`, which logs
  each distinct failure site once (with traceback) and later ones at debug level.
* :func:`error_type` names an exception class the way the OTel SDK names ``exception.type``:
  ``module.QualName``, or just ``QualName`` for builtins (``ValueError``,
  ``asyncio.exceptions.CancelledError``).
* Values are stored through :mod:`agent_rl_plugin.serialize`: :func:`to_json_text` for JSON
  content (always valid JSON before truncation, strings quoted), :func:`to_attr` for free text.
* :func:`record_error` marks a span failed: status ERROR, ``error.type``, an ``exception`` event,
  and ``agent_rl.cancelled=true`` for :class:`asyncio.CancelledError`. ``GeneratorExit`` is not a
  failure (a consumer closed a stream early) and is never recorded as one.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, cast

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from agent_rl_plugin import tracing
from agent_rl_plugin.semconv import CANCELLED, ERROR_TYPE
from agent_rl_plugin.serialize import _ENCODER, to_json, to_json_attribute, truncate

if TYPE_CHECKING:
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.trace import Span as SDKSpan

logger = logging.getLogger("agent_rl_plugin.instrumentation")

_logged: set[str] = set()
_logged_lock = threading.Lock()


def log_failure(where: str) -> None:
    """Log the exception being handled; the first time per ``where`` as a warning, then debug.

    Call only from inside an ``except`` block. Never raises.
    """
    try:
        with _logged_lock:
            first = where not in _logged
            _logged.add(where)
        if first:
            logger.warning("agent-rl: %s failed; the agent is unaffected", where, exc_info=True)
        else:
            logger.debug("agent-rl: %s failed again", where, exc_info=True)
    except Exception:  # pragma: no cover - logging itself broken
        pass


def error_type(exc: BaseException) -> str:
    """``module.QualName`` of the exception's class (``QualName`` alone for builtins)."""
    cls = type(exc)
    module = cls.__module__
    if not module or module == "builtins":
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def is_cancellation(exc: BaseException | None) -> bool:
    """True for :class:`asyncio.CancelledError` (and subclasses)."""
    asyncio = sys.modules.get("asyncio")  # not imported: no task was cancelled
    return asyncio is not None and isinstance(exc, asyncio.CancelledError)


def record_error(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc``: status ERROR, ``error.type``, exception event.

    Never raises."""
    if isinstance(exc, GeneratorExit):
        return
    try:
        name = error_type(exc)
        span.set_attribute(ERROR_TYPE, name)
        if is_cancellation(exc):
            span.set_attribute(CANCELLED, True)
        span.record_exception(exc, escaped=True)
        message = _safe_str(exc)
        span.set_status(Status(StatusCode.ERROR, f"{name}: {message}" if message else name))
    except Exception:
        log_failure("recording an exception on a span")


def record_error_text(span: Span, kind: str, message: str | None = None) -> None:
    """Mark ``span`` failed by a described error (no exception object). Never raises."""
    try:
        span.set_attribute(ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, f"{kind}: {message}" if message else kind))
    except Exception:
        log_failure("recording an error on a span")


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return ""


def max_size() -> int:
    """The configured longest attribute value (configures from the environment if needed)."""
    config = tracing.STATE.config or tracing.current_config()
    return config.max_attribute_size


def capture_content() -> bool:
    """Whether message contents, arguments and results are recorded."""
    config = tracing.STATE.config or tracing.current_config()
    return config.capture_content


def to_attr(value: Any) -> str:
    """Text attributes (reasoning, reasons, event content): a str as is, anything else as
    JSON; cut to the configured size. Never raises."""
    try:
        return to_json_attribute(value, max_size())
    except Exception:
        log_failure("serialising a value")
        return "<unserialisable>"


def _shared_encoder() -> Callable[[Any, int], list[str]] | None:
    """The C encoder ``json.JSONEncoder.encode`` builds on every call for containers, built
    once with the settings of :func:`agent_rl_plugin.serialize.to_json` (``ensure_ascii=False``,
    ``allow_nan=True``, the same ``default``), but without the circular-reference check (its
    ``markers`` dict would be shared between threads). ``None`` without the C accelerator."""
    try:
        from json import encoder as json_encoder

        c_make_encoder = getattr(json_encoder, "c_make_encoder", None)  # not in the stubs
        encode_basestring = json_encoder.encode_basestring
        default = getattr(_ENCODER, "default", None)
        if c_make_encoder is None or not callable(default):
            return None
        return cast(
            "Callable[[Any, int], list[str]]",
            c_make_encoder(None, default, encode_basestring, None, ": ", ", ", False, False, True),
        )
    except Exception:
        return None


_ITERENCODE = _shared_encoder()


def fast_json(value: Any) -> str:
    """Exactly :func:`agent_rl_plugin.serialize.to_json` (same text for every value), faster
    for dicts and lists: they go through one shared C encoder instead of a new one per call.
    Anything it cannot encode (a circular reference: a ``RecursionError`` here, a ``default``
    that raises, ...) goes through ``to_json``, which gives its usual fallback. Never raises."""
    cls = type(value)
    if (cls is dict or cls is list) and _ITERENCODE is not None:
        try:
            return "".join(_ITERENCODE(value, 0))
        except Exception:  # RecursionError included: to_json names the circular reference
            pass
    return to_json(value)


def to_json_text(value: Any) -> str:
    """JSON attributes (inputs, outputs, arguments, results, messages, metadata): always JSON
    text, a str included (``"HI"`` is stored as ``\"HI\"``), cut to the configured size.
    Never raises."""
    try:
        text = fast_json(value)
        config = tracing.STATE.config
        limit = config.max_attribute_size if config is not None else max_size()
        return text if len(text) <= limit else truncate(text, limit)
    except Exception:
        log_failure("serialising a value")
        return "<unserialisable>"


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    """Set attributes on ``span``, skipping ``None`` values. Never raises."""
    try:
        items = {k: v for k, v in attributes.items() if v is not None}
        if not _set_clean(span, items):
            span.set_attributes(items)
    except Exception:
        log_failure("setting span attributes")


def set_clean_attributes(span: Span, items: dict[str, Any]) -> None:
    """Set attributes none of whose values is ``None`` (the caller guarantees it): what
    :func:`set_attributes` does, without its filter. Never raises."""
    try:
        if not _set_clean(span, items):
            span.set_attributes(items)
    except Exception:
        log_failure("setting span attributes")


def _sdk_span_internals() -> tuple[type, type] | None:
    """(SDK span class, BoundedAttributes) when the SDK's internals are the ones
    :func:`_set_clean` was written against, else ``None`` (then the public API is used)."""
    try:
        from opentelemetry.attributes import BoundedAttributes
        from opentelemetry.sdk.trace import _Span

        probe = BoundedAttributes(None, None, immutable=False)
        if not all(hasattr(probe, a) for a in ("_dict", "_lock", "_immutable", "maxlen", "max_value_len")):
            return None
        return _Span, BoundedAttributes
    except Exception:
        return None


_SDK = _sdk_span_internals()
_PLAIN = (str, bool, int, float)


def _set_clean(span: Span, items: dict[str, Any]) -> bool:
    """Store already-valid attributes (non-empty str keys; str/bool/int/float values within
    the span's limits) straight into an SDK span's attribute mapping, under the span's and the
    mapping's locks, as ``Span.set_attributes`` would store them after validating each value.
    Returns False, having done nothing, for anything else (the caller then uses the API)."""
    if _SDK is None or type(span) is not _SDK[0] or not items:
        return False
    sdk_span = cast("SDKSpan", span)  # its type was checked just above
    bounded = cast("BoundedAttributes", sdk_span._attributes)  # noqa: SLF001  # its type is checked below
    if (
        type(bounded) is not _SDK[1]
        or bounded.maxlen is not None
        and (
            len(bounded._dict) + len(items) > bounded.maxlen  # noqa: SLF001
        )
    ):
        return False
    limit = bounded.max_value_len
    for key, value in items.items():
        if type(key) is not str or not key or type(value) not in _PLAIN:
            return False
        if limit is not None and type(value) is str and len(value) > limit:
            return False
    with sdk_span._lock:  # noqa: SLF001
        if sdk_span._end_time is not None or bounded._immutable:  # noqa: SLF001
            return False  # the API logs "Setting attribute on ended span."
        with bounded._lock:  # noqa: SLF001
            store = bounded._dict  # noqa: SLF001
            for key, value in items.items():
                if key in store:
                    del store[key]
                store[key] = value
    return True


def end_span(span: Span, end_time: int | None = None) -> None:
    """End ``span``. Never raises."""
    try:
        span.end(end_time=end_time)
    except Exception:
        log_failure("ending a span")


def current_recording_span() -> Span | None:
    """The current span if it is recording, else ``None``."""
    span = trace.get_current_span()
    return span if span.is_recording() else None
