"""configure(): providers, idempotence, OTLP out, redaction and the flush at exit."""

from __future__ import annotations

import http.server
import subprocess
import sys
import textwrap
import threading
import time

import duckdb
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SpanExporter

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl


def run_python(code: str, cwd) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_configure_is_idempotent(span_exporter):
    processor = tracing.STATE.processor
    exporters = dict(tracing.STATE.exporters)
    arl.configure(db_path=None, export_delay_ms=50)
    assert tracing.STATE.processor is processor
    assert tracing.STATE.exporters == exporters


def test_reconfigure_swaps_exporters_without_losing_spans(span_exporter, tmp_path):
    @arl.trace_agent(name="before")
    def before():
        return 1

    before()
    path = tmp_path / "later.duckdb"
    arl.configure(db_path=str(path), export_delay_ms=50)  # the memory exporter is flushed, then replaced
    assert [s.name for s in span_exporter.get_finished_spans()] == ["invoke_agent before"]
    assert set(tracing.STATE.exporters) == {"duckdb", "memory"}


def test_users_tracer_provider_is_kept_and_receives_spans(tmp_path):
    result = run_python(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import agent_rl_plugin as arl

        mine = TracerProvider()
        seen = InMemorySpanExporter()
        mine.add_span_processor(SimpleSpanProcessor(seen))
        trace.set_tracer_provider(mine)

        arl.configure(db="kept.duckdb")

        @arl.trace_agent(name="worker")
        def work(x):
            return x + 1

        assert work(1) == 2
        assert trace.get_tracer_provider() is mine
        assert [s.name for s in seen.get_finished_spans()] == ["invoke_agent worker"]
        arl.flush()
        print("ok")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = duckdb.connect(str(tmp_path / "kept.duckdb"), read_only=True).execute("select name from spans").fetchall()
    assert rows == [("invoke_agent worker",)]


def test_our_provider_becomes_global_when_none_is_set(tmp_path):
    result = run_python(
        """
        from opentelemetry import trace
        import agent_rl_plugin as arl
        arl.configure(db="global.duckdb")
        # another library tracing on the global provider lands in our store
        with trace.get_tracer("other.lib").start_as_current_span("chat other-model") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
        print(type(trace.get_tracer_provider()).__name__)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "TracerProvider"
    rows = duckdb.connect(str(tmp_path / "global.duckdb"), read_only=True).execute("select name from spans").fetchall()
    assert rows == [("chat other-model",)]


def test_ids_do_not_repeat_when_the_user_seeds_random(tmp_path):
    """RL scripts seed the global ``random``: rollout, trace and span ids must still be fresh."""
    script = """
        import random
        random.seed(42)
        import agent_rl_plugin as arl
        arl.configure(db=None)
        with arl.rollout(task_id="t") as info:
            from opentelemetry import trace
            context = trace.get_current_span().get_span_context()
            print(info.rollout_id, f"{context.trace_id:032x}", f"{context.span_id:016x}")
        """
    first, second = (run_python(script, tmp_path).stdout.split() for _ in range(2))
    assert len(first) == 3 and all(a != b for a, b in zip(first, second))


def test_spans_are_flushed_at_interpreter_exit(tmp_path):
    result = run_python(
        """
        import agent_rl_plugin as arl
        arl.configure(db="exit.duckdb", export_delay_ms=60000)  # nothing would be exported for a minute

        @arl.trace_tool
        def lookup(key):
            return key * 2

        for i in range(250):
            lookup(i)
        # no flush(): the process just ends
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    count = duckdb.connect(str(tmp_path / "exit.duckdb"), read_only=True).execute("select count(*) from tool_calls").fetchone()
    assert count == (250,)


class _OtlpSink(http.server.BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]] = []
    authorization: list[str | None] = []

    def do_POST(self):  # noqa: N802 - http.server naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.authorization.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_spans_also_go_to_an_otlp_collector(plugin_manager):
    server = http.server.HTTPServer(("127.0.0.1", 0), _OtlpSink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        arl.configure(db_path=None, otlp_endpoint=f"http://127.0.0.1:{server.server_port}", export_delay_ms=50)

        @arl.trace_agent(name="remote")
        def remote():
            return "hi"

        remote()
        assert arl.flush()
    finally:
        server.shutdown()
    assert _OtlpSink.received, "the collector received nothing"
    path, content_type, body = _OtlpSink.received[-1]
    assert path == "/v1/traces"
    assert content_type == "application/x-protobuf"
    assert b"invoke_agent remote" in body


SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"


def _stored_input(span_exporter) -> str:
    arl.flush()
    (span,) = span_exporter.get_finished_spans()
    return span.attributes.get("agent_rl.input", "")


def test_the_standard_otel_endpoint_variable_is_honoured(plugin_manager, monkeypatch):
    """OTEL_EXPORTER_OTLP_ENDPOINT (a base URL) works like otlp_endpoint, headers from the OTel
    variable too; an explicit otlp_endpoint wins."""
    from agent_rl_plugin.config import RLConfig
    from agent_rl_plugin.otlp_plugin import endpoint_for

    _OtlpSink.received.clear()
    _OtlpSink.authorization.clear()
    server = http.server.HTTPServer(("127.0.0.1", 0), _OtlpSink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0ken")
    try:
        arl.configure(db_path=None, export_delay_ms=50)

        @arl.trace_agent(name="remote")
        def remote():
            return "hi"

        remote()
        assert arl.flush()
    finally:
        server.shutdown()
    assert [path for path, _, _ in _OtlpSink.received] and all(p == "/v1/traces" for p, _, _ in _OtlpSink.received)
    assert set(_OtlpSink.authorization) == {"Bearer t0ken"}
    assert endpoint_for(RLConfig(otlp_endpoint="http://other:4318")) == "http://other:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9999/custom")
    assert endpoint_for(RLConfig()) == "http://traces:9999/custom"


def test_secrets_are_redacted_by_default(span_exporter):
    @arl.trace_agent(name="leaky")
    def leaky(prompt):
        return len(prompt)

    assert leaky(f"my key is {SECRET}") == len(f"my key is {SECRET}")  # the agent sees the real value
    stored = _stored_input(span_exporter)
    assert SECRET not in stored and "[REDACTED]" in stored


def test_redaction_can_be_switched_off(span_exporter):
    arl.configure(db_path=None, export_delay_ms=50, redact=False)

    @arl.trace_agent(name="leaky")
    def leaky(prompt):
        return prompt

    leaky(SECRET)
    assert SECRET in _stored_input(span_exporter)


def test_capture_content_off_keeps_no_content(span_exporter):
    arl.configure(db_path=None, export_delay_ms=50, capture_content=False)

    @arl.trace_agent(name="private")
    def private(prompt):
        return prompt

    private("my medical history")
    arl.flush()
    (span,) = span_exporter.get_finished_spans()
    assert not any("medical" in str(v) for v in span.attributes.values())


def test_a_transform_plugin_that_raises_is_skipped(span_exporter, plugin_manager, caplog):
    class Broken:
        @hookimpl
        def agent_rl_transform_attributes(self, attributes, span_name, config):
            raise RuntimeError("bad plugin")

    class Tagger:
        @hookimpl
        def agent_rl_transform_attributes(self, attributes, span_name, config):
            attributes["tagged"] = True

    plugin_manager.register(Broken())
    plugin_manager.register(Tagger())
    arl.configure(db_path=None, export_delay_ms=50, service_name="again")  # new config: transforms rebuilt

    @arl.trace_agent(name="fine")
    def fine():
        return 42

    assert fine() == 42
    arl.flush()
    (span,) = span_exporter.get_finished_spans()
    assert span.attributes["tagged"] is True
    assert "bad plugin" in caplog.text


def test_config_reads_environment(monkeypatch):
    monkeypatch.setenv("AGENT_RL_DB", "from-env.duckdb")
    monkeypatch.setenv("AGENT_RL_CAPTURE_CONTENT", "false")
    monkeypatch.setenv("AGENT_RL_REDACTION_PATTERNS", "secret-[0-9]+,token-[a-z]+")
    config = RLConfig.from_env(service_name="svc")
    assert config.db_path == "from-env.duckdb"
    assert config.capture_content is False
    assert config.redaction_patterns == ["secret-[0-9]+", "token-[a-z]+"]
    assert config.service_name == "svc"


def test_config_rejects_unknown_fields():
    with pytest.raises(ValueError, match="not_a_field"):
        RLConfig(not_a_field=1)


def test_disabled_records_nothing(span_exporter):
    arl.configure(db_path=None, enable_rl=False)

    @arl.trace_agent(name="quiet")
    def quiet():
        return "same"

    assert quiet() == "same"
    arl.flush()
    assert span_exporter.get_finished_spans() == ()
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_spans_dropped_by_a_full_queue_are_counted_and_reported(caplog):
    """The SDK's batch processor only logs a warning per span it drops; ours counts them."""
    import logging

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    from agent_rl_plugin.tracing import CountingBatchSpanProcessor

    release = threading.Event()

    class Stuck(SpanExporter):
        def export(self, spans):
            release.wait(10)
            return SpanExportResult.SUCCESS

    processor = CountingBatchSpanProcessor(Stuck(), max_queue_size=4, max_export_batch_size=2, schedule_delay_millis=10)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.ERROR, logger="agent_rl_plugin.tracing"):
        for i in range(40):
            tracer.start_span(f"s{i}").end()
    release.set()
    provider.shutdown()
    assert 30 <= processor.dropped <= 38  # the queue (4) and the batch being exported were kept
    assert sum("span queue is full" in r.getMessage() for r in caplog.records) == 1


def test_a_full_queue_slows_the_agent_instead_of_dropping_spans():
    """Back-pressure (queue_full_wait_ms): the thread ending a span waits for the exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    from agent_rl_plugin.tracing import CountingBatchSpanProcessor

    exported: list[str] = []

    class Slow(SpanExporter):
        def export(self, spans):
            time.sleep(0.01)
            exported.extend(s.name for s in spans)
            return SpanExportResult.SUCCESS

    processor = CountingBatchSpanProcessor(Slow(), max_queue_size=4, max_export_batch_size=2,
                                           schedule_delay_millis=10, queue_full_wait_s=5.0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    for i in range(40):
        tracer.start_span(f"s{i}").end()
    provider.shutdown()
    assert processor.dropped == 0 and processor.waited > 0
    assert sorted(exported) == sorted(f"s{i}" for i in range(40))
