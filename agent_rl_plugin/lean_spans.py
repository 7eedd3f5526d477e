"""Starting OpenTelemetry SDK spans for one tracer without the SDK's per-span generality.

``Tracer.start_span`` of the SDK looks the sampler, id generator, tracer configuration, span
limits and tracer metrics up on every span, asks the sampler, builds the span through three
constructors and re-validates every attribute. For a tracer whose answers cannot depend on the
span (a built-in always-on sampler, no tracer metrics), :class:`LeanSpanStarter` asks once and
then builds each span from a template: about a third of the SDK's time for the same span.

Contract:

* A span it starts is an SDK span of the tracer's own span class, field for field what
  ``tracer.start_span(name, attributes=attributes, start_time=start_time)`` would have made
  in the current context (the ids aside, drawn from the tracer's own id generator), started
  through the tracer's span processors in the same way (``on_start`` with the same arguments).
  It ends, and is read by processors and exporters, through the SDK's own code.
* That is checked, not assumed: :meth:`LeanSpanStarter.for_tracer` makes a root span and
  children of local and remote sampled parents both ways, in an empty context, with a copy of
  the tracer that has no span processor (nothing is exported), and compares every field, and
  every field of the ``ReadableSpan`` each becomes at its end. An SDK version whose spans carry a field it does not know, a sampler
  other than always-on (alone or parent-based with the default delegates), tracer metrics, or
  any difference makes it return ``None``: the caller then uses ``tracer.start_span``.
* :meth:`LeanSpanStarter.start` returns ``None`` (use the SDK) whenever the span could differ:
  the tracer disabled or its sampler or id generator replaced, a parent that is not sampled,
  carries a trace state, or has trace flags not checked. Attributes are stored as given only when every key is
  a non-empty ``str`` and every value a ``str``/``bool``/``int``/``float`` within the length
  limit, or a list/tuple of those (stored as a tuple); otherwise the SDK's validation runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import threading
from time import time_ns
from typing import Any, Callable, Iterator, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.util import BoundedList

#: Fields set for every span; every other field of a span is the same for all spans of a tracer.
PER_SPAN_FIELDS = frozenset(
    {"_name", "_context", "_parent", "_attributes", "_events", "_links", "_lock", "_start_time", "_end_time"}
)
#: The fields a span shares with every other span of its tracer, as the SDK versions we know
#: set them (1.34 to 1.45: ``_record_end_metrics`` came with tracer metrics).
SHARED_FIELDS = frozenset(
    {"_kind", "_instrumentation_info", "_instrumentation_scope", "_resource", "_status", "_sampler",
     "_trace_config", "_record_exception", "_set_status_on_exception", "_span_processor", "_limits",
     "_record_end_metrics"}
)  # fmt: skip

_new_tuple = tuple.__new__
_LOCK_TYPE = type(threading.Lock())
#: The sampled bit of W3C trace flags.
TRACE_FLAG_SAMPLED = 0x01
_MAX_TRACE_ID = 2**128 - 1
_MAX_SPAN_ID = 2**64 - 1
_PLAIN = (str, bool, int, float)
_PLAIN_TYPES = frozenset(_PLAIN)


def _plain_sequence(value: Any, limit: int | None) -> bool:
    """True when OTel would store ``value`` (a list or tuple) as a tuple of the same items."""
    kinds = set(map(type, value))
    if not kinds <= _PLAIN_TYPES:
        return False
    return str not in kinds or limit is None or all(type(v) is not str or len(v) <= limit for v in value)


def plain_attributes(attributes: dict[str, Any], limit: int | None) -> bool:
    """True when OTel's validation would store ``attributes`` unchanged (a list as a tuple of
    its items): non-empty ``str`` keys; ``str``/``bool``/``int``/``float`` values, or lists and
    tuples of those; no ``str`` longer than ``limit`` (``None``: no limit)."""
    for key, value in attributes.items():
        kind = type(value)
        if type(key) is not str or not key:
            return False
        if kind in _PLAIN:
            if limit is not None and kind is str and len(value) > limit:
                return False
        elif not ((kind is tuple or kind is list) and _plain_sequence(value, limit)):
            return False
    return True


def store_plain(store: dict[str, Any], attributes: dict[str, Any]) -> None:
    """Put attributes that passed :func:`plain_attributes` into an attribute dict as OTel would
    (a key set again moves to the end; a list becomes a tuple)."""
    for key, value in attributes.items():
        if key in store:
            del store[key]
        store[key] = tuple(value) if type(value) is list else value


def _always_on_sampler(sampler: Any) -> bool:
    """True for ALWAYS_ON, and for a parent-based sampler with an always-on root and the default
    delegates (sampled parent: on; parent not sampled: off)."""
    from opentelemetry.sdk.trace import sampling

    if sampler is sampling.ALWAYS_ON:
        return True
    if type(sampler) is not sampling.ParentBased:
        return False
    expected = {
        "_root": sampling.ALWAYS_ON,
        "_remote_parent_sampled": sampling.ALWAYS_ON,
        "_remote_parent_not_sampled": sampling.ALWAYS_OFF,
        "_local_parent_sampled": sampling.ALWAYS_ON,
        "_local_parent_not_sampled": sampling.ALWAYS_OFF,
    }
    return all(getattr(sampler, name, None) is value for name, value in expected.items())


class LeanSpanStarter:
    """Starts spans for one SDK tracer from a checked template (see the module's contract)."""

    def __init__(
        self, tracer: Any, span_class: type, template: dict[str, Any], root_context: Any, child_flags: dict[int, Any]
    ) -> None:
        self.tracer = tracer
        self.sampler = tracer.sampler
        self.id_generator = tracer.id_generator  # root spans' flags depend on it (1.45: random trace ids)
        self._template = template
        self._root_flags = root_context.trace_flags
        self._root_state = root_context.trace_state  # immutable: shared by every root span
        self._child_flags = child_flags
        limits = template["_limits"]
        self._max_attributes = limits.max_span_attributes
        self._max_length = limits.max_span_attribute_length
        self._max_events = limits.max_events
        self._max_links = limits.max_links
        self._span_class = span_class
        self._enabled = getattr(tracer, "_is_enabled", None)

    @classmethod
    def for_tracer(cls, tracer: Any) -> LeanSpanStarter | None:
        """A starter for ``tracer``, or ``None`` when its spans cannot be made this way. The
        checks run in an empty context (their root span is a root wherever this is called)."""
        token = otel_context.attach(otel_context.Context())
        try:
            return cls._checked(tracer)
        except Exception:
            return None
        finally:
            otel_context.detach(token)

    @classmethod
    def _checked(cls, tracer: Any) -> LeanSpanStarter | None:
        from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, Tracer

        if type(tracer) is not Tracer or not _always_on_sampler(tracer.sampler):
            return None
        metrics = getattr(tracer, "_tracer_metrics", None)
        if metrics is not None and type(metrics).__name__ != "NoOpTracerMetrics":
            return None
        enabled = getattr(tracer, "_is_enabled", None)
        if enabled is not None and not enabled():
            return None
        quiet = copy.copy(tracer)  # the same tracer without span processors: nothing leaves it
        quiet.span_processor = SynchronousMultiSpanProcessor()
        attributes: dict[str, Any] = {"k": "v", "n": 1, "seq": ["a", "b"]}
        sdk_root = quiet.start_span("lean check", attributes=dict(attributes))
        fields = vars(sdk_root)
        if not PER_SPAN_FIELDS <= fields.keys() or not fields.keys() <= PER_SPAN_FIELDS | SHARED_FIELDS:
            return None
        template = {k: v for k, v in fields.items() if k not in PER_SPAN_FIELDS}
        template["_span_processor"] = tracer.span_processor
        root_context = sdk_root.get_span_context()
        span_class = type(sdk_root)
        # Children of sampled parents, local and remote: ours, and others' (W3C's sampled flag
        # alone, or with the bits an SDK adds).
        child_flags: dict[int, Any] = {}
        pairs = []
        for flags in sorted({int(root_context.trace_flags), TRACE_FLAG_SAMPLED}):
            for remote in (False, True):
                parent = trace.SpanContext(root_context.trace_id, root_context.span_id, is_remote=remote,
                                           trace_flags=trace.TraceFlags(flags), trace_state=root_context.trace_state)  # fmt: skip
                with _current(parent):
                    sdk_child = quiet.start_span("lean check child", attributes=dict(attributes))
                made = sdk_child.get_span_context().trace_flags
                if child_flags.setdefault(flags, made) != made:
                    return None
                pairs.append((parent, sdk_child))
        probe = cls(quiet, span_class, {**template, "_span_processor": quiet.span_processor}, root_context, child_flags)
        checked: list[tuple[Any, Any]] = [(probe.start("lean check", dict(attributes)), sdk_root)]
        for parent, sdk_child in pairs:
            with _current(parent):
                checked.append((probe.start("lean check child", dict(attributes)), sdk_child))
        if not all(lean is not None and _same_span(lean, sdk) for lean, sdk in checked):
            return None
        for lean, sdk in checked:
            lean.end()
            sdk.end()
        if not all(_same_readable(lean, sdk) for lean, sdk in checked):
            return None
        return cls(tracer, span_class, template, root_context, child_flags)

    def start(self, name: str, attributes: dict[str, Any], start_time: int | None = None) -> Any | None:
        """Start a span as ``tracer.start_span(name, attributes=attributes,
        start_time=start_time)`` would in the current context, or return ``None`` when this span
        must be left to the SDK. ``attributes`` is taken over (not copied)."""
        tracer = self.tracer
        if (
            tracer.sampler is not self.sampler
            or tracer.id_generator is not self.id_generator
            or (self._enabled is not None and not self._enabled())
        ):
            return None
        current = _current_span()
        parent: Any = None if current is None else current.get_span_context()
        if parent is not None and parent.is_valid:
            if parent.trace_state or int(parent.trace_flags) not in self._child_flags:
                return None
            trace_id, flags, state = parent.trace_id, self._child_flags[int(parent.trace_flags)], parent.trace_state
        else:
            parent = None
            trace_id, flags, state = tracer.id_generator.generate_trace_id(), self._root_flags, self._root_state
        span_id = tracer.id_generator.generate_span_id()
        if 0 < trace_id <= _MAX_TRACE_ID and 0 < span_id <= _MAX_SPAN_ID:  # what SpanContext() would make
            context = _new_tuple(trace.SpanContext, (trace_id, span_id, False, flags, state, True))
        else:
            context = trace.SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags, trace_state=state)
        span: Any = object.__new__(self._span_class)
        fields = span.__dict__
        fields.update(self._template)
        fields["_resource"] = tracer.resource
        fields["_name"] = name
        fields["_context"] = context
        fields["_parent"] = parent
        fields["_lock"] = threading.Lock()
        limit = self._max_length
        if self._max_attributes is not None and len(attributes) > self._max_attributes:
            stored = BoundedAttributes(self._max_attributes, attributes, immutable=False, max_value_len=limit)
        elif plain_attributes(attributes, limit):
            stored = BoundedAttributes(self._max_attributes, None, immutable=False, max_value_len=limit)
            store_plain(stored._dict, attributes)  # noqa: SLF001
        else:
            stored = BoundedAttributes(self._max_attributes, attributes, immutable=False, max_value_len=limit)
        fields["_attributes"] = stored
        fields["_events"] = BoundedList(self._max_events)
        fields["_links"] = BoundedList(self._max_links)
        fields["_start_time"] = start_time if start_time is not None else time_ns()
        fields["_end_time"] = None
        span._span_processor.on_start(span, parent_context=None)  # noqa: SLF001
        return span


