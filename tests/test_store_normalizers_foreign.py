"""Spans from other instrumentation libraries land in the same views as ours.

The fixtures under ``tests/fixtures/foreign_spans`` were recorded from the real instrumentors
(OpenInference, OpenLLMetry/Traceloop old and new, the OTel GenAI ``openai-v2``; see the
README there); each test rebuilds those spans, feeds them through the real
``DuckDBSpanExporter`` (normalisers from the plugin manager, as in production) into a DuckDB
file and reads the views. Mixed-convention and malformed spans are built here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from agent_rl_plugin import plugins
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.data.sql import messages_sql
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.store.exporter import collect_normalizers
from agent_rl_plugin.store.normalizers import (
    BUILTIN_NORMALIZERS,
    genai,
    normalize_all,
    openinference,
    openllmetry,
)

FIXTURES = Path(__file__).parent / "fixtures" / "foreign_spans"
QUESTION = "What is 2+3, and 1/0?"
ANSWER = "2+3 = 5; 1/0 is undefined."
SYSTEM = "You are a calculator. Use the tools."
AGENT_FIXTURES = ["openinference_openai_agent", "openllmetry_openai_agent", "genai_openai_agent"]
ALL_FIXTURES = [*AGENT_FIXTURES, "openllmetry_legacy_openai_agent"]


# --- helpers ------------------------------------------------------------------------------
def _attributes(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _context(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=TraceFlags(1))


def span_from_dict(data: dict[str, Any], service: str = "foreign") -> ReadableSpan:
    """A finished SDK span from a fixture entry (see tests/fixtures/foreign_spans/capture.py)."""
    scope = data.get("scope")
    parent = data.get("parent_span_id")
    return ReadableSpan(
        name=data["name"],
        context=_context(data["trace_id"], data["span_id"]),
        parent=None if parent is None else _context(data["trace_id"], parent),
        resource=Resource({"service.name": service}),
        attributes=_attributes(data["attributes"]),
        events=[Event(e["name"], _attributes(e["attributes"]), e["timestamp"]) for e in data.get("events", [])],
        kind=SpanKind[data.get("kind", "INTERNAL")],
        status=Status(StatusCode[data["status"]["code"]], data["status"]["description"]),
        start_time=data["start_time"],
        end_time=data["end_time"],
        instrumentation_scope=None if scope is None else InstrumentationScope(scope["name"], scope["version"]),
    )


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def store(
    tmp_path: Path, spans: list[ReadableSpan], name: str = "foreign", plugin_manager=None
) -> duckdb.DuckDBPyConnection:
    """Export ``spans`` through the real exporter (built-in normalisers) into a fresh file."""
    path = tmp_path / f"{name}.duckdb"
    exporter = DuckDBSpanExporter(
        path, plugin_manager=plugin_manager or plugins.new_plugin_manager(load_entry_points=False)
    )
    try:
        exporter.export(spans)
    finally:
        exporter.shutdown()
    stats = exporter.stats
    assert stats["last_error"] is None, stats
    assert (stats["spans_written"], stats["spans_dropped"]) == (len(spans), 0)
    return duckdb.connect(str(path), read_only=True)


def store_fixture(tmp_path: Path, name: str) -> duckdb.DuckDBPyConnection:
    return store(tmp_path, [span_from_dict(s, name) for s in load_fixture(name)["spans"]], name)


def rows(connection: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    relation = connection.sql(sql)
    return [dict(zip(relation.columns, row)) for row in relation.fetchall()]


def span_attributes(connection: duckdb.DuckDBPyConnection, name: str) -> list[dict[str, Any]]:
    return [json.loads(a) for (a,) in connection.execute(
        "select attributes from spans where name = ? order by start_unix_nano", [name]).fetchall()]


def _plain_calls(calls):
    if not calls:
        return None
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def conversation(connection: duckdb.DuckDBPyConnection) -> list[tuple]:
    """Each LLM call's input and output as the dataset layer reads them (messages_sql), with
    tool call arguments parsed (instrumentors differ in JSON whitespace only)."""
    out = []
    for inp, outp in connection.sql(
        f"select {messages_sql('input_messages')}, {messages_sql('output_messages')} from llm_calls order by start_time"
    ).fetchall():
        out.append(tuple(
            [(m["role"], m["content"], m["tool_call_id"], _plain_calls(m["tool_calls"])) for m in messages]
            for messages in (inp, outp)
        ))
    return out


EXPECTED_CONVERSATION = [
    (
        [("system", SYSTEM, None, None), ("user", QUESTION, None, None)],
        [("assistant", "", None, [("call_add", "add", {"a": 2, "b": 3}), ("call_div", "divide", {"a": 1, "b": 0})])],
    ),
    (
        [
            ("system", SYSTEM, None, None),
            ("user", QUESTION, None, None),
            ("assistant", "", None, [("call_add", "add", {"a": 2, "b": 3}), ("call_div", "divide", {"a": 1, "b": 0})]),
            ("tool", "5", "call_add", None),
            ("tool", "error: division by zero", "call_div", None),
        ],
        [("assistant", ANSWER, None, None)],
    ),
]


# --- the same agent run, recorded by each library -----------------------------------------
@pytest.mark.parametrize("name", AGENT_FIXTURES)
def test_every_convention_gives_the_same_rollout(tmp_path, name):
    connection = store_fixture(tmp_path, name)
    (rollout,) = rows(connection, "select * from rollouts")
    assert rollout["name"] in ("solve", "solve.workflow", "invoke_workflow solve")  # the workflow/chain root
    assert rollout["agent_name"] == "math_agent"
    assert rollout["status"] == "ok"
    assert (rollout["n_spans"], rollout["n_llm_calls"], rollout["n_tool_calls"], rollout["n_tool_errors"]) == (6, 2, 2, 1)
    assert (rollout["input_tokens"], rollout["output_tokens"]) == (42 + 61, 30 + 12)
    steps = rows(connection, "select kind, name, status from steps order by step_index")
    assert [(s["kind"], s["name"], s["status"]) for s in steps] == [
        ("llm", "gpt-4o-mini-2024-07-18", "ok"),
        ("tool", "add", "ok"),
        ("tool", "divide", "error"),
        ("llm", "gpt-4o-mini-2024-07-18", "ok"),
    ]
    calls = rows(connection, "select * from llm_calls order by start_time")
    assert [(c["operation"], c["provider"], c["request_model"], c["response_model"]) for c in calls] == [
        ("chat", "openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18")
    ] * 2
    assert [(c["input_tokens"], c["output_tokens"]) for c in calls] == [(42, 30), (61, 12)]
    assert [json.loads(c["finish_reasons"])[0][:9] for c in calls] == ["tool_call", "stop"]
    assert conversation(connection) == EXPECTED_CONVERSATION
    tools = rows(connection, "select * from tool_calls order by start_time")
    assert [(t["tool_name"], json.loads(t["arguments"]), t["status"]) for t in tools] == [
        ("add", {"a": 2, "b": 3}, "ok"),
        ("divide", {"a": 1, "b": 0}, "error"),
    ]
    assert str(json.loads(tools[0]["result"])) == "5"
    assert tools[1]["result"] is None
    assert "division by zero" in tools[1]["error"]
    (agent,) = rows(connection, "select * from agents")
    assert (agent["agent_name"], agent["is_rollout_root"]) == ("math_agent", False)


def test_openinference_details(tmp_path):
    connection = store_fixture(tmp_path, "openinference_openai_agent")
    (rollout,) = rows(connection, "select * from rollouts")
    assert (rollout["name"], rollout["input"], rollout["output"]) == ("solve", json.dumps(QUESTION), json.dumps(ANSWER))
    tools = rows(connection, "select tool_name, arguments, result, error from tool_calls order by start_time")
    assert tools == [
        {"tool_name": "add", "arguments": '{"a": 2, "b": 3}', "result": '"5"', "error": None},  # text/plain -> JSON string
        {"tool_name": "divide", "arguments": '{"a": 1, "b": 0}', "result": None,
         "error": "ZeroDivisionError: division by zero"},
    ]
    (agent,) = rows(connection, "select input, output from agents")
    assert agent == {"input": json.dumps(QUESTION), "output": json.dumps(ANSWER)}
    for attrs in span_attributes(connection, "ChatCompletion"):
        assert attrs[sc.GEN_AI_CONVERSATION_ID] == "session-42"  # session.id
        assert attrs["llm.input_messages.0.message.role"] == "system"  # the original keys are kept
    (tool,) = span_attributes(connection, "add")
    assert tool[sc.GEN_AI_TOOL_DESCRIPTION] == "add two numbers"
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS in tool and "tool.parameters" in tool  # the schema is not the arguments
    (chain,) = span_attributes(connection, "solve")
    assert chain[sc.GEN_AI_OPERATION_NAME] == "invoke_workflow"


def test_openllmetry_traceloop_details(tmp_path):
    connection = store_fixture(tmp_path, "openllmetry_openai_agent")
    (rollout,) = rows(connection, "select * from rollouts")
    assert rollout["name"] == "solve.workflow"
    assert json.loads(rollout["input"]) == {"args": [QUESTION], "kwargs": {}}  # as Traceloop records the call
    assert json.loads(rollout["output"]) == ANSWER
    tools = rows(connection, "select tool_name, arguments, result from tool_calls order by start_time")
    assert tools == [
        {"tool_name": "add", "arguments": '{"a": 2, "b": 3}', "result": "5"},  # the kwargs of the call
        {"tool_name": "divide", "arguments": '{"a": 1, "b": 0}', "result": None},
    ]
    (workflow,) = span_attributes(connection, "solve.workflow")
    assert workflow[sc.GEN_AI_OPERATION_NAME] == "invoke_workflow"
    assert workflow["traceloop.entity.input"] == '{"args": ["What is 2+3, and 1/0?"], "kwargs": {}}'


def test_openllmetry_flattened_llm_spans(tmp_path):
    """OpenLLMetry before the GenAI JSON messages: each parentless LLM call is its own rollout."""
    connection = store_fixture(tmp_path, "openllmetry_legacy_openai_agent")
    assert conversation(connection) == EXPECTED_CONVERSATION
    calls = rows(connection, "select * from llm_calls order by start_time")
    assert [(c["operation"], c["provider"], c["input_tokens"], c["output_tokens"], c["finish_reasons"]) for c in calls] == [
        ("chat", "openai", 42, 30, '["tool_calls"]'),
        ("chat", "openai", 61, 12, '["stop"]'),
    ]
    rollouts = rows(connection, "select n_llm_calls, input_tokens from rollouts order by input_tokens")
    assert rollouts == [{"n_llm_calls": 1, "input_tokens": 42}, {"n_llm_calls": 1, "input_tokens": 61}]


def test_current_genai_spans_are_left_as_they_are(tmp_path):
    spans = load_fixture("genai_openai_agent")["spans"]
    for data in spans:
        attrs = _attributes(data["attributes"])
        before = dict(attrs)
        normalize_all(attrs, data["name"])
        assert attrs == before, data["name"]
    connection = store_fixture(tmp_path, "genai_openai_agent")
    (tool,) = rows(connection, "select call_id, error_type from tool_calls where status = 'error'")
    assert tool == {"call_id": "call_div", "error_type": "ZeroDivisionError"}


# --- precedence ---------------------------------------------------------------------------
def _span(name: str, attributes: dict[str, Any], *, span_id: str, trace_id: str = "ab" * 16, parent: str | None = None,
          start: int = 1_000, error: str | None = None) -> ReadableSpan:
    return span_from_dict(
        {
            "name": name,
            "trace_id": trace_id,
            "span_id": span_id,
            "parent_span_id": parent,
            "start_time": start,
            "end_time": start + 500,
            "status": {"code": "ERROR" if error else "UNSET", "description": error},
            "attributes": attributes,
        }
    )


MIXED_LLM = {
    # current GenAI
    sc.GEN_AI_REQUEST_MODEL: "genai-model",
    sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "parts": [{"type": "text", "content": "from genai"}]}]),
    # OpenInference
    "openinference.span.kind": "LLM",
    "llm.model_name": "oi-model",
    "llm.provider": "oi-provider",
    "llm.token_count.prompt": 11,
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "from openinference",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": "answer from openinference",
    # OpenLLMetry / deprecated GenAI
    "llm.request.type": "completion",
    sc.GEN_AI_SYSTEM: "legacy-system",
    "gen_ai.usage.prompt_tokens": 99,
    "gen_ai.usage.completion_tokens": 7,
    "gen_ai.prompt.0.role": "user",
    "gen_ai.prompt.0.content": "from openllmetry",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.content": "answer from openllmetry",
    "gen_ai.completion.0.finish_reason": "length",
}


def test_precedence_on_a_span_with_several_conventions(tmp_path):
    connection = store(tmp_path, [_span("mixed", MIXED_LLM, span_id="01" * 8)])
    (call,) = rows(connection, "select * from llm_calls")
    assert call["operation"] == "chat"  # OpenInference LLM states the kind before llm.request.type
    assert call["request_model"] == "genai-model"  # current GenAI key present: kept
    assert call["response_model"] == "oi-model"  # OpenInference > OpenLLMetry
    assert call["provider"] == "oi-provider"  # OpenInference > gen_ai.system
    assert json.loads(call["input_messages"])[0]["parts"][0]["content"] == "from genai"
    assert json.loads(call["output_messages"]) == [{"role": "assistant", "content": "answer from openinference"}]
    assert (call["input_tokens"], call["output_tokens"]) == (11, 7)  # per key: OI's prompt, legacy completion
    assert call["finish_reasons"] == '["length"]'  # only the flattened completion states one
    (attrs,) = span_attributes(connection, "mixed")
    assert {k: attrs[k] for k in MIXED_LLM} == MIXED_LLM  # every original key kept as recorded


def test_own_kind_wins_over_foreign_kinds(tmp_path):
    """agent_rl.span.kind says tool: the OpenInference LLM kind is not restated, and the
    OpenInference/Traceloop keys are read as a tool call's."""
    attributes = {
        sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
        sc.GEN_AI_TOOL_NAME: "ours",
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.content": "not an llm call",
        "input.value": '{"q": 1}',
        "input.mime_type": "application/json",
        "traceloop.span.kind": "agent",
        "traceloop.entity.name": "theirs",
        "traceloop.entity.output": '"from traceloop"',
    }
    connection = store(tmp_path, [_span("own tool", attributes, span_id="02" * 8)])
    assert rows(connection, "select count(*) as n from llm_calls") == [{"n": 0}]
    (tool,) = rows(connection, "select tool_name, arguments, result from tool_calls")
    assert tool == {"tool_name": "ours", "arguments": '{"q": 1}', "result": '"from traceloop"'}
    (attrs,) = span_attributes(connection, "own tool")
    assert sc.GEN_AI_OPERATION_NAME not in attrs and sc.GEN_AI_INPUT_MESSAGES not in attrs


