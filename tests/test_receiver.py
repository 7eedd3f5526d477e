"""``Receiver``: OTLP/HTTP bodies land as the in-process exporter's rows; errors, auth, limits,
back-pressure, counters and a graceful stop. Real HTTP on 127.0.0.1, real DuckDB files."""

from __future__ import annotations

import gzip
import json
import threading
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import duckdb
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.receiver import Receiver, find_receiver, remote_query
from agent_rl_plugin.receiver.client import RemoteQueryError
from agent_rl_plugin.receiver.decode import request_to_json
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.store.exporter import collect_normalizers

SPAN_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, kind, start_time, end_time, duration_ms, status_code, "
    "status_message, attributes, events, links, resource, scope_name, scope_version, service_name, "
    "rollout_id, task_id, group_id, is_rollout_root, operation, span_kind, start_unix_nano, end_unix_nano"
)


def make_spans(n_traces: int, tag: str) -> list[ReadableSpan]:
    """Finished spans with every feature a row carries: attributes of each type, an error
    (and an OK) status, a kind, events (one a reward), a link, a parent, a GenAI operation."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{tag}", "team": "rl"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test.receiver", "1.2.3")
    for i in range(n_traces):
        with tracer.start_as_current_span(
            f"invoke_agent {tag}",
            kind=SpanKind.SERVER,
            attributes={
                sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                sc.TASK_ID: f"{tag}-{i}",
                "flag": True,
                "ratio": 0.25,
                "count": 7,
                "tags": ("a", "b"),
                "numbers": (1, 2, 3),
            },
        ) as root:
            root.add_event(
                sc.EVENT_EVALUATION_RESULT,
                {sc.GEN_AI_EVALUATION_NAME: "quality", sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.5 + i},
            )
            with tracer.start_as_current_span(
                "chat tiny",
                kind=SpanKind.CLIENT,
                links=[Link(root.get_span_context(), {"why": "x"})],
                attributes={
                    sc.GEN_AI_OPERATION_NAME: "chat",
                    sc.GEN_AI_USAGE_INPUT_TOKENS: 11 + i,
                    sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "content": "héllo ✓"}]),
                },
            ) as child:
                child.add_event("note", {"k": "v"})
                child.set_status(Status(StatusCode.ERROR, "ValueError: boom"))
            if i % 2:
                root.set_status(Status(StatusCode.OK))  # every status code: UNSET, OK, ERROR
    provider.shutdown()
    return list(memory.get_finished_spans())


def rows(db: Path, table: str = "spans", columns: str = SPAN_COLUMNS, order: str = "trace_id, span_id") -> list[tuple]:
    connection = duckdb.connect(str(db), read_only=True)
    try:
        return connection.execute(f"select {columns} from {table} order by {order}").fetchall()
    finally:
        connection.close()


def reference_db(tmp_path: Path, spans: list[ReadableSpan], name: str = "reference.duckdb") -> Path:
    """The same spans through the in-process exporter."""
    path = tmp_path / name
    exporter = DuckDBSpanExporter(path, normalizers=collect_normalizers(), max_attribute_size=32_768)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    return path


def post(url: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST") -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, data=body if method == "POST" else None, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


@pytest.fixture
def receiver(plugin_manager, tmp_path: Path):
    started = Receiver(tmp_path / "served.duckdb", port=0, token="", linger_s=0.01).start()
    yield started
    started.stop()


def test_protobuf_json_gzip_deflate_bodies_land_as_in_process_rows(receiver, tmp_path):
    sets = {name: make_spans(3, name) for name in ("pb", "json", "gzip", "deflate", "json_gzip")}
    url = receiver.url + "/v1/traces"
    bodies = {
        "pb": (encode_spans(sets["pb"]).SerializeToString(), PB),
        "json": (request_to_json(encode_spans(sets["json"])).encode(), JS),
        "gzip": (gzip.compress(encode_spans(sets["gzip"]).SerializeToString()), {**PB, "Content-Encoding": "gzip"}),
        "deflate": (
            zlib.compress(encode_spans(sets["deflate"]).SerializeToString()),
            {**PB, "Content-Encoding": "deflate"},
        ),
        "json_gzip": (
            gzip.compress(request_to_json(encode_spans(sets["json_gzip"])).encode()),
            {**JS, "Content-Encoding": "gzip"},
        ),
    }
    for name, (body, headers) in bodies.items():
        status, answer_headers, answer = post(url, body, headers)
        assert status == 200, (name, answer)
        if headers["Content-Type"] == "application/json":
            assert answer_headers["Content-Type"] == "application/json" and json.loads(answer) == {}
        else:
            assert answer_headers["Content-Type"] == "application/x-protobuf"
            response = ExportTraceServiceResponse.FromString(answer)
            assert not response.HasField("partial_success")
    receiver.stop()
    everything = [span for spans in sets.values() for span in spans]
    expected = reference_db(tmp_path, everything)
    got = rows(receiver.db)
    assert len(got) == len(everything) == 30
    assert got == rows(expected)
    reward_columns = "reward_id, rollout_id, step_index, name, value, source, created_at, trace_id, span_id"
    assert rows(receiver.db, "rewards", reward_columns, "reward_id") == rows(
        expected, "rewards", reward_columns, "reward_id"
    )
    assert len(rows(receiver.db, "rewards", reward_columns, "reward_id")) == 15
    # The canonical views agree too (they read the JSON attributes and events).
    for view in ("llm_calls", "rollouts", "steps"):
        assert rows(receiver.db, view, "*", "all") == rows(expected, view, "*", "all") != []


def test_a_span_recorded_by_an_agent_both_ways_is_the_same_row(receiver, tmp_path):
    """configure(db=..., otlp_endpoint=...) sends each span to the local file and to the receiver."""
    local = tmp_path / "local.duckdb"
    arl.configure(db=str(local), otlp_endpoint=receiver.url, export_delay_ms=50)

    @arl.trace_tool
    def add(a: int, b: int) -> int:
        return a + b

    @arl.trace_agent(name="adder")
    def agent(x: int) -> int:
        return add(x, 1) + add(x, 2)

    for i in range(3):
        with arl.rollout(task_id=f"t{i}", group_id="g"):
            agent(i)
            arl.emit_reward(1.0 * i, name="exact")
    assert arl.flush()
    arl.shutdown()
    receiver.stop()
    local_rows = rows(local)
    assert len(local_rows) >= 9
    assert rows(receiver.db) == local_rows
    for view in ("rollouts", "steps", "tool_calls"):
        assert rows(receiver.db, view, "*", "all") == rows(local, view, "*", "all") != []


def test_bad_bodies_get_400_and_the_server_keeps_going(receiver):
    url = receiver.url + "/v1/traces"
    good = encode_spans(make_spans(1, "ok")).SerializeToString()
    cases = [
        (b"\xff\xfe not protobuf at all", PB, 400),
        (b"{not json", JS, 400),
        (b"[1, 2]", JS, 400),
        (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz" * 16}]}]}]}).encode(), JS, 400),
        (b"not gzip", {**PB, "Content-Encoding": "gzip"}, 400),
        (gzip.compress(good)[:-10], {**PB, "Content-Encoding": "gzip"}, 400),
        (good, {"Content-Type": "text/plain"}, 415),
        (good, {**PB, "Content-Encoding": "br"}, 415),
    ]
    for body, headers, code in cases:
        status, answer_headers, answer = post(url, body, headers)
        assert status == code, (body[:20], answer)
        assert json.loads(answer)["error"]
    assert post(url, good, PB)[0] == 200
    stats = receiver.stats_snapshot()
    assert stats["batches_rejected"] == len(cases) and stats["batches_accepted"] == 1
    assert remote_query(find_receiver(receiver.db), "select count(*) from spans")[1] == [(2,)]


def test_wrong_path_404_wrong_method_405(receiver):
    assert post(receiver.url + "/v1/metrics", b"x", PB)[0] == 404
    assert post(receiver.url + "/nothing", b"", method="GET")[0] == 404
    assert post(receiver.url + "/v1/traces", b"", method="GET")[0] == 405


def test_token_required_when_set(plugin_manager, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_RL_SERVE_TOKEN", "s3cret")
    with Receiver(tmp_path / "t.duckdb", port=0) as guarded:
        url = guarded.url + "/v1/traces"
        body = encode_spans(make_spans(1, "tok")).SerializeToString()
        assert post(url, body, PB)[0] == 401
        assert post(url, body, {**PB, "Authorization": "Bearer wrong"})[0] == 401
        assert post(guarded.url + "/stats", b"", method="GET")[0] == 401
        assert post(guarded.url + "/healthz", b"", method="GET")[0] == 200
        assert post(url, body, {**PB, "Authorization": "Bearer s3cret"})[0] == 200
        # The real exporter with the header configured gets through.
        exporter = OTLPSpanExporter(endpoint=url, headers={"Authorization": "Bearer s3cret"})
        assert exporter.export(make_spans(1, "exp")) is SpanExportResult.SUCCESS
        assert find_receiver(guarded.db)["token"] == "s3cret"
        assert remote_query(find_receiver(guarded.db), "select count(*) from spans")[1] == [(4,)]
        stats = guarded.stats_snapshot()
        assert stats["spans_accepted"] == 4 and stats["batches_rejected"] == 2


def test_bodies_over_the_limit_get_413(plugin_manager, tmp_path):
    with Receiver(tmp_path / "l.duckdb", port=0, token="", max_body_bytes=4096) as small:
        url = small.url + "/v1/traces"
        big = encode_spans(make_spans(12, "big")).SerializeToString()
        assert len(big) > 4096
        assert post(url, big, PB)[0] == 413
        bomb = gzip.compress(b"\x00" * 100_000)  # small on the wire, too large inflated
        assert len(bomb) < 4096
        assert post(url, bomb, {**PB, "Content-Encoding": "gzip"})[0] == 413
        assert post(url, encode_spans(make_spans(1, "fits")).SerializeToString(), PB)[0] == 200


def test_full_queue_answers_503_with_retry_after_and_the_exporter_retries(plugin_manager, tmp_path):
    with Receiver(
        tmp_path / "bp.duckdb",
        port=0,
        token="",
        max_pending_spans=10,
        write_delay_s=1.5,
        linger_s=0.0,
        admission_wait_s=0,
    ) as slow:
        url = slow.url + "/v1/traces"
        first = encode_spans(make_spans(4, "first")).SerializeToString()  # 8 spans: fits
        assert post(url, first, PB)[0] == 200
        status, headers, body = post(url, encode_spans(make_spans(2, "second")).SerializeToString(), PB)
        # 503, not 429: the lowest OpenTelemetry exporter we support (1.34) retries 408 and 5xx only.
        assert status == 503 and int(headers["Retry-After"]) >= 1 and b"queue full" in body
        assert slow.stats_snapshot()["queue_depth"] == 8
        # The OTel exporter (newest and lowest supported) retries and succeeds once the writer caught up.
        exporter = OTLPSpanExporter(endpoint=url, timeout=20)
        started = time.monotonic()
        assert exporter.export(make_spans(2, "third")) is SpanExportResult.SUCCESS
        assert time.monotonic() - started >= 0.5  # it had to wait for the queue to drain
        stats = slow.stats_snapshot()
    assert stats["spans_rejected"] >= 4 and stats["batches_rejected"] >= 1
    assert len(rows(slow.db)) == 12  # 8 + 4 retried; the refused "second" batch was never acknowledged


def test_a_full_queue_holds_batches_in_arrival_order_then_answers_503(plugin_manager, tmp_path):
    """Back-pressure first waits (first come, first served), and only then refuses: a small batch
    that would fit does not overtake a bigger one that came first; a batch that gets no room
    within ``admission_wait_s`` gets 503 and was not taken; one larger than the whole queue gets 413."""
    with Receiver(
        tmp_path / "wait.duckdb",
        port=0,
        token="",
        max_pending_spans=10,
        write_delay_s=0.6,
        linger_s=0.0,
        admission_wait_s=10.0,
    ) as slow:
        url = slow.url + "/v1/traces"
        assert post(url, encode_spans(make_spans(4, "first")).SerializeToString(), PB)[0] == 200  # 8 of 10
        answered: dict[str, tuple[int, float]] = {}
        started = time.monotonic()

        def send(tag: str, n_traces: int, delay: float) -> None:
            time.sleep(delay)
            status = post(url, encode_spans(make_spans(n_traces, tag)).SerializeToString(), PB)[0]
            answered[tag] = (status, time.monotonic() - started)

        big = threading.Thread(target=send, args=("big", 4, 0.0))  # 8 spans: waits for the first write
        small = threading.Thread(target=send, args=("small", 1, 0.2))  # 2 spans: would fit now (8 + 2)
        for thread in (big, small):
            thread.start()
        for thread in (big, small):
            thread.join()
        assert answered["big"][0] == answered["small"][0] == 200
        assert 0.4 <= answered["big"][1] < 5.0  # held until the first write made room, not to the timeout
        assert answered["small"][1] >= answered["big"][1] - 0.05  # its turn came after the big one's
        stats = slow.stats_snapshot()
        assert stats["batches_delayed"] == 2 and stats["batches_rejected"] == 0
    assert len(rows(slow.db)) == 18

    with Receiver(
        tmp_path / "refuse.duckdb",
        port=0,
        token="",
        max_pending_spans=10,
        write_delay_s=2.0,
        linger_s=0.0,
        admission_wait_s=0.3,
    ) as slower:
        url = slower.url + "/v1/traces"
        assert post(url, encode_spans(make_spans(4, "first")).SerializeToString(), PB)[0] == 200
        started = time.monotonic()
        status, headers, _ = post(url, encode_spans(make_spans(2, "late")).SerializeToString(), PB)
        assert status == 503 and int(headers["Retry-After"]) >= 1 and time.monotonic() - started >= 0.3
        stats = slower.stats_snapshot()
        assert stats["batches_delayed"] == 1 and stats["batches_rejected"] == 1 and stats["queue_depth"] == 8
        # A batch that can never fit (more than the bound) is refused at once, without waiting,
        # with a status no exporter retries and the fix in the message.
        started = time.monotonic()
        status, headers, body = post(url, encode_spans(make_spans(6, "huge")).SerializeToString(), PB)
        assert status == 413 and "Retry-After" not in headers and time.monotonic() - started < 0.3
        assert b"12 spans in one batch, the whole queue holds 10" in body and b"--max-queue" in body
    assert len(rows(slower.db)) == 8


def test_healthz_and_stats_counters(receiver):
    status, _, body = post(receiver.url + "/healthz", b"", method="GET")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    url = receiver.url + "/v1/traces"
    for tag in ("a", "b", "c"):
        assert post(url, encode_spans(make_spans(2, tag)).SerializeToString(), PB)[0] == 200
    assert post(url, b"garbage", PB)[0] == 400
    assert receiver.sink.flush()
    status, _, body = post(receiver.url + "/stats", b"", method="GET")
    stats = json.loads(body)
    assert status == 200
    assert stats["requests"] == 4 and stats["batches_accepted"] == 3 and stats["batches_rejected"] == 1
    assert stats["spans_received"] == stats["spans_accepted"] == stats["spans_written"] == 12
    assert stats["spans_rejected"] == 0 and stats["spans_dropped"] == 0 and stats["queue_depth"] == 0
    assert stats["queue_limit"] == 200_000 and stats["db"] == str(receiver.db)
    assert stats["batches_delayed"] == 0
    assert stats["decode_s"] > 0 and stats["convert_s"] > 0 and stats["commit_s"] > 0  # where the time goes


def test_query_endpoint_reads_and_refuses_writes(receiver):
    url = receiver.url + "/v1/traces"
    assert post(url, encode_spans(make_spans(2, "q")).SerializeToString(), PB)[0] == 200
    info = find_receiver(receiver.db)
    columns, result = remote_query(info, "select name, start_time, is_rollout_root from spans order by name")
    assert columns == ["name", "start_time", "is_rollout_root"] and len(result) == 4
    assert result[0][0] == "chat tiny" and result[0][1].year >= 2024 and result[0][2] is False
    with pytest.raises(RemoteQueryError, match="read-only"):
        remote_query(info, "delete from spans")
    with pytest.raises(RemoteQueryError, match="SQL error"):
        remote_query(info, "select * from no_such_table")
    assert remote_query(info, "select count(*) from spans")[1] == [(4,)]


def test_stop_writes_everything_acknowledged_then_refuses(plugin_manager, tmp_path):
    slow = Receiver(tmp_path / "stop.duckdb", port=0, token="", write_delay_s=0.3, linger_s=0.0, batch_rows=10).start()
    url = slow.url + "/v1/traces"
    acknowledged = 0
    for i in range(8):
        spans = make_spans(3, f"s{i}")
        if post(url, encode_spans(spans).SerializeToString(), PB)[0] == 200:
            acknowledged += len(spans)
    assert acknowledged == 48 and slow.stats_snapshot()["queue_depth"] > 0  # the writer is behind
    final = slow.stop()
    assert final["spans_written"] == 48 and final["queue_depth"] == 0
    assert len(rows(slow.db)) == 48
    assert find_receiver(slow.db) is None and not Path(str(slow.db) + ".serve.json").exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, data=b"", timeout=5)


def test_requests_during_stop_are_refused_not_lost(plugin_manager, tmp_path):
    """A batch arriving while the receiver stops gets 503 (never a 200 that is then not written)."""
    slow = Receiver(tmp_path / "race.duckdb", port=0, token="", write_delay_s=0.2, linger_s=0.0, batch_rows=6).start()
    url = slow.url + "/v1/traces"
    results: list[tuple[int, int]] = []

    def sender(k: int) -> None:
        for i in range(10):
            spans = make_spans(1, f"r{k}-{i}")
            try:
                status = post(url, encode_spans(spans).SerializeToString(), PB)[0]
            except OSError:
                status = 0
            results.append((status, len(spans)))

    threads = [threading.Thread(target=sender, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    slow.stop()
    for thread in threads:
        thread.join()
    acknowledged = sum(n for status, n in results if status == 200)
    assert {status for status, _ in results} <= {200, 503, 0}
    assert acknowledged > 0
    assert len(rows(slow.db)) == acknowledged


def test_serve_stats_command_prints_the_counters(receiver, plugin_manager, capsys):
    from agent_rl_plugin.cli import serve as serve_cli
    from agent_rl_plugin.cli.main import main

    if not plugin_manager.is_registered(serve_cli):
        plugin_manager.register(serve_cli, name="cli_serve")
    assert post(receiver.url + "/v1/traces", encode_spans(make_spans(2, "st")).SerializeToString(), PB)[0] == 200

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        out, err = capsys.readouterr()
        return exit_info.value.code or 0, out, err

    code, out, _ = run("serve", "--stats", "--port", str(receiver.port), "--json")
    assert code == 0 and json.loads(out)["spans_accepted"] == 4
    code, out, _ = run("serve", "--stats", "--port", str(receiver.port))
    assert code == 0 and "spans_accepted" in out and "4" in out
    receiver.stop()
    code, _, err = run("serve", "--stats", "--port", str(receiver.port))
    assert code == 1 and "no receiver answers" in err and "agent-rl serve --db" in err