@contextlib.contextmanager
def _current(parent: Any) -> Iterator[None]:
    """``parent`` (a span context) as the current span's, for the checks."""
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(parent)))
    try:
        yield
    finally:
        otel_context.detach(token)


def runtime_context_var() -> contextvars.ContextVar[Any] | None:
    """The ContextVar behind OpenTelemetry's runtime context when it is the SDK's default
    ``ContextVarsRuntimeContext`` (then ``attach``/``detach`` are exactly its ``set``/``reset``,
    and its value is the current ``Context``); ``None`` for any other runtime context."""
    with contextlib.suppress(Exception):
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext

        runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
        var = getattr(runtime, "_current_context", None)
        if type(runtime) is ContextVarsRuntimeContext and isinstance(var, contextvars.ContextVar):
            return var
    return None


def _current_span_getter() -> Callable[[], Any]:
    """A function giving the current span or ``None`` (what ``trace.get_current_span()`` gives,
    ``None`` for its invalid span): read straight from the runtime's ContextVar when
    :func:`runtime_context_var` found it and the span key is the API's (checked on a probe)."""
    var, key = runtime_context_var(), getattr(trace, "_SPAN_KEY", None)

    def through_the_api() -> Any:
        span = trace.get_current_span()
        return None if span is trace.INVALID_SPAN else span

    if var is None or not isinstance(key, str):
        return through_the_api
    get = var.get

    def straight() -> Any:
        return get().get(key)

    probe = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    token = otel_context.attach(trace.set_span_in_context(probe))
    try:
        same = straight() is probe is trace.get_current_span()
    finally:
        otel_context.detach(token)
    return straight if same else through_the_api


