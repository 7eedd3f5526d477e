"""Spans started from a checked template (:class:`agent_rl_plugin.lean_spans.LeanSpanStarter`,
issue 19's ``overhead`` row) are the spans the SDK would have made: field for field, through
the same span processors, and the SDK is used whenever that cannot be shown.

Each test makes spans both ways on one real SDK ``TracerProvider`` and compares what a span
processor sees at start and an exporter gets at the end.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider, sampling
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.lean_spans import LeanSpanStarter

ATTRIBUTES: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "n": 3, "ok": True, "x": 0.5,
                              "words": ["stop", "length"], "ids": (1, 2)}  # fmt: skip
# Not storable as given: OTel drops the None item's sequence and the mapping, with warnings.
UNCLEAN: dict[str, Any] = {**ATTRIBUTES, "with_none": [1, None], "mapping": {"a": 1}, "": "empty key"}


class Recorder(SpanProcessor):
    """What span processors are called with, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.calls.append(("on_start", span, parent_context))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append(("on_end", span, None))


def _provider(**kwargs: Any) -> tuple[TracerProvider, InMemorySpanExporter, Recorder]:
    provider = TracerProvider(resource=Resource.create({"service.name": "lean-test"}), **kwargs)
    recorder, exporter = Recorder(), InMemorySpanExporter()
    provider.add_span_processor(recorder)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter, recorder


def _fields(span: ReadableSpan) -> dict[str, Any]:
    """Everything an exporter reads of a finished span, ids and times aside."""
    context, parent = span.get_span_context(), span.parent
    assert context is not None
    return {
        "name": span.name,
        "attributes": [(k, v, type(v).__name__) for k, v in (span.attributes or {}).items()],
        "kind": span.kind,
        "status": (span.status.status_code, span.status.description),
        "events": [(e.name, dict(e.attributes or {})) for e in span.events],
        "links": list(span.links),
        "resource": dict(span.resource.attributes),
        "scope": span.instrumentation_scope,
        "flags": context.trace_flags,
        "state": context.trace_state,
        "remote": context.is_remote,
        "parent": None if parent is None else (parent.trace_id, parent.span_id),
        "dropped": (span.dropped_attributes, span.dropped_events, span.dropped_links),
        "type": type(span),
    }


def _both_ways(tracer: Any, lean: LeanSpanStarter, attributes: dict[str, Any]) -> tuple[Any, Any]:
    sdk = tracer.start_span("step", attributes=dict(attributes))
    ours = lean.start("step", dict(attributes))
    assert ours is not None
    return sdk, ours


def test_a_lean_span_is_the_sdk_span_at_start_and_at_export() -> None:
    provider, exporter, recorder = _provider()
    tracer = provider.get_tracer("lean-test", "1.0")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None
    sdk, ours = _both_ways(tracer, lean, ATTRIBUTES)
    # Processors see the same kind of object, with the same arguments and attributes, at start.
    (_, sdk_started, sdk_parent), (_, ours_started, ours_parent) = recorder.calls
    assert (type(ours_started), ours_parent) == (type(sdk_started), sdk_parent)
    assert list(ours_started.attributes.items()) == list(sdk_started.attributes.items())
    for span in (sdk, ours):
        span.add_event("tick", {"i": 1})
        span.set_attribute("late", "yes")
        span.set_status(trace.StatusCode.ERROR, "boom")
        span.end()
    exported_sdk, exported_ours = exporter.get_finished_spans()
    assert _fields(exported_ours) == _fields(exported_sdk)
    assert exported_ours.attributes["words"] == ("stop", "length")  # a list is stored as a tuple
    assert exported_ours.start_time <= exported_ours.end_time
    assert [c[0] for c in recorder.calls] == ["on_start", "on_start", "on_end", "on_end"]


def test_a_lean_child_joins_its_parent_trace_and_sdk_children_join_a_lean_parent() -> None:
    provider, exporter, _ = _provider()
    tracer = provider.get_tracer("lean-test")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None
    with tracer.start_as_current_span("sdk parent") as parent:
        lean_child = lean.start("lean child", {"a": 1})
        sdk_child = tracer.start_span("sdk child", attributes={"a": 1})
    assert lean_child is not None
    token = otel_context.attach(trace.set_span_in_context(lean_child))
    try:
        grandchild = tracer.start_span("sdk grandchild")
        lean_grandchild = lean.start("lean grandchild", {})
    finally:
        otel_context.detach(token)
    for span in (lean_grandchild, grandchild, sdk_child, lean_child):
        span.end()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    parent_context = parent.get_span_context()
    assert _fields(spans["lean child"]) == {**_fields(spans["sdk child"]), "name": "lean child"}
    assert spans["lean child"].context.trace_id == parent_context.trace_id
    assert spans["lean child"].parent.span_id == parent_context.span_id
    for name in ("sdk grandchild", "lean grandchild"):
        assert spans[name].parent.span_id == spans["lean child"].context.span_id
        assert spans[name].context.trace_id == parent_context.trace_id


