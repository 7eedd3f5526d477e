"""``agent-rl serve`` decodes OTLP requests straight into the converter's span fields
(``fields_from_request`` + ``SpanConverter.convert_fields``), skipping the SDK span objects. It
must store exactly what the SDK-span path (``spans_from_request`` + ``SpanConverter.convert``)
stores: same rows, same rewards, same refusals, with redaction and normalisers on."""

from __future__ import annotations

import pyarrow as pa
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_receiver import make_spans
from test_receiver_equivalence import PB, _kv, _post, _span, odd_request

from agent_rl_plugin.receiver import Receiver
from agent_rl_plugin.receiver.decode import attributes, fields_from_request, spans_from_request
from agent_rl_plugin.receiver.sink import SpanSink
from agent_rl_plugin.store.rows import SpanBatch, SpanConverter
from agent_rl_plugin.store.span_parts import HexIds
from agent_rl_plugin.store.validation import InvalidSpan


def with_zero_ids(request: ExportTraceServiceRequest) -> ExportTraceServiceRequest:
    """``request`` plus a span whose trace id is all zeros and one whose span id is, and a
    secret in an attribute, a span name and a status message (for the redaction)."""
    out = ExportTraceServiceRequest()
    out.CopyFrom(request)
    scope_spans = out.resource_spans[0].scope_spans[0]
    for trace, span in ((0, 5), (0xABC9, 0)):
        added = scope_spans.spans.add()
        added.CopyFrom(_span(1, 1, "zero ids", 1))
        added.trace_id, added.span_id = trace.to_bytes(16, "big"), span.to_bytes(8, "big")
    secret = scope_spans.spans.add()
    secret.CopyFrom(_span(0xABCA, 3, "call with sk-proj-abcdefghijklmnopqrstuvwxyz0123", 3, parent=2))
    secret.attributes.append(_kv("api_key", "sk-proj-abcdefghijklmnopqrstuvwxyz0123"))
    secret.status.code, secret.status.message = 2, "denied for sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    return out


def both_paths(converter: SpanConverter, request: ExportTraceServiceRequest) -> tuple[SpanBatch, SpanBatch, int, int]:
    spans, invalid_spans = spans_from_request(request)
    fields, invalid_fields = fields_from_request(request)
    return converter.convert(spans), converter.convert_fields(fields), invalid_spans, invalid_fields


def assert_same(by_spans: SpanBatch, by_fields: SpanBatch) -> None:
    assert by_fields.spans.schema == by_spans.spans.schema
    assert by_fields.spans.to_pylist() == by_spans.spans.to_pylist()
    rewards = [b.rewards.to_pylist() if b.rewards is not None else None for b in (by_spans, by_fields)]
    assert rewards[0] == rewards[1]
    assert (by_fields.failed, by_fields.invalid, by_fields.truncated) == (
        by_spans.failed,
        by_spans.invalid,
        by_spans.truncated,
    )


@pytest.fixture
def receiver_converter(tmp_path):
    """The converter ``agent-rl serve`` uses: the config's redaction and every normaliser."""
    sink = SpanSink(tmp_path / "unused.duckdb")
    yield sink.converter
    sink.close()


def test_odd_request_converts_the_same_both_ways(receiver_converter):
    by_spans, by_fields, invalid_spans, invalid_fields = both_paths(receiver_converter, with_zero_ids(odd_request()))
    assert invalid_fields == invalid_spans == 3  # ids of the wrong length: left out before converting
    assert by_fields.invalid == 2 and by_fields.num_spans == 22  # all-zero ids: refused by the converter
    assert_same(by_spans, by_fields)
    rows = by_fields.spans.to_pylist()
    assert {r["parent_span_id"] for r in rows} == {None, f"{1:016x}", f"{2:016x}"}
    secret = next(r for r in rows if r["trace_id"] == f"{0xABCA:032x}")
    assert "sk-proj" not in repr(secret) and secret["kind"] == "CLIENT" and secret["status_code"] == "ERROR"
    assert by_fields.rewards is not None and by_fields.rewards.num_rows == 3


def test_sdk_encoded_spans_convert_the_same_both_ways(receiver_converter):
    spans = make_spans(40, "fields")
    by_spans, by_fields, *_ = both_paths(receiver_converter, encode_spans(spans))
    assert by_fields.num_spans == len(spans) > 40
    assert_same(by_spans, by_fields)
    assert by_fields.spans.equals(by_spans.spans)


@pytest.mark.parametrize(
    ("context", "refused"), [((f"{0:032x}", f"{5:016x}"), "trace"), ((f"{9:032x}", f"{0:016x}"), "span")]
)
def test_hex_contexts_with_all_zero_ids_are_refused(context, refused):
    with pytest.raises(InvalidSpan, match=f"all-zero \\(invalid\\) {refused} id"):
        HexIds().ids(context)
    assert HexIds().ids((f"{9:032x}", f"{5:016x}")) == (f"{9:032x}", f"{5:016x}", f"{9:032x}", f"{5:016x}")
    assert HexIds().parent(f"{7:016x}") == f"{7:016x}"


def test_an_empty_request_gives_an_empty_batch(receiver_converter):
    fields, invalid = fields_from_request(ExportTraceServiceRequest())
    batch = receiver_converter.convert_fields(fields)
    assert (fields, invalid, batch.num_spans, batch.failed) == ([], 0, 0, 0)
    assert batch.spans.schema == pa.schema(receiver_converter.convert([]).spans.schema)


def test_attribute_values_read_string_first_keep_empty_and_falsy_values():
    pairs = [("blank", ""), ("zero", 0), ("s", "x"), ("off", False), ("d", 0.0), ("list", ["", 0]), ("dup", "a")]
    pairs.append(("dup", ""))  # a key given twice keeps the last value, even an empty one
    assert attributes([_kv(k, v) for k, v in pairs]) == {
        "blank": "",
        "zero": 0,
        "s": "x",
        "off": False,
        "d": 0.0,
        "list": ("", 0),
        "dup": "",
    }


def test_the_receiver_counts_every_span_it_received_those_with_bad_ids_too(tmp_path):
    receiver = Receiver(tmp_path / "served.duckdb", port=0, token="", linger_s=0.01, announce=False).start()
    try:
        status, _ = _post(receiver.url, odd_request().SerializeToString(), {"Content-Type": PB})
    finally:
        stats = receiver.stop()
    assert status == 200
    assert (stats["spans_received"], stats["spans_accepted"], stats["spans_rejected"]) == (24, 21, 3)
