"""OTLP/HTTP trace bodies -> ``ExportTraceServiceRequest`` -> SDK ``ReadableSpan`` objects.

Contract:

* :func:`decode_body` takes a request body as sent to ``POST /v1/traces``: ``Content-Encoding``
  ``gzip``, ``deflate`` (zlib or raw) or none, and ``Content-Type`` ``application/x-protobuf``
  or ``application/json``. It returns the decoded request or raises :class:`DecodeError` (a
  ``ValueError`` whose message says what was wrong: the server answers 400 with it),
  :class:`UnsupportedMediaType` for another content type or encoding (415), or
  :class:`BodyTooLarge` when the decompressed body exceeds ``max_bytes`` (413).
* :func:`request_from_json` reads OTLP/JSON: ``traceId``/``spanId``/``parentSpanId`` (also in
  links) are **hex** as the OTLP spec requires, not protobuf-JSON's base64 (a value of base64
  length is accepted as base64); enums may be numbers or names; unknown fields are ignored.
* :func:`request_to_json` writes OTLP/JSON (hex ids) on one line, the inverse of the above.
* :func:`fields_from_request` turns every span of a request into the tuple
  :func:`~agent_rl_plugin.store.span_parts.span_fields` reads from a ``ReadableSpan``, with the
  context as a ``(trace hex, span hex)`` pair and the parent as a hex ``str`` (the id bytes' own
  hex text): given to :meth:`~agent_rl_plugin.store.rows.SpanConverter.convert_fields` they
  become the rows :func:`spans_from_request`'s spans become through ``convert``, without
  building SDK objects per span only to read them back (``agent-rl serve``'s path: decoding is
  most of a span's cost there).
* :func:`spans_from_request` turns every span of a request into an SDK ``ReadableSpan`` exactly
  as the OTel SDK would have built it in the agent's process (ids as ints, OTLP span kind ``k``
  as ``SpanKind(k - 1)``, status, resource, scope, events, links, nanosecond times), so the
  store's own :class:`~agent_rl_plugin.store.rows.SpanConverter` turns it into the same row as
  the in-process exporter. Attribute values: string/bool/int/double as such, arrays as tuples,
  key-value lists as dicts, bytes as UTF-8 text (else base64). A span whose ids are not 16/8
  bytes is not returned; the count of those is the second item of the result.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any, Iterable

from google.protobuf import json_format
from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from agent_rl_plugin.errors import AgentRLError

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

_KINDS = {
    0: SpanKind.INTERNAL,
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
_ID_FIELDS = {"traceId": 32, "spanId": 16, "parentSpanId": 16, "trace_id": 32, "span_id": 16, "parent_span_id": 16}


class DecodeError(AgentRLError, ValueError):
    """The body is not a valid OTLP trace request; ``str(error)`` says why."""


class UnsupportedMediaType(DecodeError):
    """A Content-Type or Content-Encoding the receiver does not read (HTTP 415)."""


class BodyTooLarge(DecodeError):
    """The (decompressed) body is larger than the receiver accepts."""


# --- bytes -> request ---------------------------------------------------------------------
def decompress(body: bytes, encoding: str | None, max_bytes: int) -> bytes:
    """``body`` decoded per ``Content-Encoding`` (``gzip``, ``deflate``, ``identity``/none)."""
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        data = body
    elif name in ("gzip", "x-gzip"):
        data = _inflate(body, 16 + zlib.MAX_WBITS, max_bytes, "gzip")
    elif name == "deflate":
        try:
            data = _inflate(body, zlib.MAX_WBITS, max_bytes, "deflate")
        except DecodeError as exc:  # some clients send raw deflate without the zlib header
            if isinstance(exc, BodyTooLarge):
                raise
            data = _inflate(body, -zlib.MAX_WBITS, max_bytes, "deflate")
    else:
        raise UnsupportedMediaType(f"unsupported Content-Encoding {encoding!r} (use gzip, deflate or none)")
    if len(data) > max_bytes:
        raise BodyTooLarge(f"body of {len(data)} bytes exceeds the limit of {max_bytes} bytes")
    return data


def _inflate(body: bytes, wbits: int, max_bytes: int, name: str) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        data = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise DecodeError(f"body is not valid {name} data: {exc}") from None
    if len(data) > max_bytes:
        raise BodyTooLarge(f"decompressed body exceeds the limit of {max_bytes} bytes")
    if not inflater.eof:
        raise DecodeError(f"body is truncated {name} data")
    return data


def media_type(content_type: str | None) -> str:
    """``application/json`` or ``application/x-protobuf`` from a Content-Type header."""
    value = (content_type or PROTOBUF).split(";", 1)[0].strip().lower()
    if value in (PROTOBUF, "application/protobuf", "application/octet-stream"):
        return PROTOBUF
    if value == JSON:
        return JSON
    raise UnsupportedMediaType(f"unsupported Content-Type {content_type!r} (use {PROTOBUF} or {JSON})")


def decode_body(
    body: bytes, content_type: str | None, content_encoding: str | None = None, *, max_bytes: int = 64 << 20
) -> ExportTraceServiceRequest:
    """The request carried by an OTLP/HTTP body (see the module contract)."""
    kind = media_type(content_type)
    data = decompress(body, content_encoding, max_bytes)
    if kind == JSON:
        return request_from_json(data)
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except ProtobufDecodeError as exc:
        raise DecodeError(f"body is not a protobuf ExportTraceServiceRequest: {exc}") from None
    return request


def _hex_to_base64(value: Any, hex_len: int) -> Any:
    if isinstance(value, str) and len(value) == hex_len:
        try:
            return base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except ValueError:
            raise DecodeError(f"id {value!r} is not {hex_len} hex characters") from None
    return value  # empty, or already base64 (a different length): left to the parser


def _fix_ids(node: Any) -> None:
    """Rewrite OTLP/JSON hex ids in place to protobuf-JSON base64, wherever they occur."""
    if isinstance(node, dict):
        for key, value in node.items():
            hex_len = _ID_FIELDS.get(key)
            if hex_len is not None:
                node[key] = _hex_to_base64(value, hex_len)
            elif isinstance(value, (dict, list)):
                _fix_ids(value)
    elif isinstance(node, list):
        for item in node:
            _fix_ids(item)


def request_from_json(data: bytes | str | dict[str, Any]) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest`` from OTLP/JSON (hex ids; see the module contract)."""
    if isinstance(data, dict):
        document = data
    else:
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DecodeError(f"body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise DecodeError('body is not a JSON object (expected {"resourceSpans": [...]})')
    spans_only = {k: v for k, v in document.items() if k in ("resourceSpans", "resource_spans")}
    _fix_ids(spans_only)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(spans_only, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, binascii.Error) as exc:
        raise DecodeError(f"body is not an OTLP/JSON trace request: {_first_line(exc)}") from None
    return request


def _ids_to_hex(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            elif isinstance(value, (dict, list)):
                _ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_hex(item)


def request_to_json(request: ExportTraceServiceRequest) -> str:
    """OTLP/JSON text of ``request`` (hex ids, one line): what the Collector's ``file`` exporter
    writes and what :func:`request_from_json` reads."""
    document = json_format.MessageToDict(request)
    _ids_to_hex(document)
    return json.dumps(document, separators=(",", ":"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- request -> spans ---------------------------------------------------------------------
def any_value(value: AnyValue) -> Any:
    """The Python value of an OTLP ``AnyValue`` (see the module contract)."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        return value.double_value
    if which == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        raw = value.bytes_value
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    return None


def attributes(key_values: Iterable[Any]) -> dict[str, Any]:
    """OTLP ``KeyValue`` list -> dict (a key given twice keeps the last value)."""
    out: dict[str, Any] = {}
    for kv in key_values:
        # The common cases first: this runs for every attribute of every span. A non-empty
        # string value is read without asking which value is set (most values are strings).
        value = kv.value
        text = value.string_value
        if text:
            out[kv.key] = text
            continue
        which = value.WhichOneof("value")
        if which == "int_value":
            out[kv.key] = value.int_value
        elif which == "string_value":
            out[kv.key] = text
        else:
            out[kv.key] = any_value(value)
    return out


def _int_id(raw: bytes, size: int) -> int | None:
    return int.from_bytes(raw, "big") if len(raw) == size else None


def _links(links: Iterable[Any]) -> tuple[Link, ...]:
    return tuple(
        Link(
            SpanContext(_int_id(link.trace_id, 16) or 0, _int_id(link.span_id, 8) or 0, True),
            attributes(link.attributes),
        )
        for link in links
    )


#: Status objects are immutable: one shared instance per code without a message.
_PLAIN_STATUS = {code: Status(code) for code in _STATUS.values()}


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
                        attributes(span.attributes),
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


def spans_from_request(request: ExportTraceServiceRequest) -> tuple[list[ReadableSpan], int]:
    """(spans, number of spans left out for invalid ids) — see the module contract: the SDK spans
    of :func:`fields_from_request`'s fields (ids as ints, parents as remote span contexts)."""
    fields, invalid = fields_from_request(request)
    sampled = TraceFlags(TraceFlags.SAMPLED)
    spans: list[ReadableSpan] = []
    append = spans.append
    for ids, parent_hex, name, attrs, events, links, resource, scope, status, kind, start, end in fields:
        trace_hex, span_hex = ids
        trace_id = int(trace_hex, 16)
        append(
            ReadableSpan(
                name=name,
                context=SpanContext(trace_id, int(span_hex, 16), False, sampled),
                parent=None if parent_hex is None else SpanContext(trace_id, int(parent_hex, 16), True, sampled),
                resource=resource,
                attributes=attrs,
                events=events,
                links=links,
                kind=kind,
                status=status,
                start_time=start,
                end_time=end,
                instrumentation_scope=scope,
            )
        )
    return spans, invalid


def encode_response(kind: str, rejected: int = 0, message: str = "") -> bytes:
    """An ``ExportTraceServiceResponse`` body in the request's format (``partial_success`` when
    ``rejected`` spans were not accepted)."""
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.CopyFrom(ExportTracePartialSuccess(rejected_spans=rejected, error_message=message))
    if kind == JSON:
        return json.dumps(json_format.MessageToDict(response)).encode("utf-8")
    return response.SerializeToString()
