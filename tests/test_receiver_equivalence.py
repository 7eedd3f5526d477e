"""The receiver stores one OTLP request as the same rows whatever its encoding (protobuf, OTLP/JSON,
gzip, deflate), the rows the in-process exporter writes for the SDK spans the request decodes to,
with the values the decoding contract promises for odd attribute types (bytes, key-value lists,
nested arrays, empty values, big and negative ints, NaN), resource and scope attributes, every
span kind and status, events (a reward, an exception completing an error), links, and spans with
invalid ids answered as rejected. Real HTTP on 127.0.0.1, real DuckDB files, every column."""

from __future__ import annotations

import gzip
import json
import math
import urllib.request
import zlib
from pathlib import Path
from typing import Any, cast

import duckdb
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus
from opentelemetry.sdk.trace.export import SpanExportResult

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.receiver import Receiver
from agent_rl_plugin.receiver.decode import request_to_json, spans_from_request
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.store.exporter import collect_normalizers

#: Every column a row has (the derived ones too), and every column of the rewards table.
SPAN_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, start_time, end_time, duration_ms, status_code, "
    "status_message, attributes, events, links, resource, scope_name, scope_version, service_name, "
    "rollout_id, task_id, group_id, is_rollout_root, operation, span_kind, start_unix_nano, end_unix_nano"
)
REWARD_COLUMNS = (
    "reward_id, rollout_id, step_index, name, value, label, reason, metrics, source, created_at, trace_id, span_id"
)


def _value(value: Any) -> AnyValue:
    out = AnyValue()
    if value is None:
        return out  # no field set
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, list):
        out.array_value.values.extend(_value(v) for v in value)
    elif isinstance(value, dict):
        out.kvlist_value.values.extend(_kv(k, v) for k, v in value.items())
    return out


def _kv(key: str, value: Any) -> KeyValue:
    return KeyValue(key=key, value=_value(value))


def _attrs(target: Any, pairs: list[tuple[str, Any]]) -> None:
    target.extend(_kv(k, v) for k, v in pairs)


ODD = [
    ("s", "héllo ✓"),
    ("i", -(2**62)),
    ("big", 2**63 - 1),
    ("d", 0.1),
    ("nan", math.nan),
    ("b", True),
    ("f", False),
    ("zero", 0),
    ("utf8_bytes", "bytes ✓".encode()),
    ("raw_bytes", b"\xff\x00\xfe"),
    ("nested", [1, [2, "x"], {"k": [True, None]}]),
    ("kv", {"a": 1, "b": {"c": "d"}, "e": []}),
    ("empty", None),
    ("dup", "first"),
    ("dup", "last"),  # a key given twice keeps the last value
    (sc.GEN_AI_OPERATION_NAME, "chat"),
    (sc.GEN_AI_USAGE_INPUT_TOKENS, 12),
]


def _span(trace: int, span: int, name: str, kind: int, parent: int | None = None) -> PbSpan:
    out = PbSpan(
        trace_id=trace.to_bytes(16, "big"),
        span_id=span.to_bytes(8, "big"),
        name=name,
        kind=cast(Any, kind),  # a plain number: UNSPECIFIED (0) included
        start_time_unix_nano=1_700_000_000_000_000_000 + span * 1000,
        end_time_unix_nano=1_700_000_000_000_000_000 + span * 1000 + 5_000_000,
    )
    if parent is not None:
        out.parent_span_id = parent.to_bytes(8, "big")
    return out


