"""A failed span that only says why in an OTel ``exception`` event (``span.record_exception``)
gets its error columns filled at ingest.

pydantic-ai sets status ERROR without a description and records the exception as an event;
OpenInference and Traceloop give a description but leave the exception type in the event. The
spans here are real SDK spans from a ``TracerProvider`` exported by the real
``DuckDBSpanExporter`` into a DuckDB file, read back through the views.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import duckdb
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, Tracer

from agent_rl_plugin import plugins
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store import DuckDBSpanExporter


def record(path: Path, run: Callable[[Tracer], None], **exporter_options: Any) -> duckdb.DuckDBPyConnection:
    """Run ``run(tracer)`` with spans going through the real exporter into ``path``."""
    transform = exporter_options.pop("transform", None)
    exporter = DuckDBSpanExporter(
        path, plugin_manager=plugins.new_plugin_manager(load_entry_points=False), **exporter_options
    )
    if transform is not None:
        exporter.set_attribute_transform(transform)
    provider = TracerProvider(resource=Resource({"service.name": "exception-events"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run(provider.get_tracer("test"))
    provider.shutdown()  # flushes and closes the exporter
    assert exporter.stats["last_error"] is None, exporter.stats
    return duckdb.connect(str(path), read_only=True)


def rows(connection: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    relation = connection.sql(sql)
    return [dict(zip(relation.columns, row)) for row in relation.fetchall()]


def fail_like_pydantic_ai(span, exc: BaseException) -> None:
    """What pydantic-ai does with an exception: an event, and a status without description."""
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR))


def tool_span(tracer: Tracer, name: str, call_id: str, exc: BaseException | None = None, **extra: Any) -> None:
    attributes = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: name,
        sc.GEN_AI_TOOL_CALL_ID: call_id,
        **extra,
    }
    with tracer.start_as_current_span(
        f"execute_tool {name}", attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        if exc is not None:
            try:
                raise exc
            except Exception as raised:
                fail_like_pydantic_ai(span, raised)


def test_a_pydantic_ai_tool_error_shows_its_type_and_message(tmp_path):
    def run(tracer):
        with tracer.start_as_current_span(
            "invoke_agent calc", attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "calc"},
            record_exception=False, set_status_on_exception=False,
        ) as agent:
            tool_span(tracer, "divide", "c1", ZeroDivisionError("division by zero"))
            tool_span(tracer, "lookup", "c2")
            fail_like_pydantic_ai(agent, ValueError("kaput: test"))

    connection = record(tmp_path / "s.duckdb", run)
    tools = rows(connection, "select call_id, status, error_type, error from tool_calls order by call_id")
    assert tools == [
        {"call_id": "c1", "status": "error", "error_type": "ZeroDivisionError",
         "error": "ZeroDivisionError: division by zero"},
        {"call_id": "c2", "status": "ok", "error_type": None, "error": None},
    ]
    (rollout,) = rows(connection, "select status, error, n_tool_calls, n_tool_errors from rollouts")
    assert rollout == {"status": "error", "error": "ValueError: kaput: test", "n_tool_calls": 2, "n_tool_errors": 1}
    (agent,) = rows(connection, "select status, error_type, error from agents")
    assert agent == {"status": "error", "error_type": "ValueError", "error": "ValueError: kaput: test"}
    # the row itself: the status message and the error.type attribute; the event is kept as recorded
    (span,) = rows(connection, "select status_message, attributes, events from spans where name = 'execute_tool divide'")
    assert span["status_message"] == "ZeroDivisionError: division by zero"
    assert json.loads(span["attributes"])[sc.ERROR_TYPE] == "ZeroDivisionError"
    (event,) = json.loads(span["events"])
    assert event["name"] == "exception" and event["attributes"]["exception.message"] == "division by zero"


def test_the_last_exception_event_counts(tmp_path):
    def run(tracer):
        with tracer.start_as_current_span("execute_tool fetch", attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "fetch"}) as span:
            span.record_exception(TimeoutError("first try timed out"))
            span.add_event("retry", {"attempt": 2})
            span.record_exception(ConnectionError("host unreachable"))
            span.add_event("gave up")
            span.set_status(StatusCode.ERROR)

    connection = record(tmp_path / "s.duckdb", run)
    (tool,) = rows(connection, "select error_type, error from tool_calls")
    assert tool == {"error_type": "ConnectionError", "error": "ConnectionError: host unreachable"}


def test_a_description_is_kept_and_the_missing_type_filled(tmp_path):
    """OpenInference and Traceloop: a status description, the exception type only in the event."""

    def run(tracer):
        with tracer.start_as_current_span("divide", attributes={
            "openinference.span.kind": "TOOL", "tool.name": "divide", "input.value": '{"a": 1, "b": 0}'},
            record_exception=False, set_status_on_exception=False) as span:
            span.record_exception(ZeroDivisionError("division by zero"))
            span.set_status(Status(StatusCode.ERROR, "ZeroDivisionError: division by zero"))
        with tracer.start_as_current_span("divide.tool", attributes={
            "traceloop.span.kind": "tool", "traceloop.entity.name": "divide", "gen_ai.tool.name": "divide"},
            record_exception=False, set_status_on_exception=False) as span:
            span.record_exception(ZeroDivisionError("division by zero"))
            span.set_status(Status(StatusCode.ERROR, "division by zero"))

    connection = record(tmp_path / "s.duckdb", run)
    tools = rows(connection, "select tool_name, status, error_type, error from tool_calls order by start_time")
    assert tools == [
        {"tool_name": "divide", "status": "error", "error_type": "ZeroDivisionError",
         "error": "ZeroDivisionError: division by zero"},
        {"tool_name": "divide", "status": "error", "error_type": "ZeroDivisionError", "error": "division by zero"},
    ]


def test_what_the_span_says_itself_wins_and_other_spans_are_untouched(tmp_path):
    def run(tracer):
        # our own instrumentation: error.type and a description, plus the event
        with tracer.start_as_current_span("execute_tool a", attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "a", sc.ERROR_TYPE: "mylib.Bad"},
            record_exception=False, set_status_on_exception=False) as span:
            span.record_exception(ValueError("inner"))
            span.set_status(Status(StatusCode.ERROR, "mylib.Bad: outer"))
        # error.type without a description: the message comes from the event, the type stays
        with tracer.start_as_current_span("execute_tool b", attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "b", sc.ERROR_TYPE: "model_retry"},
            record_exception=False, set_status_on_exception=False) as span:
            span.record_exception(RuntimeError("retry please"))
            span.set_status(StatusCode.ERROR)
        # an exception handled inside the tool: the span did not fail
        with tracer.start_as_current_span("execute_tool c", attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "c"}) as span:
            span.record_exception(KeyError("cache miss"))
        # failed without any event: nothing to fill (the view says 'error')
        with tracer.start_as_current_span("execute_tool d", attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "d"}) as span:
            span.add_event("something else", {"exception.type": "NotAnException"})
            span.set_status(StatusCode.ERROR)

    connection = record(tmp_path / "s.duckdb", run)
    tools = rows(connection, "select tool_name, status, error_type, error from tool_calls order by tool_name")
    assert tools == [
        {"tool_name": "a", "status": "error", "error_type": "mylib.Bad", "error": "mylib.Bad: outer"},
        {"tool_name": "b", "status": "error", "error_type": "model_retry", "error": "RuntimeError: retry please"},
        {"tool_name": "c", "status": "ok", "error_type": None, "error": None},
        {"tool_name": "d", "status": "error", "error_type": None, "error": "error"},
    ]
    statuses = rows(connection, "select name, status_message, attributes from spans order by name")
    assert statuses[2]["status_message"] is None and sc.ERROR_TYPE not in json.loads(statuses[2]["attributes"])
    assert statuses[3]["status_message"] is None and sc.ERROR_TYPE not in json.loads(statuses[3]["attributes"])


def test_the_message_goes_through_the_attribute_transform_and_the_size_limit(tmp_path):
    def redact(attributes: dict[str, Any], span_name: str) -> dict[str, Any]:
        if "exception.message" in attributes:
            attributes["exception.message"] = attributes["exception.message"].replace("hunter2", "[REDACTED]")
        return attributes

    def run(tracer):
        tool_span(tracer, "login", "c1", PermissionError("bad password hunter2 " + "x" * 500))
        tool_span(tracer, "login", "c2", PermissionError(""))  # no message: the type alone

    connection = record(tmp_path / "s.duckdb", run, transform=redact, max_attribute_size=64)
    tools = rows(connection, "select call_id, error_type, error from tool_calls order by call_id")
    assert tools[0]["error_type"] == "PermissionError"
    assert tools[0]["error"].startswith("PermissionError: bad password [REDACTED] xxx")
    assert "hunter2" not in tools[0]["error"]
    marker = sc.TRUNCATION_MARKER.format(original=len("PermissionError: bad password [REDACTED] ") + 500)
    assert tools[0]["error"].endswith(marker) and len(tools[0]["error"]) == 64 + len(marker)
    assert tools[1] == {"call_id": "c2", "error_type": "PermissionError", "error": "PermissionError"}
