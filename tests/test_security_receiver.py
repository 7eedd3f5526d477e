"""The receiver refuses what a web page or a hostile local query could do (issue 14, items 1-3, 5, 7).

Every test here failed on the receiver before this change: /query ran data-modifying CTEs and
file-reading table functions on the writer's connection, there was no token by default, Host and
Origin were not checked, text/plain and a missing Content-Type were accepted, a negative
Content-Length passed, connections were uncapped and snapshots were 0644 and unlimited.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time

import duckdb
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from test_receiver import JS, PB, make_spans, post

from hypothesis import HealthCheck, given, settings
from test_security_user_sql import _grammar

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.otlp_plugin import headers_for
from agent_rl_plugin.receiver import Receiver, ReceiverConfigError, RemoteQueryError, find_receiver, remote_query
from agent_rl_plugin.receiver.client import info_path, remote_query_table, request_snapshot


@pytest.fixture
def open_receiver(plugin_manager, tmp_path):
    """A receiver without a token (the weakest allowed setup), holding two traces."""
    receiver = Receiver(tmp_path / "served.duckdb", port=0, token="", linger_s=0.01).start()
    assert post(receiver.url + "/v1/traces", encode_spans(make_spans(2, "a")).SerializeToString(), PB)[0] == 200
    yield receiver
    receiver.stop()


def count(receiver, table: str = "spans"):
    value = "sum(value)" if table == "rewards" else "count(distinct span_id)"
    return remote_query(find_receiver(receiver.db), f"select count(*), {value} from {table}")[1]


@pytest.mark.parametrize("sql", [
    "with x as (delete from spans returning *) select * from x",
    "with x as (update rewards set value = 999 returning *) select * from x",
    "select * from (with x as (delete from spans returning *) select * from x)",
])
def test_query_refuses_data_modifying_ctes(open_receiver, sql):
    before = count(open_receiver), count(open_receiver, "rewards")
    status, _, body = post(open_receiver.url + "/query", json.dumps({"sql": sql}).encode(), JS)
    assert status == 403, body
    open_receiver.sink.flush()
    assert (count(open_receiver), count(open_receiver, "rewards")) == before
    assert before[0][0][0] == 4


@pytest.mark.parametrize("sql", ["select * from read_text('{canary}')", "select * from read_csv('{canary}')",
                                 "select * from glob('{folder}/*')", "select * from '{canary}'"])
def test_query_cannot_read_host_files(open_receiver, tmp_path, sql):
    canary = tmp_path / "canary.txt"
    canary.write_text("CANARY-51d0\n")
    text = sql.format(canary=canary, folder=tmp_path)
    status, _, body = post(open_receiver.url + "/query", json.dumps({"sql": text}).encode(), JS)
    assert status == 403 and b"CANARY" not in body and b"canary.txt" not in body.replace(str(canary).encode(), b"")


@pytest.fixture(scope="module")
def fuzz_receiver(tmp_path_factory):
    from agent_rl_plugin import plugins

    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "canary.txt").write_text("CANARY-51d0\n")
    receiver = Receiver(folder / "fz.duckdb", port=0, token="", linger_s=0.01, query_timeout_s=5).start()
    assert post(receiver.url + "/v1/traces", encode_spans(make_spans(2, "f")).SerializeToString(), PB)[0] == 200
    yield receiver, folder
    receiver.stop()
    plugins.set_plugin_manager(None)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(template=_grammar())
def test_fuzzed_queries_through_the_receiver_never_write_or_read_files(fuzz_receiver, template):
    receiver, folder = fuzz_receiver
    sql = template.format(canary=folder / "canary.txt", dir=folder)
    before = count(receiver), count(receiver, "rewards")
    status, _, body = post(receiver.url + "/query", json.dumps({"sql": sql}).encode(), JS)
    assert status in (200, 400, 403), body[:200]
    assert b"CANARY" not in body
    receiver.sink.flush()
    assert (count(receiver), count(receiver, "rewards")) == before
    assert not {"x.duckdb", "x.csv"} & set(os.listdir(folder))


def test_query_copies_follow_rows_that_arrive_outside_batches(open_receiver):
    """Spool segments merged by the receiver's writer add rows without a batch: /query sees them."""
    info = find_receiver(open_receiver.db)
    assert remote_query(info, "select count(*) from spans")[1] == [(4,)]
    cursor = open_receiver.sink.cursor()
    try:
        cursor.execute("insert into spans select * from spans limit 1")  # stands in for a merge
    finally:
        cursor.close()
    assert remote_query(info, "select count(*) from spans")[1] == [(5,)]


