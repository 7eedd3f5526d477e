"""No secret reaches the DuckDB file, from any field, by any path.

Generated FAKE secrets are placed in every place a secret can land (agent inputs and outputs,
LLM messages, tool arguments and results, list attributes, JSON nested in strings, span names,
event names and attributes, status messages, exception messages and stacktraces, link
attributes, resource attributes, reward reasons), recorded (1) in-process with
``configure(db=...)`` and the decorators/helpers, (2) by an SDK provider into the exporter
``configure`` builds, and (3) sent by another SDK to a real ``agent-rl serve`` receiver on
127.0.0.1. Then every table and view is read, and the raw bytes of the database file and its
WAL are searched after closing. A canary (not a secret) placed next to the secrets proves the
searches can see the text."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import duckdb
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.receiver import Receiver
from agent_rl_plugin.receiver.decode import request_to_json
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.transform import with_attribute_transform

from test_receiver import JS, PB, post

_rng = random.Random(14_3)
B62 = string.ascii_letters + string.digits


def _fake(n: int, alphabet: str = B62) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


CANARY = "canary-0d5e7c1b-visible"
SECRETS = {
    "openai": "sk-proj-" + _fake(40),
    "anthropic": "sk-ant-api03-" + _fake(60),
    "jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ" + _fake(40) + "." + _fake(40),
    "url_password": "Pg" + _fake(14),
    "kv_password": "Kv" + _fake(14),
    "aws_id": "AKIA" + _fake(16, string.ascii_uppercase + "234567"),
    "aws_secret": _fake(40, B62 + "/+"),
    "github": "ghp_" + _fake(36),
    "github_fine": "github_pat_11" + _fake(20, string.ascii_uppercase) + "_" + _fake(59),
    "slack": "xoxb-" + _fake(12, string.digits) + "-" + _fake(24),
    "google": "AIza" + _fake(35),
    "bearer": _fake(32),
    "pem": _fake(64),
}


def leak(tag: str) -> str:
    """A text holding every fake secret, in the forms they are found in the wild."""
    s = SECRETS
    return (
        f"{tag} {CANARY} key {s['openai']} and {s['anthropic']}; jwt {s['jwt']}; "
        f"db postgres://app:{s['url_password']}@db.internal/prod; password={s['kv_password']}; "
        f"aws {s['aws_id']} aws_secret_access_key={s['aws_secret']}; gh {s['github']} {s['github_fine']}; "
        f"slack {s['slack']}; google {s['google']}; Authorization: Bearer {s['bearer']}; "
        f"-----BEGIN PRIVATE KEY-----\n{s['pem']}\n-----END PRIVATE KEY-----"
    )


def short_leak(tag: str) -> str:
    """One secret of each kind that fits in a name (span and event names)."""
    return f"{tag} {CANARY} {SECRETS['openai']} {SECRETS['github']}"


def assert_no_secret(db: Path) -> None:
    """Every table and view holds no secret (and shows the canary); neither do the raw bytes of
    any file in the database's folder (the file, its WAL, spool segments)."""
    connection = duckdb.connect(str(db), read_only=True)
    try:
        relations = [r[0] for r in connection.execute(
            "select table_name from duckdb_tables() where not internal union all "
            "select view_name from duckdb_views() where not internal").fetchall()]
        assert {"spans", "rewards", "tool_calls", "llm_calls", "rollouts", "steps"} <= set(relations)
        dump = []
        for relation in relations:
            dump.append(repr(connection.execute(f'select * from "{relation}"').fetchall()))
    finally:
        connection.close()
    text = "\n".join(dump)
    assert CANARY in text
    found = {name for name, secret in SECRETS.items() if secret in text}
    assert not found, f"secrets in tables/views: {sorted(found)}"
    db = Path(db)
    files = [p for p in db.parent.rglob("*") if p.is_file()]  # the file, its .wal, spool segments, ...
    assert db in files
    raw = b"".join(p.read_bytes() for p in files)
    assert CANARY.encode() in raw  # the file keeps text searchable, so the next check means something
    found = {name for name, secret in SECRETS.items() if secret.encode() in raw}
    assert not found, f"secrets in the raw file: {sorted(found)}"


def record_sdk_spans(tracer: trace.Tracer) -> None:
    """Spans as any OTel SDK user writes them: secrets in every field a span has."""
    with tracer.start_as_current_span(short_leak("root"), attributes={
        sc.GEN_AI_OPERATION_NAME: "invoke_agent", "input.value": leak("input"),
        "tags": (leak("tuple"), "plain"), "nested": json.dumps({"cfg": {"password": SECRETS["kv_password"]}}),
    }) as root:
        root.add_event(short_leak("event"), {"detail": leak("event-attr")})
        root.add_event(sc.EVENT_EVALUATION_RESULT, {sc.GEN_AI_EVALUATION_NAME: "quality",
                                                    sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.5,
                                                    sc.GEN_AI_EVALUATION_EXPLANATION: leak("reason")})
        with tracer.start_as_current_span("tool child", links=[Link(root.get_span_context(), {"why": leak("link")})]) as child:
            child.record_exception(RuntimeError(leak("exception")))
            child.set_status(Status(StatusCode.ERROR, leak("status")))


def sdk_provider(memory: InMemorySpanExporter | None = None) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": short_leak("svc"), "deploy": leak("resource")}))
    if memory is not None:
        provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider


