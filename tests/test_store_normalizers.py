"""The genai normaliser maps older GenAI attributes onto current ones without overwriting."""

from __future__ import annotations

import json

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store.normalizers import agent_rl_register_normalizers, normalize_genai


def test_registered_as_genai():
    found = []
    agent_rl_register_normalizers(register=lambda name, fn: found.append((name, fn)))
    assert ("genai", normalize_genai) in found
    assert found[-1][0] == "genai"  # the deprecated names come last (lowest precedence)


def test_current_attributes_are_left_as_they_are():
    attrs = {
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_PROVIDER_NAME: "openai",
        sc.GEN_AI_USAGE_INPUT_TOKENS: 3,
        sc.GEN_AI_INPUT_MESSAGES: "[]",
    }
    before = dict(attrs)
    normalize_genai(attrs, "chat gpt")
    assert attrs == before


def test_legacy_system_and_usage_are_mapped():
    attrs = {sc.GEN_AI_SYSTEM: "anthropic", "gen_ai.usage.prompt_tokens": 11, "gen_ai.usage.completion_tokens": 4}
    normalize_genai(attrs, "anthropic.chat")
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (11, 4)
    assert attrs[sc.GEN_AI_SYSTEM] == "anthropic"  # legacy keys are kept


def test_present_keys_are_never_overwritten():
    attrs = {
        sc.GEN_AI_SYSTEM: "old",
        sc.GEN_AI_PROVIDER_NAME: "new",
        "gen_ai.usage.prompt_tokens": 1,
        sc.GEN_AI_USAGE_INPUT_TOKENS: 2,
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "legacy",
        sc.GEN_AI_INPUT_MESSAGES: '[{"role": "user", "content": "current"}]',
    }
    normalize_genai(attrs, "chat")
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "new"
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 2
    assert json.loads(attrs[sc.GEN_AI_INPUT_MESSAGES])[0]["content"] == "current"


def test_flattened_prompt_and_completion_become_message_lists():
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "be brief",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "2+2?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "",
        "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.completion.0.tool_calls.0.id": "call-1",
        "gen_ai.completion.0.tool_calls.0.name": "add",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"a": 2, "b": 2}',
    }
    normalize_genai(attrs, "openai.chat")
    assert json.loads(attrs[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "2+2?"},
    ]
    (message,) = json.loads(attrs[sc.GEN_AI_OUTPUT_MESSAGES])
    assert message["role"] == "assistant"
    assert message["tool_calls"] == [
        {"id": "call-1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}
    ]
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ["tool_calls"]
    assert attrs[sc.GEN_AI_OPERATION_NAME] == "chat"


def test_unrelated_spans_are_untouched():
    attrs = {"http.method": "GET", "http.route": "/health"}
    normalize_genai(attrs, "GET /health")
    assert attrs == {"http.method": "GET", "http.route": "/health"}


def test_legacy_llm_span_is_counted_by_the_views(tmp_path):
    """End to end: an OpenLLMetry-style span lands in llm_calls with tokens and messages."""
    import duckdb
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from agent_rl_plugin.store import DuckDBSpanExporter

    path = tmp_path / "legacy.duckdb"
    exporter = DuckDBSpanExporter(path, normalizers=[("genai", normalize_genai)])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("openllmetry").start_span(
        "openai.chat",
        attributes={
            "llm.request.type": "chat",
            sc.GEN_AI_SYSTEM: "openai",
            "gen_ai.usage.prompt_tokens": 9,
            "gen_ai.usage.completion_tokens": 2,
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi",
        },
    ).end()
    provider.shutdown()
    connection = duckdb.connect(str(path), read_only=True)
    assert connection.execute(
        "select provider, input_tokens, output_tokens, input_messages from llm_calls"
    ).fetchall() == [("openai", 9, 2, '[{"role": "user", "content": "hi"}]')]
    assert connection.execute("select count(*) from rollouts").fetchone() == (1,)  # a foreign root LLM call
    connection.close()