def test_query_is_time_and_row_limited(plugin_manager, tmp_path):
    with Receiver(tmp_path / "q.duckdb", port=0, token="", query_timeout_s=0.3, query_max_rows=5) as receiver:
        info = find_receiver(receiver.db)
        started = time.monotonic()
        with pytest.raises(RemoteQueryError, match="longer than 0.3 s"):
            remote_query(info, "select count(*) from range(10000000000) t(i) where i % 7 = 3")
        assert time.monotonic() - started < 5
        table, truncated = remote_query_table(info, "select * from range(100)")
        assert table.num_rows == 5 and truncated == "rows"


def test_a_client_that_leaves_stops_its_query(plugin_manager, tmp_path):
    with Receiver(tmp_path / "d.duckdb", port=0, token="", query_timeout_s=60, max_connections=1) as receiver:
        body = json.dumps({"sql": "select count(*) from range(10000000000) t(i) where i % 7 = 3"}).encode()
        with socket.create_connection(("127.0.0.1", receiver.port)) as sock:
            sock.sendall(b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            time.sleep(0.5)
        started = time.monotonic()
        while time.monotonic() - started < 10:  # the only slot frees once the query is interrupted
            status = post(receiver.url + "/healthz", b"", method="GET")[0]
            if status == 200:
                break
            time.sleep(0.1)
        assert status == 200 and time.monotonic() - started < 10


def test_a_token_is_made_when_none_is_given_and_local_clients_use_it(plugin_manager, tmp_path, monkeypatch):
    monkeypatch.delenv("AGENT_RL_SERVE_TOKEN", raising=False)
    monkeypatch.setenv("AGENT_RL_RUNTIME_DIR", str(tmp_path / "run"))
    with Receiver(tmp_path / "t.duckdb", port=0) as receiver:
        body = encode_spans(make_spans(1, "t")).SerializeToString()
        assert post(receiver.url + "/v1/traces", body, PB)[0] == 401
        info = find_receiver(receiver.db)
        assert info["token"] and len(info["token"]) >= 32
        assert stat.S_IMODE(os.stat(info_path(receiver.db)).st_mode) == 0o600
        assert remote_query(info, "select count(*) from spans")[1] == [(0,)]
        # A local OTLP exporter configured with only the endpoint finds the token.
        headers = headers_for(receiver.url + "/v1/traces", RLConfig(otlp_endpoint=receiver.url))
        assert headers == {"Authorization": f"Bearer {info['token']}"}
        exporter = OTLPSpanExporter(endpoint=receiver.url + "/v1/traces", headers=headers)
        assert exporter.export(make_spans(1, "exp")) is SpanExportResult.SUCCESS
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=a")  # merged, not replaced
        assert headers_for(receiver.url, RLConfig()) == {"x-team": "a", "Authorization": f"Bearer {info['token']}"}
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20other")  # the user's wins
        assert headers_for(receiver.url, RLConfig()) == {"authorization": "Bearer other"}
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_HEADERS")
        assert remote_query(info, "select count(*) from spans")[1] == [(2,)]
    assert headers_for(receiver.url + "/v1/traces", RLConfig(otlp_endpoint=receiver.url)) == {}


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
    {"Host": "evil.example:4318"},
    {"Sec-Fetch-Site": "cross-site"},
])
def test_browser_requests_are_refused_even_without_a_token(open_receiver, headers):
    before = count(open_receiver)
    forged = encode_spans(make_spans(1, "forged")).SerializeToString()
    assert post(open_receiver.url + "/v1/traces", forged, {**PB, **headers})[0] == 403
    assert post(open_receiver.url + "/query", b'{"sql": "select 1"}', {**JS, **headers})[0] == 403
    assert post(open_receiver.url + "/snapshot", b"{}", {**JS, **headers})[0] == 403
    open_receiver.sink.flush()
    assert count(open_receiver) == before
    assert post(open_receiver.url + "/query", b'{"sql": "select 1"}', {**JS, "Origin": "http://localhost:3000"})[0] == 200