def test_in_process_recording_stores_no_secret(plugin_manager, tmp_path: Path):
    db = tmp_path / "agent.duckdb"
    arl.configure(db=str(db), export_delay_ms=20)

    @arl.trace_tool(name=short_leak("tool"))
    def lookup(query: str) -> str:
        if "fail" in query:
            raise PermissionError(leak("tool-error"))
        return leak("tool-result")

    @arl.trace_agent(name=short_leak("agent"))
    def agent(prompt: str, secrets: list[str]) -> str:
        arl.record_llm_call(model="gpt-4o-mini", input_messages=[{"role": "user", "content": leak("llm-in")}],
                            output=leak("llm-out"), input_tokens=10, output_tokens=5)
        arl.record_tool_call("search", arguments={"q": leak("args"), "list": [leak("arg-list")]},
                             result=leak("result"), error=RuntimeError(leak("record-error")))
        current = trace.get_current_span()
        current.set_attribute("custom.tags", (leak("attr-tuple"), "plain"))
        current.add_event(short_leak("custom-event"), {"x": leak("custom-event-attr")})
        with trace.get_tracer("user.code").start_as_current_span(
            "linked", links=[Link(current.get_span_context(), {"note": leak("link")})]
        ):
            pass
        lookup("ok")
        try:
            lookup("fail")
        except PermissionError:
            pass
        arl.emit_reward(1.0, name="quality", reason=leak("reward-reason"), metadata={"why": leak("reward-meta")})
        return leak("agent-output")

    with arl.rollout(task_id="t1"):
        agent(leak("agent-input"), [leak("list-arg")])
    try:
        agent_failing = arl.trace_agent(name="failing")(lambda: (_ for _ in ()).throw(ValueError(leak("agent-error"))))
        agent_failing()
    except ValueError:
        pass
    assert arl.flush()
    arl.shutdown()
    assert_no_secret(db)


def test_sdk_spans_through_the_configured_exporter_store_no_secret(plugin_manager, tmp_path: Path):
    """The exporter and transform configure() builds, fed by a provider with a secret-laden
    resource (as OTEL_RESOURCE_ATTRIBUTES would make) and names, links, statuses."""
    db = tmp_path / "sdk.duckdb"
    exporter = with_attribute_transform(DuckDBSpanExporter(db), RLConfig(db_path=None))
    provider = sdk_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    record_sdk_spans(provider.get_tracer("other.sdk"))
    provider.shutdown()
    assert_no_secret(db)


@pytest.mark.parametrize("body_format", ["protobuf", "json"])
def test_spans_from_another_sdk_through_agent_rl_serve_store_no_secret(plugin_manager, tmp_path: Path, body_format):
    memory = InMemorySpanExporter()
    provider = sdk_provider(memory)
    record_sdk_spans(provider.get_tracer("other.sdk"))
    provider.shutdown()
    request = encode_spans(memory.get_finished_spans())
    served = Receiver(tmp_path / "served.duckdb", port=0, token="", linger_s=0.01).start()
    try:
        if body_format == "protobuf":
            status, _, answer = post(served.url + "/v1/traces", request.SerializeToString(), PB)
        else:
            status, _, answer = post(served.url + "/v1/traces", request_to_json(request).encode(), JS)
        assert status == 200, answer
    finally:
        served.stop()
    assert_no_secret(served.db)


def test_otlp_export_from_the_agent_process_sends_no_secret(plugin_manager):
    """Exporters other than ours get span copies whose names, statuses, events, links and
    resource are masked too (TransformingSpanExporter)."""
    memory = InMemorySpanExporter()
    wrapped = with_attribute_transform(memory, RLConfig(db_path=None))
    provider = sdk_provider()
    provider.add_span_processor(SimpleSpanProcessor(wrapped))
    record_sdk_spans(provider.get_tracer("other.sdk"))
    provider.shutdown()
    exported = repr([span.to_json() for span in memory.get_finished_spans()])
    assert CANARY in exported
    assert not {name for name, secret in SECRETS.items() if secret in exported}


def test_scored_reward_rows_store_no_secret(tmp_path: Path, monkeypatch):
    """``agent-rl score`` writes reward rows itself: reasons, labels, errors and metrics that
    quote a rollout's content are masked too (with the AGENT_RL_* redaction settings)."""
    from agent_rl_plugin.rewards.rows import Outcome, RowContext, RowWriter, StepRow, outcome_rows

    db = tmp_path / "scores.duckdb"
    ctx = RowContext(rollout_id="r1", name="judge", plugin="judge", plugin_version="1", source="scored",
                     input_hash="h")
    ok = Outcome("ok", score=0.5, reason=leak("reason"), label=short_leak("label"),
                 metrics=json.dumps({"quote": leak("metrics")}),
                 steps=[StepRow(step_index=0, value=1.0, reason=leak("step-reason"), metrics="{}")])
    failed = Outcome.failed(leak("error"), traceback_text=leak("traceback"))
    with RowWriter(str(db)) as writer:
        writer.add(outcome_rows(ctx, ok))
        writer.add(outcome_rows(ctx, failed))
    assert_no_secret(db)
    monkeypatch.setenv("AGENT_RL_REDACT", "0")  # the switch is honoured here too
    assert SECRETS["openai"] in outcome_rows(ctx, ok)[0]["reason"]
