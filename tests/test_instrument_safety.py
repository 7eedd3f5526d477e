"""Recording never breaks the agent: odd values, huge values, switched off, or broken itself."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin import tracing
from agent_rl_plugin.instrumentation import spans as span_helpers
from agent_rl_plugin.instrumentation import wrappers


def finished(exporter) -> list:
    arl.flush()
    return list(exporter.get_finished_spans())


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


@arl.trace_agent
def echo(value):
    return value


@arl.trace_agent
def stream(*chunks):
    yield from chunks


# --- odd values -------------------------------------------------------------------------------
def test_values_json_cannot_encode_are_stored_as_safe_repr(span_exporter) -> None:
    circular: list = [1]
    circular.append(circular)
    odd = Unprintable()
    assert echo(odd) is odd
    assert echo(circular) is circular
    first, second = finished(span_exporter)
    assert first.attributes[sc.ROLLOUT_INPUT] == '{"value": "<unreprable Unprintable>"}'
    assert first.attributes[sc.ROLLOUT_OUTPUT] == '"<unreprable Unprintable>"'
    assert "[1, [...]]" in second.attributes[sc.ROLLOUT_INPUT]


def test_chunks_whose_content_raises_are_skipped(span_exporter) -> None:
    class Chunk:
        @property
        def content(self) -> str:
            raise RuntimeError("broken chunk")

    chunk = Chunk()
    assert list(stream("a", chunk, {"content": "b"})) == ["a", chunk, {"content": "b"}]
    (span,) = finished(span_exporter)
    assert span.attributes[sc.ROLLOUT_OUTPUT] == '"ab"'
    assert span.attributes[sc.STREAM_CHUNKS] == 3


def test_agent_id_property_that_raises_is_ignored(span_exporter) -> None:
    class Agent(arl.RLAgentMixin):
        @property
        def agent_id(self) -> str:
            raise RuntimeError("no id")

        def run(self) -> int:
            return 1

    assert Agent().run() == 1
    (span,) = finished(span_exporter)
    assert sc.GEN_AI_AGENT_ID not in span.attributes


def test_oversize_values_are_truncated_with_a_marker(plugin_manager, span_exporter) -> None:
    arl.configure(db_path=None, export_delay_ms=50, max_attribute_size=64)
    echo("é" * 1000)
    list(stream(*["abcdefghij"] * 50))
    single, streamed = finished(span_exporter)
    output = single.attributes[sc.ROLLOUT_OUTPUT]
    assert output == '"' + "é" * 63 + "...[truncated 2002 bytes]"
    text = "abcdefghij" * 50
    assert streamed.attributes[sc.ROLLOUT_OUTPUT] == '"' + text[:63] + "...[truncated 502 bytes]"


# --- switched off -----------------------------------------------------------------------------
@pytest.fixture
def disabled(plugin_manager, span_exporter, monkeypatch):
    arl.configure(db_path=None, export_delay_ms=50, enable_rl=False)

    def must_not_run(*args, **kwargs):
        raise AssertionError("recording code ran while enable_rl=False")

    monkeypatch.setattr(wrappers, "start_call", must_not_run)
    return span_exporter


def test_enable_rl_false_records_nothing_and_changes_nothing(disabled) -> None:
    class Agent(arl.RLAgentMixin):
        async def arun(self, x: int) -> int:
            await asyncio.sleep(0)
            return x + 1

    async def drain(agen) -> list:
        return [item async for item in agen]

    @arl.trace_tool
    async def chunks():
        yield "a"

    with arl.rollout(task_id="off") as info:
        assert arl.current_rollout() is info
        assert echo(3) == 3
        assert list(stream(1, 2)) == [1, 2]
        assert asyncio.run(Agent().arun(1)) == 2
        assert asyncio.run(drain(chunks())) == ["a"]
        assert arl.record_llm_call("m", "hi", "hello") is None
        assert arl.record_tool_call("t") is None
        arl.record_event("vote")
        arl.emit_reward(1.0)
    arl.emit_reward(1.0)  # no rollout needed when nothing is recorded
    with pytest.raises(ValueError, match="finite number"):
        arl.emit_reward(math.nan)  # but the value is still checked
    assert finished(disabled) == []


# --- our own failures -------------------------------------------------------------------------
def test_serialisation_failure_never_reaches_the_agent(span_exporter, monkeypatch, caplog) -> None:
    def broken(value, max_size):
        raise RuntimeError("serializer exploded")

    monkeypatch.setattr(span_helpers, "to_json_attribute", broken)
    monkeypatch.setattr(span_helpers, "to_json", lambda value: broken(value, 0))
    monkeypatch.setattr(span_helpers, "_ITERENCODE", lambda value, level: broken(value, 0))  # the dict/list fast path
    monkeypatch.setattr(span_helpers, "_logged", set())
    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin.instrumentation"):
        assert echo([1, 2]) == [1, 2]
        assert echo("again") == "again"
        assert list(stream("x")) == ["x"]
    spans = finished(span_exporter)
    assert len(spans) == 3
    assert spans[0].attributes[sc.ROLLOUT_INPUT] == "<unserialisable>"
    warnings = [r for r in caplog.records if "serialising a value" in r.getMessage()]
    assert len(warnings) == 1  # logged once per failure site, however often it fails


def test_tracer_failure_never_reaches_the_agent(span_exporter, monkeypatch) -> None:
    class BrokenTracer:
        def start_span(self, *args, **kwargs):
            raise RuntimeError("tracer exploded")

    monkeypatch.setattr(tracing.STATE, "tracer", BrokenTracer())
    assert echo(1) == 1
    assert list(stream("a", "b")) == ["a", "b"]
    with arl.rollout(task_id="t"):
        assert echo(2) == 2
        arl.record_event("vote")
        assert arl.record_llm_call("m") is None
        arl.emit_reward(1.0)


def test_exceptions_of_the_agent_are_not_masked_by_our_failures(span_exporter, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("record_exception exploded")

    monkeypatch.setattr("opentelemetry.sdk.trace.Span.record_exception", broken)

    @arl.trace_tool
    def fails() -> None:
        raise KeyError("the agent's own error")

    with pytest.raises(KeyError, match="the agent's own error"):
        fails()
    (span,) = finished(span_exporter)
    assert span.name == "execute_tool fails"