def test_builtin_order_is_the_stated_precedence():
    assert [name for name, _ in BUILTIN_NORMALIZERS] == ["covered", "openinference", "openllmetry", "genai"]
    collected = [name for name, _ in collect_normalizers(plugins.new_plugin_manager(load_entry_points=False))]
    assert collected[-4:] == ["covered", "openinference", "openllmetry", "genai"]


def test_an_outside_normalizer_runs_before_the_builtins(tmp_path):
    class Outside:
        @hookimpl
        def agent_rl_register_normalizers(self, register):
            register("outside", lambda attrs, name: attrs.setdefault(sc.GEN_AI_RESPONSE_MODEL, "outside-model"))

    pm = plugins.new_plugin_manager(load_entry_points=False)
    pm.register(Outside(), name="outside")
    assert [name for name, _ in collect_normalizers(pm)][0] == "outside"
    connection = store(tmp_path, [_span("mixed", MIXED_LLM, span_id="03" * 8)], plugin_manager=pm)
    assert rows(connection, "select response_model from llm_calls") == [{"response_model": "outside-model"}]


# --- malformed attributes -----------------------------------------------------------------
MALFORMED = {
    "bad json messages": {
        "openinference.span.kind": "LLM",
        sc.GEN_AI_INPUT_MESSAGES: '[{"role": "user", "content": "cut',  # present: kept, never replaced
        "llm.input_messages.0.message.role": 5,
        "llm.input_messages.0.message.content": ("a", "b"),
        "llm.output_messages.0.message": "a leaf where a subtree should be",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.x.message.role": "not an index",
        "llm.output_messages.2.message.content": "after a gap",
        "llm.token_count.prompt": "abc",
        "llm.token_count.completion": 3.0,
        "llm.token_count.total": "10",
        "llm.model_name": 42,
        "llm.invocation_parameters": "{not json",
        "llm.finish_reason": ("stop", 1),
        "session.id": 7,
    },
    "bad tool": {
        "openinference.span.kind": "tool",
        "tool.name": ("a", "tuple"),
        "input.value": "{not json",
        "input.mime_type": "application/json",
        "output.value": 12,
        "tool_call.function.arguments": True,
    },
    "bad kinds": {
        "openinference.span.kind": 7,
        "traceloop.span.kind": ("tool",),
        "llm.request.type": ["chat"],
        sc.GEN_AI_SYSTEM: 3,
        "gen_ai.prompt.1.content": "a prompt with no index 0",
        "gen_ai.prompt.0": "a leaf",
        "gen_ai.completion.0.tool_calls.0.arguments": "{}",
    },
    "bad traceloop": {
        "traceloop.span.kind": "TOOL",
        "traceloop.entity.input": '{"args": "not a list", "kwargs": 3}',
        "traceloop.entity.output": "not json",
        "llm.usage.total_tokens": -5,
    },
}


