"""The redaction fast paths: a span is handed on (or stored) without a copy only when nothing in
it can be a secret, and one secret in any single field still sends it the full way.

Paths: the wrapper ``configure()`` puts around another exporter (``_CopyOnlyChangedExporter``,
which now skips the copy when :func:`~agent_rl_plugin.transform.span_unchanged` holds), and the
store's converter (``SpanConverter._transformed``) behind the DuckDB exporter. Each planted
secret sits alone in one field, so no other field's secret can trigger the slow path for it."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from agent_rl_plugin import tracing
from agent_rl_plugin.config import DEFAULT_REDACTION_PATTERNS, RLConfig
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.redaction import _GATE_OF, Redactor, _search_of, default_candidates
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.transform import make_attribute_transform, span_unchanged, with_attribute_transform

OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv"
BEARER_TOKEN = "Zx81Yw72Vu63Ts54Rq45Po36"
SECRETS = (OPENAI, BEARER_TOKEN)
BENIGN = {"gen_ai.operation.name": "chat", "task": "task-1234", "n": 3, "ok": True, "model": "tiny-model"}

#: (field, how to record a span whose only secret is in that field)
FIELDS = ["attribute", "event attribute", "event name", "name", "status", "link", "resource"]


def _record(provider_for: Any, field: str) -> None:
    resource = {"service.name": "svc"} if field != "resource" else {"service.name": "svc", "deploy": f"k {OPENAI}"}
    provider = provider_for(Resource.create(resource))
    tracer = provider.get_tracer("t")
    attributes = dict(BENIGN)
    if field == "attribute":
        attributes["auth"] = f"Authorization: Bearer {BEARER_TOKEN}"
    name = f"call {OPENAI}" if field == "name" else "call"
    with tracer.start_as_current_span("parent") as parent:
        links = [Link(parent.get_span_context(), {"why": f"key {OPENAI}"})] if field == "link" else []
        with tracer.start_as_current_span(name, attributes=attributes, links=links) as span:
            if field == "event attribute":
                span.add_event("note", {"detail": f"Bearer {BEARER_TOKEN}"})
            if field == "event name":
                span.add_event(f"note {OPENAI}")
            if field == "status":
                span.set_status(Status(StatusCode.ERROR, f"failed with {OPENAI}"))
    provider.shutdown()


def _assert_clean(text: str) -> None:
    assert "task-1234" in text  # the searched text is the real thing
    assert not [s for s in SECRETS if s in text]


@pytest.mark.parametrize("field", FIELDS)
def test_configured_wrapper_masks_a_lone_secret_in_each_field(plugin_manager, field: str):
    memory = InMemorySpanExporter()
    wrapped = tracing._copy_only_changed(with_attribute_transform(memory, RLConfig(db_path=None)))  # noqa: SLF001
    assert type(wrapped).__name__ == "_CopyOnlyChangedExporter"

    def provider_for(resource: Resource) -> TracerProvider:
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(wrapped))
        return provider

    _record(provider_for, field)
    _assert_clean(repr([span.to_json() for span in memory.get_finished_spans()]))


def test_configured_wrapper_hands_on_a_clean_span_itself(plugin_manager):
    seen: list[Any] = []
    memory = InMemorySpanExporter()
    wrapped = tracing._copy_only_changed(with_attribute_transform(memory, RLConfig(db_path=None)))  # noqa: SLF001
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(wrapped))

    class Seen(SimpleSpanProcessor):
        def on_end(self, span: Any) -> None:
            seen.append(span)

    provider.add_span_processor(Seen(memory))
    with provider.get_tracer("t").start_as_current_span("call", attributes=BENIGN) as span:
        span.add_event("note", {"detail": "nothing here"})
    exported = memory.get_finished_spans()
    assert exported[0] is seen[0]  # no copy


@pytest.mark.parametrize("field", FIELDS)
def test_store_masks_a_lone_secret_in_each_field(plugin_manager, tmp_path: Path, field: str):
    db = tmp_path / "s.duckdb"
    exporter = with_attribute_transform(DuckDBSpanExporter(db), RLConfig(db_path=None))

    def provider_for(resource: Resource) -> TracerProvider:
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return provider

    _record(provider_for, field)
    exporter.shutdown()
    connection = duckdb.connect(str(db), read_only=True)
    try:
        _assert_clean(repr(connection.execute("select * from spans").fetchall()))
    finally:
        connection.close()


def test_unchanged_is_false_with_another_transform_hook(plugin_manager):
    class Upper:
        @hookimpl
        def agent_rl_transform_attributes(self, attributes: dict[str, Any], span_name: str, config: Any) -> None:
            attributes["x"] = "y"

    assert make_attribute_transform(RLConfig(db_path=None)).unchanged(BENIGN)
    plugin_manager.register(Upper())
    assert not make_attribute_transform(RLConfig(db_path=None)).unchanged(BENIGN)


def test_unchanged_follows_the_builtin_hook(plugin_manager):
    on = make_attribute_transform(RLConfig(db_path=None))
    assert on.unchanged(BENIGN)
    assert not on.unchanged({**BENIGN, "k": f"use {OPENAI}"})
    assert not on.unchanged({**BENIGN, "k": [f"use {OPENAI}"]})  # nested: not known
    off = make_attribute_transform(RLConfig(db_path=None, capture_content=False))
    assert not off.unchanged({**BENIGN, "input.value": "hello there"})  # the hook drops it
    assert off.unchanged(BENIGN)


def test_str_subclass_values_are_redacted():
    class Text(str):
        pass

    redactor = Redactor(DEFAULT_REDACTION_PATTERNS)
    attributes: dict[str, Any] = {"k": Text(f"key {OPENAI}")}
    assert not redactor.cannot_change(attributes)
    assert redactor.redact_attributes(attributes)
    assert OPENAI not in attributes["k"]


def test_default_candidates_equal_the_gates():
    rng = random.Random(19)
    parts = list("abxyzAIKSJY-_:=@/ ") + ["sk-", "xox", "AKIA", "ASIA", "ghp_", "github_pat_", "AIza", "eyJ"]
    parts += ["PRIVATE KEY", "://", "passw", "PWD", "Secret", "TOKEN", "key", "aws", "Authoriz", "BASIC", "Bearer"]
    for _ in range(20_000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 8)))
        want = {p for p, gate in _GATE_OF.items() if gate(text, text.lower())}
        assert set(default_candidates(text)) == want, text


@pytest.mark.parametrize("pattern", DEFAULT_REDACTION_PATTERNS)
def test_search_of_answers_as_the_pattern(pattern: str):
    regex = re.compile(pattern)
    search = _search_of(regex)
    texts = ["", "task-1234", f"x{OPENAI}", OPENAI, f"-{OPENAI}", "AKIAABCDEFGHIJKLMNOP", "1AKIAABCDEFGHIJKLMNOP"]
    texts += [
        "ghp_" + "a" * 36,
        "_ghp_" + "a" * 36,
        "xoxb-1234567890ab",
        "axoxb-1234567890ab",
        "eyJabcdefghij.eyJabcdefghij.x",
    ]
    for text in texts:
        assert search(text) == (regex.search(text) is not None), text


def test_span_unchanged_sees_drops(plugin_manager):
    from opentelemetry.sdk.trace import SpanLimits

    transform = make_attribute_transform(RLConfig(db_path=None))
    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("a", attributes=BENIGN):
        pass
    with provider.get_tracer("t").start_as_current_span("b", attributes={"n": 1}):
        pass
    dropped, kept = memory.get_finished_spans()
    assert not span_unchanged(dropped, transform.unchanged)
    assert span_unchanged(kept, transform.unchanged)


def test_a_batch_check_sees_a_secret_among_values_repeated_across_its_spans():
    """The batch check scans each distinct string once (model names, rollout and task ids repeat
    across spans): a secret held by one span among thousands of repeats is still seen, and a
    repeat of a secret in every span is seen as well."""
    redactor = Redactor(list(DEFAULT_REDACTION_PATTERNS))
    repeated = [{"gen_ai.request.model": "tiny-model", "agent_rl.task.id": f"task-{i % 5}"} for i in range(2_000)]
    assert redactor.cannot_change_all(repeated)
    secret = {"gen_ai.request.model": "tiny-model", "note": "key=sk-" + "a" * 40}
    assert not redactor.cannot_change_all([*repeated, secret, *repeated])
    assert not redactor.cannot_change_all([secret] * 500)
