"""The export path's batch-level fast paths give exactly what the per-span path gives.

* ``Redactor.cannot_change_all`` (one scan of a whole batch's strings) is sound: when it says a
  batch cannot change, redacting each mapping changes nothing; and it does answer True for a
  clean batch (else the fast path would never run).
* ``SpanConverter.convert`` with the transform's batch check stores the same rows, byte for byte,
  as a converter whose transform has no fast path at all (every span and event goes through the
  hooks), on random spans where a secret sits in one field of some spans only.
* ``HexIds`` formats ids as ``f"{id:032x}"`` / ``f"{id:016x}"`` and still refuses all-zero ids.
* The wrapper ``configure()`` puts around other exporters checks a whole batch once and hands on
  the same data as copying every span through the hooks.
* ``arrow_columns`` builds repeated and all-null string columns as ``pyarrow.array`` does.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, SpanContext, Status, StatusCode

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.redaction import Redactor
from agent_rl_plugin.store import arrow_columns
from agent_rl_plugin.store.exporter import collect_normalizers
from agent_rl_plugin.store.rows import SpanConverter
from agent_rl_plugin.store.span_parts import HexIds
from agent_rl_plugin.store.validation import InvalidSpan
from agent_rl_plugin.transform import (
    TransformingSpanExporter,
    make_attribute_transform,
    spans_unchanged,
    with_attribute_transform,
)

SECRETS = [
    "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv",
    "Authorization: Bearer Zx81Yw72Vu63Ts54Rq45Po36",
    "password=hunter22xyz",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "postgres://u:pw1234@host/db",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghij",
    "xoxb-1234-5678-abcdefgh",
]
#: Benign text that passes literal tests (``task-1`` holds ``sk-``, ``key:`` a name and a colon).
WORDS = ["chat", "tiny-model", "task-17", "key: value", "hello world", '[{"role":"user"}]', "ok", "", "x" * 40]
KEYS = [
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "input.value",
    "llm.model_name",
    "gen_ai.system",
    "agent_rl.rollout.id",
    "a",
    "b",
    "gen_ai.evaluation.score.value",
    "exception.type",
    "exception.message",
]


def _value(rng: random.Random, secret_rate: float) -> Any:
    r = rng.random()
    if r < secret_rate:
        return rng.choice(SECRETS) + " " + rng.choice(WORDS)
    if r < 0.5:
        return rng.choice(WORDS) + str(rng.randint(0, 99))
    if r < 0.6:
        return rng.randint(-5, 10**6)
    if r < 0.65:
        return rng.random()
    if r < 0.7:
        return rng.random() < 0.5
    if r < 0.8:
        pool = WORDS + (SECRETS[:2] if secret_rate else [])
        return tuple(rng.choice(pool) for _ in range(rng.randint(0, 3)))
    return rng.choice(WORDS)


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:  # type: ignore[override]
        self.spans.append(span)


def _random_spans(rng: random.Random, n: int, secret_rate: float) -> list[ReadableSpan]:
    """``n`` spans; with ``secret_rate`` > 0 a secret may sit in any field, else in none."""
    secret = secret_rate > 0
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    collect = _Collect()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("t", "1.0")
    with tracer.start_as_current_span("root") as root:
        for _ in range(n - 1):
            attrs = {rng.choice(KEYS): _value(rng, secret_rate) for _ in range(rng.randint(0, 8))}
            links = [Link(root.get_span_context(), {"why": _value(rng, secret_rate)})] if rng.random() < 0.1 else []
            name = rng.choice(["chat", "tool"] + (["call " + rng.choice(SECRETS)] if secret else []))
            with tracer.start_as_current_span(name, attributes=attrs, links=links) as span:
                for _ in range(rng.choice([0, 0, 0, 1, 2])):
                    event = rng.choice(["note", "exception", "gen_ai.evaluation.result"])
                    span.add_event(
                        event, {rng.choice(KEYS): _value(rng, secret_rate) for _ in range(rng.randint(0, 4))}
                    )
                if rng.random() < 0.2:
                    span.set_status(Status(StatusCode.ERROR, rng.choice([None, "failed"])))
    provider.shutdown()
    return collect.spans


def _full_path(transform: Any) -> Any:
    """``transform`` without its fast paths (no ``unchanged``, no ``unchanged_all``): every span
    and event goes through the hooks, as the reference."""

    def full(attributes: dict[str, Any], span_name: str) -> dict[str, Any]:
        return transform(attributes, span_name)

    full.redactor = transform.redactor  # type: ignore[attr-defined]
    return full


def _converters(config: RLConfig) -> tuple[SpanConverter, SpanConverter]:
    transform = make_attribute_transform(config)
    assert hasattr(transform, "unchanged_all")
    fast = SpanConverter(
        transform=transform, normalizers=collect_normalizers(), max_attribute_size=config.max_attribute_size
    )
    full = SpanConverter(
        transform=_full_path(transform),
        normalizers=collect_normalizers(),
        max_attribute_size=config.max_attribute_size,
    )
    return fast, full


@pytest.mark.parametrize(
    "config",
    [RLConfig(db_path=None), RLConfig(db_path=None, capture_content=False), RLConfig(db_path=None, redact=False)],
    ids=["default", "no-content", "no-redaction"],
)
def test_batch_conversion_equals_the_full_path(plugin_manager, config: RLConfig):
    fast, full = _converters(config)
    used_fast_path = 0
    for trial in range(24):
        rng = random.Random(trial)
        # a third of the batches hold no secret (the fast path), a third one rare secret, a third many
        rate = [0.0, 0.004, 0.15][trial % 3]
        spans = _random_spans(rng, rng.randint(2, 80), rate)
        got, want = fast.convert(spans), full.convert(spans)
        assert got.spans.equals(want.spans), trial
        assert (got.rewards is None) == (want.rewards is None)
        assert got.rewards is None or got.rewards.equals(want.rewards)
        assert (got.failed, got.invalid, got.truncated) == (want.failed, want.invalid, want.truncated)
        used_fast_path += rate == 0.0
    assert used_fast_path


def _one_secret_in_an_event() -> _Collect:
    """A span with a clean attribute and one event holding a bearer token (in ``.spans``)."""
    provider = TracerProvider()
    collect = _Collect()
    provider.add_span_processor(collect)
    with provider.get_tracer("t").start_as_current_span("clean", attributes={"task": "task-1"}) as span:
        span.add_event("note", {"detail": f"Bearer {SECRETS[1][-24:]}"})
    return collect


def test_a_secret_in_one_event_of_a_clean_batch_is_masked(plugin_manager):
    fast, _ = _converters(RLConfig(db_path=None))
    spans = _random_spans(random.Random(7), 40, 0.0)
    collect = _one_secret_in_an_event()
    batch = fast.convert(spans[:20] + collect.spans + spans[20:])
    events = batch.spans["events"].to_pylist()
    assert not any(SECRETS[1][-24:] in text for text in events)
    assert any("[REDACTED]" in text for text in events)


def _mappings(rng: random.Random, secret_rate: float) -> list[dict[str, Any]]:
    return [
        {rng.choice(KEYS): _value(rng, secret_rate) for _ in range(rng.randint(0, 6))}
        for _ in range(rng.randint(1, 30))
    ]


def test_cannot_change_all_is_sound_and_answers_true_for_clean_batches():
    redactor = Redactor(RLConfig(db_path=None).redaction_patterns)
    clean_true = 0
    for trial in range(400):
        rng = random.Random(trial)
        rate = [0.0, 0.01, 0.2][trial % 3]
        mappings = _mappings(rng, rate)
        if redactor.cannot_change_all(mappings):
            for mapping in mappings:
                copy = dict(mapping)
                assert not redactor.redact_attributes(copy), mapping
                assert copy == mapping
        clean_true += rate == 0.0 and redactor.cannot_change_all(mappings)
    # every secret-free batch (benign literals such as "task-17" and "key: value" included) is ruled out
    assert clean_true == len(range(0, 400, 3))


def test_cannot_change_all_fails_closed_on_nested_values():
    redactor = Redactor(RLConfig(db_path=None).redaction_patterns)
    assert redactor.cannot_change_all([{"a": "task-1"}, {"b": ("x", 1)}])
    assert not redactor.cannot_change_all([{"a": "task-1"}, {"b": ["nested"]}])
    assert not redactor.cannot_change_all([{"a": "task-1"}, {"b": ({"k": "v"},)}])
    assert not redactor.cannot_change_all([{"a": "fine text"}, {"b": (SECRETS[0],)}])


def test_hex_ids_format_as_the_f_string_and_refuse_zero_ids():
    rng = random.Random(3)
    hexes = HexIds()
    for _ in range(2000):
        trace_id, span_id = rng.randint(1, 2**128 - 1), rng.randint(1, 2**64 - 1)
        _, _, trace_hex, span_hex = hexes.ids(SpanContext(trace_id, span_id, False))
        assert (trace_hex, span_hex) == (f"{trace_id:032x}", f"{span_id:016x}")
        parent_id = rng.choice([span_id, rng.randint(1, 2**64 - 1)])
        assert hexes.parent(SpanContext(trace_id, parent_id, False)) == f"{parent_id:016x}"
    assert hexes.parent(None) is None
    for trace_id, span_id in [(0, 5), (5, 0)]:
        with pytest.raises(InvalidSpan):
            hexes.ids(SpanContext(trace_id, span_id, False))


def test_zero_ids_and_reversed_times_convert_as_before():
    spans = [
        ReadableSpan(name="zero trace", context=SpanContext(0, 5, False), start_time=1, end_time=2),
        ReadableSpan(name="reversed", context=SpanContext(9, 5, False), start_time=100, end_time=50),
        ReadableSpan(name="zero span", context=SpanContext(9, 0, False), start_time=1, end_time=2),
    ]
    batch = SpanConverter().convert(spans)
    assert (batch.failed, batch.invalid, batch.num_spans) == (2, 2, 1)
    (row,) = batch.spans.to_pylist()
    assert (row["trace_id"], row["span_id"], row["end_unix_nano"]) == (f"{9:032x}", f"{5:016x}", 100)
    assert '"agent_rl.span.end_before_start_ns":50' in row["attributes"]


@pytest.mark.parametrize(
    "values", [["a"] * 5, ("é",) * 3, [None] * 4, [""] * 2, ["[]"] * 1, ["a", "a", "b"], ["a", None]]
)
def test_repeated_and_null_string_columns_equal_pyarrow(values: Any):
    got = arrow_columns.column(values, pa.string())
    got.validate(full=True)
    assert got.equals(pa.array(list(values), pa.string()))


def test_repeated_columns_still_refuse_what_pyarrow_refuses():
    with pytest.raises(TypeError):
        arrow_columns.column([1, 1, 1], pa.string())
    with pytest.raises(UnicodeEncodeError):
        arrow_columns.column(["\ud800"] * 3, pa.string())


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.batches: list[list[ReadableSpan]] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.batches.append(list(spans))
        return SpanExportResult.SUCCESS


def _wrapped(keep: _Keep, config: RLConfig) -> Any:
    from agent_rl_plugin import tracing

    wrapped = tracing._copy_only_changed(with_attribute_transform(keep, config))  # noqa: SLF001
    assert type(wrapped).__name__ == "_CopyOnlyChangedExporter"
    return wrapped


@pytest.mark.parametrize("capture_content", [True, False])
def test_wrapper_batches_equal_the_full_path(plugin_manager, capture_content: bool):
    """The configured wrapper (one check per batch) hands on the same data as the plain
    TransformingSpanExporter (every span copied through the hooks), and clean batches as they are."""
    config = RLConfig(db_path=None, capture_content=capture_content)
    fast, full = _Keep(), _Keep()
    wrapped = _wrapped(fast, config)
    reference = TransformingSpanExporter(full, _full_path(make_attribute_transform(config)))
    handed_on_as_is = 0
    for trial in range(18):
        rng = random.Random(100 + trial)
        spans = _random_spans(rng, rng.randint(2, 50), [0.0, 0.004, 0.15][trial % 3])
        wrapped.export(spans)
        reference.export(spans)
        got, want = fast.batches[-1], full.batches[-1]
        assert [s.to_json() for s in got] == [s.to_json() for s in want], trial
        handed_on_as_is += all(a is b for a, b in zip(got, spans))
    # clean batches are not copied (without content capture, the content keys in each batch are dropped)
    assert handed_on_as_is if capture_content else not handed_on_as_is


def test_wrapper_masks_a_secret_in_one_event_of_a_batch(plugin_manager):
    keep = _Keep()
    wrapped = _wrapped(keep, RLConfig(db_path=None))
    spans = _random_spans(random.Random(8), 30, 0.0)
    collect = _one_secret_in_an_event()
    wrapped.export(spans[:10] + collect.spans + spans[10:])
    text = repr([s.to_json() for s in keep.batches[-1]])
    assert SECRETS[1][-24:] not in text and "[REDACTED]" in text


def test_wrapper_copies_a_batch_with_a_span_that_dropped_attributes(plugin_manager):
    """As span_unchanged per span: a span that dropped something is copied (as the plain wrapper
    does), even when no attribute changes."""
    from opentelemetry.sdk.trace import SpanLimits

    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
    collect = _Collect()
    provider.add_span_processor(collect)
    with provider.get_tracer("t").start_as_current_span("full", attributes={"a": "1", "b": "2", "c": "3"}):
        pass
    (dropping,) = collect.spans
    assert dropping.dropped_attributes == 1
    spans = _random_spans(random.Random(9), 10, 0.0) + [dropping]
    transform = make_attribute_transform(RLConfig(db_path=None))
    assert spans_unchanged(spans[:-1], transform.unchanged_all)  # type: ignore[attr-defined]
    assert not spans_unchanged(spans, transform.unchanged_all)  # type: ignore[attr-defined]
    keep = _Keep()
    _wrapped(keep, RLConfig(db_path=None)).export(spans)
    assert keep.batches[-1][-1] is not dropping


@pytest.mark.parametrize("dropped", ["events", "links"])
def test_a_batch_with_a_span_that_dropped_events_or_links_is_not_passed_on_as_is(plugin_manager, dropped):
    """The batch check reads the SDK span's own fields: each kind of drop counts, as per span."""
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.trace import Link

    provider = TracerProvider(span_limits=SpanLimits(max_events=1, max_links=1))
    collect = _Collect()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("t")
    other = tracer.start_span("other").get_span_context()
    links = [Link(other), Link(other)] if dropped == "links" else []
    with tracer.start_as_current_span("full", links=links) as span:
        if dropped == "events":
            span.add_event("one")
            span.add_event("two")
    (dropping,) = collect.spans
    assert (dropping.dropped_events, dropping.dropped_links) == ((1, 0) if dropped == "events" else (0, 1))
    transform = make_attribute_transform(RLConfig(db_path=None))
    spans = _random_spans(random.Random(10), 10, 0.0)
    assert spans_unchanged(spans, transform.unchanged_all)  # type: ignore[attr-defined]
    assert not spans_unchanged(spans + [dropping], transform.unchanged_all)  # type: ignore[attr-defined]