def test_malformed_attributes_lose_nothing_and_do_not_raise(tmp_path):
    spans = [
        _span(name, attributes, span_id=f"{index + 10:02d}" * 8, start=1_000 + index)
        for index, (name, attributes) in enumerate(MALFORMED.items())
    ]
    connection = store(tmp_path, spans)  # asserts: every span written, no error reported
    for name, attributes in MALFORMED.items():
        (stored,) = span_attributes(connection, name)
        expected = {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()}
        assert {k: stored[k] for k in attributes} == expected, name
    (call,) = rows(connection, "select * from llm_calls")
    assert call["input_messages"] == MALFORMED["bad json messages"][sc.GEN_AI_INPUT_MESSAGES]
    # message 0 is a leaf (its .role is left out of the tree: it stays in the raw keys); the
    # non-numeric index is skipped; the gap before index 2 is closed
    assert json.loads(call["output_messages"]) == [{"role": "assistant", "content": "after a gap"}]
    assert (call["input_tokens"], call["output_tokens"]) == (7, 3)  # total 10 - completion 3; "abc" ignored
    assert call["request_model"] == call["response_model"] == "42"
    assert json.loads(call["finish_reasons"]) == ["stop", "1"]
    tools = rows(connection, "select tool_name, arguments, result from tool_calls order by start_time")
    assert tools[0] == {"tool_name": "('a', 'tuple')", "arguments": "true", "result": "12"}  # kinds read case-blind
    assert tools[1]["tool_name"] == "bad traceloop"  # no traceloop.entity.name: the span name
    (traceloop_tool,) = span_attributes(connection, "bad traceloop")
    assert traceloop_tool[sc.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"args": "not a list", "kwargs": 3}'
    assert traceloop_tool[sc.GEN_AI_TOOL_CALL_RESULT] == '"not json"'
    (kinds,) = span_attributes(connection, "bad kinds")
    assert sc.GEN_AI_OPERATION_NAME not in kinds  # no kind could be read: none is made up
    assert json.loads(kinds[sc.GEN_AI_INPUT_MESSAGES]) == [{"role": "user", "content": "a prompt with no index 0"}]