def test_attributes_otel_would_clean_or_drop_are_stored_as_otel_stores_them() -> None:
    provider, exporter, _ = _provider(span_limits=SpanLimits(max_attributes=5, max_span_attribute_length=4))
    tracer = provider.get_tracer("lean-test")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None
    for attributes in (UNCLEAN, {"text": "abcdefgh", "words": ["ab", "abcdef"]}, ATTRIBUTES):
        sdk, ours = _both_ways(tracer, lean, attributes)
        sdk.end()
        ours.end()
    spans = exporter.get_finished_spans()
    for sdk, ours in zip(spans[::2], spans[1::2]):
        assert _fields(ours) == _fields(sdk)
    assert spans[3].attributes["words"] == ("ab", "abcd")
    assert spans[5].dropped_attributes == 1  # six attributes, a limit of five


def test_ids_come_from_the_tracers_own_generator() -> None:
    class Counting(IdGenerator):
        def __init__(self) -> None:
            self.next = 0

        def generate_span_id(self) -> int:
            self.next += 1
            return self.next

        def generate_trace_id(self) -> int:
            return 0xABC

    generator = Counting()
    provider, _, _ = _provider(id_generator=generator)
    tracer = provider.get_tracer("lean-test")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None
    span = lean.start("step", {})
    assert span is not None
    context = span.get_span_context()
    assert (context.trace_id, context.span_id) == (0xABC, generator.next)
    assert context.is_valid


def test_an_invalid_id_from_the_generator_gives_the_span_the_sdk_would_give() -> None:
    class Failing(IdGenerator):
        """Valid ids until told to fail, then the invalid id 0."""

        def __init__(self) -> None:
            self.failing = False

        def generate_span_id(self) -> int:
            return 0 if self.failing else 0xB

        def generate_trace_id(self) -> int:
            return 0 if self.failing else 0xA

    generator = Failing()
    provider, _, _ = _provider(id_generator=generator)
    tracer = provider.get_tracer("lean-test")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None
    generator.failing = True
    sdk, ours = _both_ways(tracer, lean, {})
    assert ours.get_span_context() == sdk.get_span_context()
    assert not ours.get_span_context().is_valid
    tracer.id_generator = Failing()
    assert lean.start("step", {}) is None  # another generator: root spans' flags may differ (1.45)


def test_a_generator_of_only_invalid_ids_gets_the_sdks_invalid_spans() -> None:
    class Zero(IdGenerator):
        def generate_span_id(self) -> int:
            return 0

        def generate_trace_id(self) -> int:
            return 0

    provider, _, _ = _provider(id_generator=Zero())
    tracer = provider.get_tracer("lean-test")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None  # the checks found the SDK's own answer: a span with invalid ids
    sdk, ours = _both_ways(tracer, lean, {})
    assert ours.get_span_context() == sdk.get_span_context()
    assert not ours.get_span_context().is_valid


@pytest.mark.parametrize(
    "sampler",
    [sampling.TraceIdRatioBased(0.5), sampling.ParentBased(sampling.TraceIdRatioBased(0.5)), sampling.ALWAYS_OFF,
     sampling.ParentBased(sampling.ALWAYS_ON, local_parent_not_sampled=sampling.ALWAYS_ON)],
    ids=["ratio", "parent-based ratio", "always off", "parent-based, unsampled parents sampled"],
)  # fmt: skip
def test_samplers_whose_answer_could_depend_on_the_span_are_left_to_the_sdk(sampler: Any) -> None:
    provider, _, _ = _provider(sampler=sampler)
    assert LeanSpanStarter.for_tracer(provider.get_tracer("lean-test")) is None


@pytest.mark.parametrize("sampler", [sampling.ALWAYS_ON, sampling.DEFAULT_ON], ids=["always on", "default"])
def test_always_on_samplers_get_lean_spans(sampler: Any) -> None:
    provider, _, _ = _provider(sampler=sampler)
    assert LeanSpanStarter.for_tracer(provider.get_tracer("lean-test")) is not None