def test_simple_request_content_types_are_refused(open_receiver):
    forged = json.dumps({"resourceSpans": []}).encode()
    assert post(open_receiver.url + "/query", b'{"sql": "select 1"}', {"Content-Type": "text/plain"})[0] == 415
    assert post(open_receiver.url + "/v1/traces", forged, {"Content-Type": "text/plain"})[0] == 415
    body = encode_spans(make_spans(1, "nt")).SerializeToString()
    assert post(open_receiver.url + "/v1/traces", body, {})[0] == 415  # urllib sends form-urlencoded
    assert post(open_receiver.url + "/snapshot", b"{}", {"Content-Type": "application/x-www-form-urlencoded"})[0] == 415


def _raw(port: int, head: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        answer = sock.recv(4096)
    return int(answer.split(b" ", 2)[1]) if answer else 0


@pytest.mark.parametrize("length, code", [(b"-1", 400), (b"abc", 400), (b"+5", 400), (b"1_0", 400), (None, 411)])
def test_bad_content_lengths_are_refused(open_receiver, length, code):
    header = b"" if length is None else b"Content-Length: " + length + b"\r\n"
    for path in (b"/v1/traces", b"/query"):
        head = (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + header + b"\r\n")
        assert _raw(open_receiver.port, head) == code


def test_beyond_loopback_needs_an_explicit_token(plugin_manager, tmp_path, monkeypatch):
    monkeypatch.delenv("AGENT_RL_SERVE_TOKEN", raising=False)
    for token in (None, ""):
        with pytest.raises(ReceiverConfigError, match="--token"):
            Receiver(tmp_path / "w.duckdb", host="0.0.0.0", port=0, token=token).start()
    from agent_rl_plugin.cli.common import UserError
    from agent_rl_plugin.cli.serve import serve

    with pytest.raises(UserError, match="--token"):
        serve(db=str(tmp_path / "w.duckdb"), host="0.0.0.0", port=0, token=None, no_token=False, allow_host=[],
              max_connections=4, stats=False, max_queue=10, max_body_mb=1, json_output=False)


def test_connections_over_the_cap_get_503(plugin_manager, tmp_path):
    with Receiver(tmp_path / "c.duckdb", port=0, token="", max_connections=2) as receiver:
        idle = [socket.create_connection(("127.0.0.1", receiver.port)) for _ in range(2)]
        try:
            time.sleep(0.3)
            assert _raw(receiver.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") == 503
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.3)
        assert post(receiver.url + "/healthz", b"", method="GET")[0] == 200
        assert receiver.stats_snapshot()["connections_refused"] == 1


def test_snapshots_are_private_limited_and_removed(plugin_manager, tmp_path):
    with Receiver(tmp_path / "s.duckdb", port=0, token="", max_snapshots=2, snapshot_interval_s=0.2) as receiver:
        info = find_receiver(receiver.db)
        paths = []
        for _ in range(4):
            paths.append(request_snapshot(info))  # the client waits out 429 + Retry-After
        assert post(receiver.url + "/snapshot", b"{}", JS)[0] == 429
        assert stat.S_IMODE(os.stat(receiver.snapshot_dir).st_mode) == 0o700
        kept = [p for p in paths if os.path.exists(p)]
        assert kept == paths[-2:]
        assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in kept)
        copy = duckdb.connect(kept[-1], read_only=True)
        assert copy.execute("select count(*) from spans").fetchone() == (0,)
        copy.close()
    assert not os.path.exists(receiver.snapshot_dir)