_READ_KEYS = sorted(
    {
        value
        for module in (openinference, openllmetry, genai)
        for key, value in vars(module).items()
        if key.isupper() and isinstance(value, str) and not value.endswith(".")
    }
    | {sc.GEN_AI_OPERATION_NAME, sc.SPAN_KIND, sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_USAGE_INPUT_TOKENS}
)
_ODD_VALUES = [0, -1, 1.5, float("nan"), True, "", "[", "{}", "[1]", '{"messages": 3, "choices": [1]}', (), ("a", 2), (1.5,)]


@pytest.mark.parametrize("kind", [None, "LLM", "TOOL", "AGENT", "CHAIN", "workflow", "tool", "chat", "execute_tool"])
def test_any_value_of_any_read_key_is_tolerated(kind):
    for value in _ODD_VALUES:
        base = {
            "llm.input_messages.0.message.role": "user",
            "gen_ai.prompt.0.content": "hi",
            "llm.output_messages.0.message.contents.0.message_content.type": "image",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": value,
        }
        if kind is not None:
            base["openinference.span.kind" if kind.isupper() else "traceloop.span.kind"] = kind
            if kind in ("chat", "execute_tool"):
                base[sc.GEN_AI_OPERATION_NAME] = kind
        for key in _READ_KEYS:
            attrs = {**base, key: value}
            normalize_all(attrs, "span")  # must not raise
            assert attrs[key] is value or attrs[key] == value