_current_span = _current_span_getter()


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, BoundedAttributes):
        return (list(a.items()), a.maxlen, a.max_value_len, a._immutable) == (  # noqa: SLF001
            list(b.items()), b.maxlen, b.max_value_len, b._immutable)  # noqa: SLF001  # fmt: skip
    if isinstance(a, BoundedList):
        return (list(a), a.dropped, cast(Any, a)._dq.maxlen) == (list(b), b.dropped, cast(Any, b)._dq.maxlen)
    if isinstance(a, trace.SpanContext):  # (trace id, span id, is_remote, flags, state, is_valid)
        return len(a) == len(b) and tuple(a)[2:] == tuple(b)[2:]
    if type(a) is _LOCK_TYPE:
        return True
    if type(a).__eq__ is object.__eq__ and a is not b:  # no value equality: compare the fields
        return vars(a) == vars(b) if hasattr(a, "__dict__") else False
    return bool(a == b)


def _same_span(lean: Any, sdk: Any) -> bool:
    """Every field equal, ids and times aside (a child's parent compared by its ids)."""
    lean_fields, sdk_fields = vars(lean), vars(sdk)
    if type(lean) is not type(sdk) or lean_fields.keys() != sdk_fields.keys():
        return False
    for key, value in sdk_fields.items():
        if key in ("_start_time", "_end_time"):
            if (value is None) != (lean_fields[key] is None):
                return False
        elif key == "_parent":
            if value != lean_fields[key]:
                return False
        elif not _same_value(lean_fields[key], value):
            return False
    return True


def _same_readable(lean: Any, sdk: Any) -> bool:
    """What the span processors get at the end (``_readable_span()``) agrees field for field."""
    lean_read, sdk_read = lean._readable_span(), sdk._readable_span()  # noqa: SLF001
    return type(lean_read) is type(sdk_read) and _same_span(lean_read, sdk_read)


__all__ = ["LeanSpanStarter", "plain_attributes", "store_plain"]