def odd_request() -> ExportTraceServiceRequest:
    """Two resources, three scopes, spans of every kind and status with odd attributes."""
    request = ExportTraceServiceRequest()
    for r in range(2):
        resource_spans = request.resource_spans.add(schema_url=f"https://schema/{r}" if r else "")
        _attrs(
            resource_spans.resource.attributes,
            [("service.name", f"svc-{r}"), ("host.cores", 2 + r), ("tags", ["a", "b"]), ("on", bool(r))],
        )
        for s in range(1 + r):
            scope_spans = resource_spans.scope_spans.add(schema_url="https://scope" if s else "")
            scope_spans.scope.name = f"scope-{r}-{s}"
            scope_spans.scope.version = "1.0" if s else ""
            _attrs(scope_spans.scope.attributes, [("scope.attr", s)] if s else [])
            trace = 0xABC0 + r * 16 + s
            root = scope_spans.spans.add()
            root.CopyFrom(_span(trace, 1, "invoke_agent odd", 2))
            _attrs(root.attributes, [(sc.ROLLOUT_ID, f"r-{trace}"), (sc.TASK_ID, "t"), *ODD])
            root.status.CopyFrom(PbStatus(code=PbStatus.STATUS_CODE_OK))
            reward = root.events.add(name=sc.EVENT_EVALUATION_RESULT, time_unix_nano=1_700_000_000_000_000_500)
            _attrs(
                reward.attributes, [(sc.GEN_AI_EVALUATION_NAME, "quality"), (sc.GEN_AI_EVALUATION_SCORE_VALUE, 0.75)]
            )
            for kind in range(6):  # UNSPECIFIED, INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER
                child = scope_spans.spans.add()
                child.CopyFrom(_span(trace, 10 + kind, f"step {kind}", kind, parent=1))
                _attrs(child.attributes, ODD[kind * 2 : kind * 2 + 4])
                if kind == 3:  # an error with no message: completed from its exception event
                    child.status.CopyFrom(PbStatus(code=PbStatus.STATUS_CODE_ERROR))
                    event = child.events.add(name="exception", time_unix_nano=1_700_000_000_000_001_000)
                    _attrs(event.attributes, [("exception.type", "ValueError"), ("exception.message", "boom")])
                elif kind == 4:
                    child.status.CopyFrom(PbStatus(code=PbStatus.STATUS_CODE_ERROR, message="failed: bytes ✓"))
                    link = child.links.add(trace_id=(trace + 1).to_bytes(16, "big"), span_id=(7).to_bytes(8, "big"))
                    _attrs(link.attributes, [("why", "retry"), ("n", 2), ("odd", {"x": b"\x01"})])
                elif kind == 5:
                    child.events.add(name="note", time_unix_nano=1_700_000_000_000_002_000)
            bad = scope_spans.spans.add()
            bad.CopyFrom(_span(trace, 99, "bad ids", 1))
            bad.span_id = b"\x01\x02"  # 2 bytes: not a span id, answered as rejected
    return request


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url + "/v1/traces", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read()


def _rows(db: Path, table: str, columns: str, order: str) -> list[tuple]:
    connection = duckdb.connect(str(db), read_only=True)
    try:
        return connection.execute(f"select {columns} from {table} order by {order}").fetchall()
    finally:
        connection.close()


def _all_rows(db: Path) -> tuple[list[tuple], list[tuple]]:
    return (
        _rows(db, "spans", SPAN_COLUMNS, "trace_id, span_id"),
        _rows(db, "rewards", REWARD_COLUMNS, "reward_id"),
    )


PB = "application/x-protobuf"
JS = "application/json"


def _bodies(request: ExportTraceServiceRequest) -> dict[str, tuple[bytes, dict[str, str]]]:
    pb = request.SerializeToString()
    js = request_to_json(request).encode()
    return {
        "protobuf": (pb, {"Content-Type": PB}),
        "json": (js, {"Content-Type": JS}),
        "protobuf+gzip": (gzip.compress(pb), {"Content-Type": PB, "Content-Encoding": "gzip"}),
        "json+deflate": (zlib.compress(js), {"Content-Type": JS, "Content-Encoding": "deflate"}),
    }


@pytest.fixture
def served(plugin_manager, tmp_path: Path) -> dict[str, Path]:
    """Each encoding of the odd request sent to its own receiver: name -> database."""
    out: dict[str, Path] = {}
    for name, (body, headers) in _bodies(odd_request()).items():
        receiver = Receiver(tmp_path / f"{name}.duckdb", port=0, token="", linger_s=0.01, announce=False).start()
        try:
            status, answer = _post(receiver.url, body, headers)
        finally:
            receiver.stop()
        assert status == 200, (name, answer)
        if headers["Content-Type"] == JS:
            assert json.loads(answer)["partialSuccess"]["rejectedSpans"] == "3"
        else:
            assert ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans == 3
        out[name] = Path(receiver.db)
    return out