# --- the converter's skip: triggers ---------------------------------------------------------
def _fixture_attribute_dicts() -> list[dict[str, Any]]:
    found = [_attributes(s["attributes"]) for name in ALL_FIXTURES for s in load_fixture(name)["spans"]]
    return found + [MIXED_LLM]


@pytest.mark.parametrize(("name", "normalize"), BUILTIN_NORMALIZERS)
def test_each_builtin_does_nothing_without_its_triggers(name, normalize):
    """The promise ``triggers`` makes (the converter skips a span holding none of the keys): every
    fixture span, stripped of the trigger keys only, comes out unchanged."""
    triggers = normalize.triggers
    assert isinstance(triggers, frozenset) and triggers
    for attrs in _fixture_attribute_dicts():
        stripped = {k: v for k, v in attrs.items() if k not in triggers}
        before = dict(stripped)
        normalize(stripped, "span")
        assert stripped == before, (name, sorted(set(stripped) - set(before)))


def test_the_converter_skips_normalizers_only_when_no_trigger_is_present():
    from agent_rl_plugin.store.rows import SpanConverter

    calls: list[str] = []

    def spy(label: str, triggers: frozenset[str] | None):
        def normalize(attrs: dict[str, Any], span_name: str) -> None:
            calls.append(label)

        if triggers is not None:
            normalize.triggers = triggers  # type: ignore[attr-defined]
        return normalize

    plain = _span("plain", {"x.y": 1}, span_id="04" * 8)
    triggered = _span("triggered", {"b.key": 1}, span_id="05" * 8)
    keyed = SpanConverter(normalizers=[("a", spy("a", frozenset({"a.key"}))), ("b", spy("b", frozenset({"b.key"})))])
    keyed.convert([plain])
    assert calls == []  # no key of either: both skipped
    keyed.convert([triggered])
    assert calls == ["a", "b"]  # one key present: every normaliser runs, in order
    calls.clear()
    always = SpanConverter(normalizers=[("a", spy("a", frozenset({"a.key"}))), ("c", spy("c", None))])
    always.convert([plain])
    assert calls == ["a", "c"]  # one without triggers: it must always run, so all do
    calls.clear()
    keyed.normalizers = [("c", spy("c", None))]  # replacing them recomputes the keys
    keyed.convert([plain])
    assert calls == ["c"]