def _in(parent: SpanContext, lean: LeanSpanStarter) -> Any:
    token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        return lean.start("step", {})
    finally:
        otel_context.detach(token)


def test_parents_the_template_was_not_checked_for_are_left_to_the_sdk() -> None:
    provider, _, _ = _provider()
    tracer = provider.get_tracer("lean-test")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None
    sampled = TraceFlags(TraceFlags.SAMPLED)  # without the random-trace-id flag of 1.45
    unsampled = SpanContext(0xA, 0xB, is_remote=True, trace_flags=TraceFlags(TraceFlags.DEFAULT))
    with_state = SpanContext(0xA, 0xB, is_remote=True, trace_flags=sampled, trace_state=TraceState([("k", "v")]))
    remote = SpanContext(0xA, 0xB, is_remote=True, trace_flags=sampled)
    assert _in(unsampled, lean) is None  # the SDK makes a non-recording span for it
    assert _in(with_state, lean) is None
    child = _in(remote, lean)
    assert child is not None and child.parent == remote and child.get_span_context().trace_id == 0xA


def test_a_replaced_sampler_or_a_disabled_tracer_goes_back_to_the_sdk() -> None:
    provider, _, _ = _provider()
    tracer = provider.get_tracer("lean-test")
    lean = LeanSpanStarter.for_tracer(tracer)
    assert lean is not None
    tracer.sampler = sampling.ALWAYS_OFF
    assert lean.start("step", {}) is None
    tracer.sampler = lean.sampler
    assert lean.start("step", {}) is not None
    from opentelemetry.sdk import trace as sdk_trace

    config = getattr(sdk_trace, "_TracerConfig", None)
    if config is None:
        return  # SDKs before tracer configuration (1.34) cannot disable a tracer
    tracer._set_tracer_config(config(is_enabled=False))  # noqa: SLF001 - what a tracer configurator does
    assert lean.start("step", {}) is None
    assert not tracer.start_span("step").is_recording()


def test_an_sdk_span_with_a_field_the_template_does_not_know_is_left_to_the_sdk(monkeypatch) -> None:  # noqa: ANN001
    from opentelemetry.sdk.trace import _Span

    original = _Span.__init__

    def with_new_field(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._new_per_span_state = []

    monkeypatch.setattr(_Span, "__init__", with_new_field)
    provider, _, _ = _provider()
    assert LeanSpanStarter.for_tracer(provider.get_tracer("lean-test")) is None


def test_a_starter_made_inside_a_span_is_made_all_the_same() -> None:
    """The first span our instrumentation starts is often a child (an LLM call inside a
    rollout): the checks must not take the current span for their root's parent."""
    provider, _, _ = _provider()
    tracer = provider.get_tracer("lean-test")
    with tracer.start_as_current_span("outer") as outer:
        lean = LeanSpanStarter.for_tracer(tracer)
        assert lean is not None
        child = lean.start("inner", {})
    assert child is not None and child.parent == outer.get_span_context()


def test_the_checks_on_a_copy_export_nothing() -> None:
    provider, exporter, recorder = _provider()
    assert LeanSpanStarter.for_tracer(provider.get_tracer("lean-test")) is not None
    assert recorder.calls == [] and exporter.get_finished_spans() == ()


def test_decorated_calls_record_through_lean_spans(span_exporter) -> None:  # noqa: ANN001
    @arl.trace_agent(name="lean")
    def agent(x: int) -> int:
        return x + 1

    assert agent(1) == 2
    arl.flush()
    (span,) = span_exporter.get_finished_spans()
    starter = tracing._DEFERRABLE[2]  # noqa: SLF001 - the starter the tracer got
    assert starter is not None and starter.tracer is tracing.get_tracer()
    assert span.attributes["agent_rl.output"] == "2"
    assert span.attributes["agent_rl.rollout.root"] is True


def test_the_current_span_is_read_as_the_api_reads_it() -> None:
    from agent_rl_plugin import lean_spans

    provider, _, _ = _provider()
    tracer = provider.get_tracer("lean-test")
    assert lean_spans._current_span() is None  # noqa: SLF001 - the API's invalid span: no parent
    with tracer.start_as_current_span("outer") as outer:
        assert lean_spans._current_span() is outer is trace.get_current_span()  # noqa: SLF001
    # The default SDK runtime context is read straight from its ContextVar (no API frames).
    assert lean_spans._current_span.__name__ == "straight"  # noqa: SLF001