def test_every_encoding_stores_the_same_rows_as_the_in_process_exporter(served, tmp_path):
    spans, invalid = spans_from_request(odd_request())
    assert invalid == 3 and len(spans) == 3 * 7
    reference = tmp_path / "reference.duckdb"
    exporter = DuckDBSpanExporter(reference, normalizers=collect_normalizers(), max_attribute_size=32_768)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    expected_spans, expected_rewards = _all_rows(reference)
    assert len(expected_spans) == 21 and len(expected_rewards) == 3
    for name, db in served.items():
        got_spans, got_rewards = _all_rows(db)
        assert len(got_spans) == len(expected_spans), name
        for got, want in zip(got_spans, expected_spans):
            # NaN != NaN: compare the rows' text, column by column.
            for column, a, b in zip(SPAN_COLUMNS.split(", "), got, want):
                assert repr(a) == repr(b), (name, column, a, b)
        assert got_rewards == expected_rewards, name


def test_odd_values_land_as_the_decoding_contract_says(served):
    db = served["protobuf"]
    connection = duckdb.connect(str(db), read_only=True)
    try:
        (attributes, resource, scope, version, service) = connection.execute(
            "select attributes, resource, scope_name, scope_version, service_name from spans "
            "where name = 'invoke_agent odd' and scope_name = 'scope-1-1'"
        ).fetchone()
        kinds = dict(connection.execute("select name, kind from spans where name like 'step %'").fetchall())
        statuses = connection.execute(
            "select name, status_code, status_message, attributes->>'$.\"error.type\"' from spans "
            "where name in ('invoke_agent odd', 'step 2', 'step 3', 'step 4') and scope_name = 'scope-0-0' "
            "order by name"
        ).fetchall()
        links = json.loads(connection.execute("select links from spans where name = 'step 4' limit 1").fetchone()[0])
        parents = connection.execute(
            "select count(*) from spans where name like 'step %' and parent_span_id = '0000000000000001'"
        ).fetchone()[0]
    finally:
        connection.close()
    attrs = json.loads(attributes)
    assert attrs["s"] == "héllo ✓" and attrs["i"] == -(2**62) and attrs["big"] == 2**63 - 1
    assert attrs["d"] == 0.1 and attrs["b"] is True and attrs["f"] is False and attrs["zero"] == 0
    assert attrs["utf8_bytes"] == "bytes ✓" and attrs["raw_bytes"] == "/wD+"  # not UTF-8: base64
    assert attrs["nested"] == [1, [2, "x"], {"k": [True, None]}]
    assert attrs["kv"] == {"a": 1, "b": {"c": "d"}, "e": []}
    assert attrs["empty"] is None and attrs["dup"] == "last"
    assert isinstance(attrs["nan"], str) and "nan" in attrs["nan"].lower()  # NaN is kept, as text
    assert json.loads(resource) == {"service.name": "svc-1", "host.cores": 3, "tags": ["a", "b"], "on": True}
    assert (scope, version, service) == ("scope-1-1", "1.0", "svc-1")
    assert kinds == {
        "step 0": "INTERNAL",
        "step 1": "INTERNAL",
        "step 2": "SERVER",
        "step 3": "CLIENT",
        "step 4": "PRODUCER",
        "step 5": "CONSUMER",
    }
    assert statuses == [
        ("invoke_agent odd", "OK", None, None),
        ("step 2", "UNSET", None, None),
        ("step 3", "ERROR", "ValueError: boom", "ValueError"),
        ("step 4", "ERROR", "failed: bytes ✓", None),
    ]
    assert links[0]["span_id"] == "0000000000000007" and links[0]["attributes"] == {
        "why": "retry",
        "n": 2,
        "odd": {"x": "\x01"},
    }
    assert parents == 3 * 6
