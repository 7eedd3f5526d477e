"""``agent-rl serve`` with decode workers: request bodies decoded and converted in child processes
store exactly what the receiver stores decoding them itself; a worker that dies or hangs is
replaced without losing a span; workers that would store spans differently (a plugin registered
only in the serving process) are refused, and the receiver decodes by itself."""

from __future__ import annotations

import gzip
import json
import os
import signal
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from test_receiver import PB, make_spans, post, rows
from test_receiver_equivalence import SPAN_COLUMNS, _all_rows, _bodies, odd_request
from test_request_fields import with_zero_ids

from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.receiver import Receiver
from agent_rl_plugin.receiver.conversion import converter_fingerprint, receiver_converter
from agent_rl_plugin.receiver.decode import PROTOBUF, DecodeError
from agent_rl_plugin.receiver.workers import DecodePool, WorkerUnavailable, default_decode_workers

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"


def serve(tmp_path: Path, name: str, workers: int, **options) -> Receiver:
    return Receiver(
        tmp_path / f"{name}.duckdb", port=0, token="", linger_s=0.01, announce=False, decode_workers=workers, **options
    ).start()


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_workers_store_what_the_receiver_stores_decoding_by_itself(plugin_manager, tmp_path):
    """Every encoding of an odd request (three resources and scopes, every kind, status and
    attribute type, bad ids) and a request with secrets in names, attributes and status: same
    answers, same rows, same rewards, same refusals of bad bodies, with and without workers."""
    bodies = {**_bodies(odd_request()), "secrets": (with_zero_ids(odd_request()).SerializeToString(), PB)}
    bad = {
        "garbage": (b"\x0a\xff\xff\xff\xff\x0f", PB),
        "bad json": (b"{not json", {"Content-Type": "application/json"}),
        "gzip bomb": (gzip.compress(b"\x00" * 200_000), {**PB, "Content-Encoding": "gzip"}),
    }
    stored, answers = {}, {}
    for workers in (2, 0):
        receiver = serve(tmp_path, f"workers-{workers}", workers, max_body_bytes=100_000)
        try:
            assert (receiver.pool is not None) == (workers > 0), receiver.decode_workers_refused
            answers[workers] = [post(receiver.url + "/v1/traces", body, headers) for body, headers in bodies.values()]
            answers[workers] += [post(receiver.url + "/v1/traces", body, headers) for body, headers in bad.values()]
            stats = receiver.stats_snapshot()
        finally:
            receiver.stop()
        assert stats["decode_workers"] == workers
        stored[workers] = _all_rows(Path(receiver.db))
    assert [(status, body) for status, _, body in answers[2]] == [(status, body) for status, _, body in answers[0]]
    assert [status for status, _, _ in answers[2]] == [200] * len(bodies) + [400, 400, 413]
    (spans_2, rewards_2), (spans_0, rewards_0) = stored[2], stored[0]
    assert len(spans_2) >= 21
    for got, want in zip(spans_2, spans_0, strict=True):
        for column, a, b in zip(SPAN_COLUMNS.split(", "), got, want):
            assert repr(a) == repr(b), (column, a, b)  # NaN != NaN: compare the text
    assert rewards_2 == rewards_0 and rewards_2
    assert SECRET not in repr(spans_2) and "[REDACTED" in repr(spans_2)


def test_a_killed_worker_is_replaced_and_the_exporter_loses_nothing(plugin_manager, tmp_path):
    receiver = serve(tmp_path, "killed", 1)
    try:
        assert receiver.pool is not None
        url = receiver.url + "/v1/traces"
        (first,) = receiver.pool.pids
        os.kill(first, signal.SIGKILL)
        status, headers, body = post(url, encode_spans(make_spans(2, "a")).SerializeToString(), PB)
        # Nothing of the batch was taken; 503 is what every OTLP exporter retries.
        assert status == 503 and int(headers["Retry-After"]) >= 1 and b"decode worker failed" in body
        assert post(url, encode_spans(make_spans(2, "b")).SerializeToString(), PB)[0] == 200  # a new worker
        (second,) = receiver.pool.pids
        assert second != first and not alive(first)
        os.kill(second, signal.SIGKILL)
        exporter = OTLPSpanExporter(endpoint=url, timeout=30)
        assert exporter.export(make_spans(3, "c")) is SpanExportResult.SUCCESS  # retried after the 503
        stats = receiver.stats_snapshot()
    finally:
        receiver.stop()
    assert stats["decode_worker_restarts"] == 2 and stats["spans_dropped"] == 0
    names = [name for (name,) in rows(Path(receiver.db), columns="service_name")]
    assert sorted(set(names)) == ["svc-b", "svc-c"]  # "a" was refused, never half-stored
    assert names.count("svc-b") == 4 and names.count("svc-c") == 6


