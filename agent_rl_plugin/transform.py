"""Applying ``agent_rl_transform_attributes`` hooks on every exporter's path.

Our DuckDB exporter accepts the transform directly (it converts attributes to rows anyway);
any other exporter (OTLP, a plugin's) is wrapped in :class:`TransformingSpanExporter`, which
hands it copies of the spans with transformed span and event attributes.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.plugins import get_plugin_manager

logger = logging.getLogger(__name__)

AttributeTransform = Callable[[dict[str, Any], str], dict[str, Any]]


def make_attribute_transform(config: RLConfig) -> AttributeTransform:
    """A function applying every ``agent_rl_transform_attributes`` implementation in turn.

    It copies the attributes, so the caller's mapping is never changed. An implementation that
    raises is logged once and skipped; the others still run.
    """
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

    return transform


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
        try:
            copies = [self._copy(span) for span in spans]
        except Exception:
            logger.warning("agent-rl: could not transform spans; batch dropped", exc_info=True)
            return SpanExportResult.FAILURE
        return self.inner.export(copies)

    def _copy(self, span: ReadableSpan) -> ReadableSpan:
        name = span.name
        events = tuple(
            Event(e.name, self._transform(dict(e.attributes or {}), name), e.timestamp)
            for e in span.events
        )
        return ReadableSpan(
            name=name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=self._transform(dict(span.attributes or {}), name),
            events=events,
            links=span.links,
            kind=span.kind,
            instrumentation_scope=span.instrumentation_scope,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
        )

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)
