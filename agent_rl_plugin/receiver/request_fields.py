"""OTLP ``ExportTraceServiceRequest`` -> the store converter's span field tuples, directly.

Contract:

* :func:`fields_from_request` returns, for every span of a request, the tuple
  :func:`~agent_rl_plugin.store.span_parts.span_fields` would return for the ``ReadableSpan``
  :func:`~agent_rl_plugin.receiver.decode.spans_from_request` builds from it, except that the
  span's context is a ``(trace hex, span hex)`` pair and its parent a hex ``str`` (the id bytes'
  own hex text, what ``f"{id:032x}"`` gives for the same id). Given to
  :meth:`~agent_rl_plugin.store.rows.SpanConverter.convert_fields`, they become the same rows
  as those spans through :meth:`~agent_rl_plugin.store.rows.SpanConverter.convert` (a test holds
  the two paths to equal tables), without building a ``ReadableSpan`` and two ``SpanContext``
  objects per span and reading them back: this is ``agent-rl serve``'s path, where decoding is
  most of a span's cost.
* Spans whose ids are not 16/8 bytes are left out and counted (the second item), as in
  ``spans_from_request``; all-zero ids are kept for the converter to refuse (counted there).
* Attribute values are decoded by :func:`~agent_rl_plugin.receiver.decode.attributes` rules
  (string/bool/int/double as such, arrays as tuples, key-value lists as dicts, bytes as UTF-8
  text, else base64; a key given twice keeps the last value).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind
from opentelemetry.trace.status import Status, StatusCode

from agent_rl_plugin.receiver.decode import _KINDS, _PLAIN_STATUS, _STATUS, _links, attributes

__all__ = ["fields_from_request"]


def fields_from_request(request: ExportTraceServiceRequest) -> tuple[list[tuple[Any, ...]], int]:
    """(span field tuples, number of spans left out for invalid ids); see the module contract."""
    out: list[tuple[Any, ...]] = []
    append = out.append
    invalid = 0
    kinds_get = _KINDS.get
    internal = SpanKind.INTERNAL
    plain_status = _PLAIN_STATUS
    unset = plain_status[StatusCode.UNSET]
    error_code = StatusCode.ERROR
    read = attributes
    for resource_spans in request.resource_spans:
        resource = Resource(attributes(resource_spans.resource.attributes), resource_spans.schema_url or None)
        for scope_spans in resource_spans.scope_spans:
            scope_msg = scope_spans.scope
            scope = InstrumentationScope(
                scope_msg.name,
                scope_msg.version or None,
                scope_spans.schema_url or None,
                attributes(scope_msg.attributes) or None,
            )
            for span in scope_spans.spans:
                raw_trace, raw_span = span.trace_id, span.span_id
                if len(raw_trace) != 16 or len(raw_span) != 8:
                    invalid += 1
                    continue
                raw_parent = span.parent_span_id
                if span.HasField("status"):
                    status_msg = span.status
                    status_code = _STATUS.get(status_msg.code, StatusCode.UNSET)
                    status = (
                        Status(status_code, status_msg.message or None)
                        if status_code is error_code
                        else plain_status[status_code]
                    )
                else:
                    status = unset
                events = span.events
                links = span.links
                append(
                    (
                        (raw_trace.hex(), raw_span.hex()),
                        raw_parent.hex() if len(raw_parent) == 8 else None,
                        span.name,
                        read(span.attributes),
                        tuple(Event(e.name, attributes(e.attributes), e.time_unix_nano) for e in events)
                        if events
                        else (),
                        _links(links) if links else (),
                        resource,
                        scope,
                        status,
                        kinds_get(span.kind, internal),
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                    )
                )
    return out, invalid