def test_a_hung_worker_is_stopped_after_the_reply_timeout_and_replaced(plugin_manager):
    """A worker that does not answer within ``reply_timeout_s`` is killed and replaced; the body
    gets "retry" once, and is refused for good when it stalls a worker again (the exporter's
    retry of a poisonous body must not take down worker after worker)."""
    converter = receiver_converter(32_768, lambda kind, exc: None)
    pool = DecodePool(
        1,
        max_body_bytes=1 << 20,
        max_attribute_size=32_768,
        fingerprint=converter_fingerprint(converter),
        reply_timeout_s=1.0,
    )
    assert pool.start() is None
    body = encode_spans(make_spans(1, "hung")).SerializeToString()
    try:
        (hung,) = pool.pids
        os.kill(hung, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(WorkerUnavailable, match="did not answer in time"):
            pool.decode(body, PROTOBUF, None)
        assert 0.9 <= time.monotonic() - started < 10 and not alive(hung)
        decoded = pool.decode(body, PROTOBUF, None)  # a fresh worker
        assert decoded.total == 2 and decoded.batch.num_spans == 2 and pool.restarts == 1

        poison = encode_spans(make_spans(1, "poison")).SerializeToString()
        for attempt in range(2):
            os.kill(pool.pids[0], signal.SIGSTOP)
            expected = (WorkerUnavailable, "retry") if attempt == 0 else (DecodeError, "fail twice.*refused")
            with pytest.raises(expected[0], match=expected[1]):
                pool.decode(poison, PROTOBUF, None)
        assert pool.decode(body, PROTOBUF, None).total == 2 and pool.restarts == 3

        # A body larger than the pipe, to a worker that stopped reading: the write gives up too.
        large = encode_spans(make_spans(4_000, "large")).SerializeToString()
        assert len(large) > 2 << 20
        os.kill(pool.pids[0], signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(WorkerUnavailable, match="did not take the body in time"):
            pool.decode(large, PROTOBUF, None)
        assert time.monotonic() - started < 10 and pool.restarts == 4
    finally:
        pool.close()
    assert pool.pids == []


class OnlyHere:
    """A plugin registered in the serving process only (no entry point): a redaction pattern
    and a normaliser a worker process would not have."""

    @hookimpl
    def agent_rl_redaction_patterns(self):
        return [r"internal-ticket-[0-9]+"]

    @hookimpl
    def agent_rl_register_normalizers(self, register):
        def tag(attributes, span_name):
            attributes["normalised.here"] = True

        register("only-here", tag)


def test_workers_that_would_store_spans_differently_are_refused(plugin_manager, tmp_path):
    plugin_manager.register(OnlyHere(), name="only-here")
    receiver = serve(tmp_path, "refused", 2)
    try:
        assert receiver.pool is None
        assert "differs in normalizers, redaction" in (receiver.decode_workers_refused or "")
        assert "no decode workers" in receiver.stats_snapshot()["last_error"]
        spans = make_spans(1, "here")
        spans[0]._attributes = {**spans[0].attributes, "note": "see internal-ticket-4242"}
        assert post(receiver.url + "/v1/traces", encode_spans(spans).SerializeToString(), PB)[0] == 200
    finally:
        receiver.stop()
    stored = {name: json.loads(attributes) for name, attributes in rows(Path(receiver.db), columns="name, attributes")}
    assert all(attributes.get("normalised.here") is True for attributes in stored.values())
    assert "internal-ticket-4242" not in json.dumps(stored) and "[REDACTED" in json.dumps(stored)


def test_stop_ends_the_workers(plugin_manager, tmp_path):
    receiver = serve(tmp_path, "stopped", 2)
    assert receiver.pool is not None
    pids = receiver.pool.pids
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    receiver.stop()
    assert not any(alive(pid) for pid in pids)


def test_default_decode_workers():
    assert [default_decode_workers(cpus) for cpus in (1, 2, 3, 4, 16)] == [0, 2, 3, 4, 4]


def test_a_large_body_goes_through_a_worker_whole(plugin_manager, tmp_path):
    """A body of megabytes (10,000 spans) and its rows cross the pipes in many reads."""
    body = encode_spans(make_spans(5_000, "large")).SerializeToString()
    assert len(body) > 2 << 20
    receiver = serve(tmp_path, "large", 1)
    try:
        assert receiver.pool is not None
        assert post(receiver.url + "/v1/traces", body, PB)[0] == 200
    finally:
        receiver.stop()
    assert rows(Path(receiver.db), columns="count(*), count(distinct span_id)", order="1") == [(10_000, 10_000)]
