"""Applying ``agent_rl_transform_attributes`` hooks (and redaction) on every exporter's path.

Our DuckDB exporter accepts the transform directly (it converts attributes to rows anyway);
any other exporter (OTLP, a plugin's) is wrapped in :class:`TransformingSpanExporter`, which
hands it copies of the spans with transformed span and event attributes.

The transform made by :func:`make_attribute_transform` carries the config's
:class:`~agent_rl_plugin.redaction.Redactor` as its ``redactor`` attribute (``None`` when
redaction is off). Whoever converts spans uses it for what attribute hooks never see: span and
event names, the status message, link and resource attributes (the store's
:class:`~agent_rl_plugin.store.rows.SpanConverter`, and :meth:`TransformingSpanExporter.export`,
which hands on a span unchanged when none of these holds a secret).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence, cast

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link
from opentelemetry.trace.status import Status

from agent_rl_plugin import redaction
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.plugins import get_plugin_manager
from agent_rl_plugin.redaction import CONTENT_KEYS, CONTENT_PREFIXES, redactor_for

logger = logging.getLogger(__name__)

AttributeTransform = Callable[[dict[str, Any], str], dict[str, Any]]


def make_attribute_transform(config: RLConfig) -> AttributeTransform:
    """A function applying every ``agent_rl_transform_attributes`` implementation in turn.

    It copies the attributes, so the caller's mapping is never changed. An implementation that
    raises is logged once and skipped; the others still run. The function's ``redactor``
    attribute is the config's redactor (``None`` when redaction is off); making the transform
    collects the ``agent_rl_redaction_patterns`` hooks again.

    Its ``functions`` attribute holds the implementations, in the order they run.

    Its ``unchanged(attributes) -> bool`` attribute answers, without copying, True only when the
    transform would return a mapping equal to ``attributes`` (same keys, order and values): when
    the only implementation is the built-in one (:mod:`agent_rl_plugin.redaction`), no content
    key is to be dropped and :meth:`~agent_rl_plugin.redaction.Redactor.cannot_change` rules out
    every secret. Any other implementation makes it always False (the transform must run).
    Its ``unchanged_all(mappings) -> bool`` attribute is True only when ``unchanged`` would be
    True for every one of ``mappings`` (a batch's span and event attributes, checked with one
    scan: :meth:`~agent_rl_plugin.redaction.Redactor.cannot_change_all`); False means "ask per
    mapping".
    """
    redactor = redactor_for(config, refresh=True)
    impls = get_plugin_manager().hook.agent_rl_transform_attributes.get_hookimpls()
    functions = [impl.function for impl in reversed(impls)]  # pluggy's call order
    failed: set[int] = set()

    def transform(attributes: dict[str, Any], span_name: str) -> dict[str, Any]:
        copy = dict(attributes)
        for function in functions:
            try:
                function(attributes=copy, span_name=span_name, config=config)
            except Exception:
                if id(function) not in failed:
                    failed.add(id(function))
                    logger.warning(
                        "agent-rl: attribute transform %s raised; skipped",
                        getattr(function, "__qualname__", function),
                        exc_info=True,
                    )
        return copy

    only_builtin = functions == [redaction.agent_rl_transform_attributes]

    def unchanged(attributes: Mapping[str, Any]) -> bool:
        if not only_builtin:
            return False
        if not config.capture_content and any(k in CONTENT_KEYS or k.startswith(CONTENT_PREFIXES) for k in attributes):
            return False
        if not config.redact:
            return True
        current = redactor_for(config)  # what the hook itself would use
        return current is None or current.cannot_change(attributes)

    def unchanged_all(mappings: Sequence[Mapping[str, Any]]) -> bool:
        if not only_builtin:
            return False
        if not config.capture_content and any(
            k in CONTENT_KEYS or k.startswith(CONTENT_PREFIXES) for attributes in mappings for k in attributes
        ):
            return False
        if not config.redact:
            return True
        current = redactor_for(config)
        return current is None or current.cannot_change_all(mappings)

    transform.redactor = redactor  # type: ignore[attr-defined]
    transform.unchanged = unchanged  # type: ignore[attr-defined]
    transform.unchanged_all = unchanged_all  # type: ignore[attr-defined]
    transform.functions = tuple(functions)  # type: ignore[attr-defined]
    return transform


def span_unchanged(span: ReadableSpan, unchanged: Callable[[Mapping[str, Any]], bool]) -> bool:
    """True when ``unchanged`` (a transform's, see :func:`make_attribute_transform`) holds for
    the span's attributes and every event's, and the span dropped no attribute, event or link:
    a copy with transformed attributes would then carry the same data. Reads ReadableSpan's
    private fields where its class uses ReadableSpan's own properties (which copy under locks)."""
    if span.dropped_attributes or span.dropped_events or span.dropped_links:
        return False
    events, _ = _events_and_links(span)
    attributes = span._attributes if _plain(type(span)) else span.attributes  # noqa: SLF001 - read only
    if attributes and not unchanged(_mapping(attributes)):
        return False
    for event in events:
        event_attributes = event.attributes
        if event_attributes and not unchanged(_mapping(event_attributes)):
            return False
    return True


def spans_unchanged(
    spans: Sequence[ReadableSpan], unchanged_all: Callable[[Sequence[Mapping[str, Any]]], bool]
) -> bool:
    """:func:`span_unchanged` for a whole batch with one check: True only when no span dropped an
    attribute, event or link and ``unchanged_all`` (a transform's, see
    :func:`make_attribute_transform`) holds for every span's and every event's attributes."""
    mappings: list[Mapping[str, Any]] = []
    add = mappings.append
    for span in spans:
        if type(span) is ReadableSpan:  # what SDK spans give processors: read its fields directly
            attributes: Any = span._attributes  # noqa: SLF001 - read only
            events: Any = span._events  # noqa: SLF001 - read only
            links: Any = span._links  # noqa: SLF001 - read only
            if type(attributes) is BoundedAttributes:
                if attributes.dropped:
                    return False
                attributes = attributes._dict  # noqa: SLF001 - read only
            if type(events) is BoundedList:
                if events.dropped:
                    return False
                events = cast(Any, events)._dq  # noqa: SLF001 - read only
            if type(links) is BoundedList and links.dropped:
                return False
        else:
            if span.dropped_attributes or span.dropped_events or span.dropped_links:
                return False
            events, _ = _events_and_links(span)
            attributes = _mapping(span._attributes if _plain(type(span)) else span.attributes)  # noqa: SLF001
        if attributes:
            add(attributes)
        if events:
            for event in events:
                if event.attributes:
                    add(_mapping(event.attributes))
    return unchanged_all(mappings)


def _mapping(attributes: Any) -> Mapping[str, Any]:
    return attributes._dict if type(attributes) is BoundedAttributes else attributes  # noqa: SLF001 - read only


def with_attribute_transform(exporter: SpanExporter, config: RLConfig) -> SpanExporter:
    """``exporter`` with the transform hooks applied to what it receives."""
    transform = make_attribute_transform(config)
    setter = getattr(exporter, "set_attribute_transform", None)
    if callable(setter):
        setter(transform)
        return exporter
    return TransformingSpanExporter(exporter, transform)


class TransformingSpanExporter(SpanExporter):
    """Wraps an exporter; passes it spans whose attributes went through ``transform``."""

    def __init__(self, inner: SpanExporter, transform: AttributeTransform) -> None:
        self.inner = inner
        self._transform = transform

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        redactor = getattr(self._transform, "redactor", None)
        try:
            copies = self._copies(spans)
            if redactor is not None:
                copies = redact_spans_fields(copies, redactor)
        except Exception:
            logger.warning("agent-rl: could not transform spans; batch dropped", exc_info=True)
            return SpanExportResult.FAILURE
        return self.inner.export(copies)

    def _copies(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        """The spans with transformed attributes (each through :meth:`_copy`)."""
        return [self._copy(span) for span in spans]

    def _copy(self, span: ReadableSpan) -> ReadableSpan:
        name = span.name
        events = tuple(Event(e.name, self._transform(dict(e.attributes or {}), name), e.timestamp) for e in span.events)
        return with_attributes(span, self._transform(dict(span.attributes or {}), name), events)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def with_attributes(span: ReadableSpan, attributes: dict[str, Any], events: Sequence[Event]) -> ReadableSpan:
    """A copy of ``span`` with other attributes and events; everything else is the span's own."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=tuple(events),
        links=span.links,
        kind=span.kind,
        instrumentation_scope=span.instrumentation_scope,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
    )


def redact_spans_fields(spans: Sequence[ReadableSpan], redactor: Any) -> list[ReadableSpan]:
    """:func:`redact_span_fields` for each span of a batch; the common span (the SDK's own
    ``ReadableSpan``, no events, links nor status message) costs a name lookup and, for a
    resource already seen in the batch, nothing more."""
    out: list[ReadableSpan] = []
    add = out.append
    redact_name = redactor.redact_name
    seen_resource: Any = _NOT_SEEN
    resource_redacted: Any = None
    for span in spans:
        if type(span) is ReadableSpan and not span._status.description:  # noqa: SLF001 - read only
            events: Any = span._events  # noqa: SLF001 - read only
            links: Any = span._links  # noqa: SLF001 - read only
            if type(events) is BoundedList:
                events = cast(Any, events)._dq  # noqa: SLF001 - read only
            if type(links) is BoundedList:
                links = cast(Any, links)._dq  # noqa: SLF001 - read only
            if not events and not links:
                resource = span._resource  # noqa: SLF001 - read only
                if resource is not seen_resource:
                    seen_resource, resource_redacted = resource, _redacted_resource(resource, redactor)
                name = span._name  # noqa: SLF001 - read only
                if resource_redacted is resource and redact_name(name) is name:
                    add(span)
                    continue
        add(redact_span_fields(span, redactor))
    return out


_NOT_SEEN = object()


def redact_span_fields(span: ReadableSpan, redactor: Any) -> ReadableSpan:
    """``span`` with secrets masked in its name, status message, event names, link and resource
    attributes (attribute hooks see none of these); ``span`` itself when none holds a secret."""
    status = span.status
    events, links = _events_and_links(span)
    name = redactor.redact_name(span.name)
    if not events and not links and not status.description:  # the common span: name and resource
        if name is span.name and _redacted_resource(span.resource, redactor) is span.resource:
            return span
    description = redactor.redact(status.description) if status.description else status.description
    event_names = [redactor.redact_name(e.name) for e in events]
    new_links = [_redacted_link(link, redactor) for link in links] if links else []
    resource = _redacted_resource(span.resource, redactor)
    if (
        name is span.name
        and description is status.description
        and resource is span.resource
        and all(new is e.name for new, e in zip(event_names, events))
        and all(new is old for new, old in zip(new_links, links))
    ):
        return span
    return ReadableSpan(
        name=name,
        context=span.context,
        parent=span.parent,
        resource=resource,
        attributes=span.attributes,
        events=tuple(
            e if new is e.name else Event(new, e.attributes, e.timestamp) for new, e in zip(event_names, events)
        ),
        links=tuple(new_links),
        kind=span.kind,
        instrumentation_scope=span.instrumentation_scope,
        status=status if description is status.description else Status(status.status_code, description),
        start_time=span.start_time,
        end_time=span.end_time,
    )


_plain_types: dict[type, bool] = {}


def _plain(cls: type) -> bool:
    """Whether ``cls`` uses ReadableSpan's own ``attributes``, ``events`` and ``links``."""
    plain = _plain_types.get(cls)
    if plain is None:
        plain = _plain_types[cls] = (
            getattr(cls, "events", None) is ReadableSpan.events
            and getattr(cls, "links", None) is ReadableSpan.links
            and getattr(cls, "attributes", None) is ReadableSpan.attributes
        )
    return plain


def _events_and_links(span: ReadableSpan) -> tuple[Sequence[Event], Sequence[Link]]:
    """The span's events and links, read from ReadableSpan's private fields when its class uses
    ReadableSpan's own properties (which copy each under a lock), else through them."""
    if _plain(type(span)):
        events, links = span._events, span._links  # noqa: SLF001 - read-only, as the properties do
        return getattr(events, "_dq", events) or (), getattr(links, "_dq", links) or ()
    return span.events, span.links


def _redacted_link(link: Link, redactor: Any) -> Link:
    attributes = dict(link.attributes or {})
    return Link(link.context, attributes) if redactor.redact_attributes(attributes) else link


_resources: dict[int, tuple[Any, Any, Any]] = {}


def _redacted_resource(resource: Any, redactor: Any) -> Any:
    """``resource`` with secrets masked in its attributes (cached: spans share few resources)."""
    if resource is None:
        return None
    cached = _resources.get(id(resource))
    if cached is not None and cached[0] is resource and cached[1] is redactor:
        return cached[2]
    attributes = dict(resource.attributes)
    redacted = Resource(attributes, resource.schema_url) if redactor.redact_attributes(attributes) else resource
    if len(_resources) > 64:
        _resources.clear()
    _resources[id(resource)] = (resource, redactor, redacted)
    return redacted
