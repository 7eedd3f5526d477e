"""LLM client capture: an agent that calls the real OpenAI and Anthropic SDKs, with only
``configure()`` and ``@trace_agent``, stores one ``chat`` span per call (messages, tool calls,
token counts, and token ids / log-probs where the server returns them), against a scripted
server on 127.0.0.1 that speaks both APIs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import anthropic
import openai
import pytest

import agent_rl_plugin as arl
from agent_rl_plugin.instrumentation.clients import (
    client_capture_paused,
    instrument_clients,
    instrumented_clients,
    uninstrument_clients,
)
from agent_rl_plugin.instrumentation.clients.registry import MARKER
from agent_rl_plugin.testing import StoreReader
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


@pytest.fixture
def server():
    with ScriptedLLMServer(["Paris."]) as s:
        yield s


@pytest.fixture
def store(db_path):
    arl.configure(db_path=str(db_path))
    return StoreReader(str(db_path))


def llm_rows(store: StoreReader) -> list[dict]:
    arl.flush()
    return store.rows(
        "select l.*, s.attributes from llm_calls l join spans s using (span_id) order by l.start_time"
    )


def attr(row: dict, key: str):
    value = json.loads(row["attributes"]).get(key)
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def test_a_plain_openai_agent_records_each_call_in_its_rollout(store):
    with ScriptedLLMServer([Reply(tool_calls=[("search", {"q": "capital of France"})]), "Paris."]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")

        @arl.trace_agent
        def agent(question: str) -> str:
            messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}]
            first = client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS, temperature=0.2)
            call = first.choices[0].message.tool_calls[0]
            messages += [first.choices[0].message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": call.id, "content": "Paris"}]
            return client.chat.completions.create(model="gpt-test", messages=messages).choices[0].message.content

        assert agent("capital of France?") == "Paris."
    rows = llm_rows(store)
    assert len(rows) == 2
    assert {r["rollout_id"] for r in rows} == {store.one("select rollout_id from rollouts")}
    agent_span = store.one("select span_id from spans where name like 'invoke_agent%'")
    assert all(r["parent_span_id"] == agent_span for r in rows)
    first, second = rows
    assert first["provider"] == "openai" and first["request_model"] == "gpt-test"
    assert json.loads(first["input_messages"])[0] == {"role": "system", "content": "Be brief."}
    call = json.loads(first["output_messages"])[0]["tool_calls"][0]
    assert call["function"] == {"name": "search", "arguments": json.dumps({"q": "capital of France"})}
    assert attr(first, "gen_ai.request.temperature") == 0.2
    assert attr(first, "gen_ai.tool.definitions")[0]["function"]["name"] == "search"
    assert attr(first, "gen_ai.response.finish_reasons") == ["tool_calls"]
    assert [m["role"] for m in json.loads(second["input_messages"])] == ["system", "user", "assistant", "tool"]
    assert json.loads(second["output_messages"]) == [{"role": "assistant", "content": "Paris."}]
    assert (second["input_tokens"], second["output_tokens"]) == (server_prompt_words(second), 1)


def server_prompt_words(row: dict) -> int:
    return len(json.dumps(json.loads(row["input_messages"])).split())


@pytest.mark.parametrize("stream", [False, True])
def test_token_ids_and_logprobs_from_a_vllm_style_server_are_stored(store, stream):
    reply = Reply(text="go left", token_ids=[101, 7], logprobs=[-0.25, -1.5], prompt_token_ids=[1, 2, 3])
    with ScriptedLLMServer([reply]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")
        with arl.rollout(task_id="t"):
            answer = client.chat.completions.create(
                model="policy", messages=[{"role": "user", "content": "which way?"}], logprobs=True,
                extra_body={"return_token_ids": True}, stream=stream,
                **({"stream_options": {"include_usage": True}} if stream else {}),
            )
            if stream:
                chunks = list(answer)
                assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "go left"
            else:
                assert answer.choices[0].message.content == "go left"
    (row,) = llm_rows(store)
    assert attr(row, "agent_rl.token_ids") == [101, 7]
    assert attr(row, "agent_rl.logprobs") == [-0.25, -1.5]
    assert attr(row, "agent_rl.prompt_token_ids") == [1, 2, 3]
    assert row["output_tokens"] == 2
    assert json.loads(row["output_messages"]) == [{"role": "assistant", "content": "go left"}]


def test_a_streamed_tool_call_is_assembled_from_its_pieces(store):
    with ScriptedLLMServer([Reply(tool_calls=[("move", {"direction": "north", "steps": 2})])]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")
        with arl.rollout(task_id="t"), client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], tools=TOOLS, stream=True
        ) as stream:
            for _ in stream:
                pass
    (row,) = llm_rows(store)
    (call,) = json.loads(row["output_messages"])[0]["tool_calls"]
    assert call["function"]["name"] == "move"
    assert json.loads(call["function"]["arguments"]) == {"direction": "north", "steps": 2}


def test_async_calls_and_async_streams_are_captured(store, server):
    client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="test")

    async def agent() -> str:
        whole = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}], stream=True)
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return whole.choices[0].message.content + "|" + "".join(pieces)

    with arl.rollout(task_id="t"):
        assert asyncio.run(agent()) == "Paris.|Paris."
    rows = llm_rows(store)
    assert [json.loads(r["input_messages"])[0]["content"] for r in rows] == ["a", "b"]
    assert all(r["rollout_id"] for r in rows)


def test_the_responses_api_whole_and_streamed(store):
    replies = [Reply(tool_calls=[("search", {"q": "x"})]), "Found it.", "Streamed answer"]
    with ScriptedLLMServer(replies) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")
        with arl.rollout(task_id="t"):
            first = client.responses.create(model="m", input="find x", instructions="Use tools.")
            call = first.output[0]
            second = client.responses.create(model="m", input=[
                {"role": "user", "content": "find x"},
                {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
                {"type": "function_call_output", "call_id": call.call_id, "output": "x is here"},
            ])
            assert second.output_text == "Found it."
            events = list(client.responses.create(model="m", input="stream it", stream=True))
            assert events[-1].type == "response.completed"
    rows = llm_rows(store)
    assert len(rows) == 3
    assert json.loads(rows[0]["input_messages"]) == [
        {"role": "system", "content": "Use tools."}, {"role": "user", "content": "find x"}]
    assert json.loads(rows[0]["output_messages"])[0]["tool_calls"][0]["function"]["name"] == "search"
    assert [m["role"] for m in json.loads(rows[1]["input_messages"])] == ["user", "assistant", "tool"]
    assert json.loads(rows[2]["output_messages"]) == [{"role": "assistant", "content": "Streamed answer"}]
    assert rows[2]["output_tokens"] == 2


def test_anthropic_calls_whole_streamed_and_with_the_stream_helper(store):
    replies = [Reply(text="Let me look.", tool_calls=[("search", {"q": "x"})]), "Whole.", "Streamed.", "Helper."]
    with ScriptedLLMServer(replies) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test")
        with arl.rollout(task_id="t"):
            first = client.messages.create(model="claude-test", max_tokens=50, system="Be brief.", tools=[
                {"name": "search", "input_schema": {"type": "object"}}], messages=[{"role": "user", "content": "find x"}])
            tool_use = first.content[1]
            client.messages.create(model="claude-test", max_tokens=50, messages=[
                {"role": "user", "content": "find x"},
                {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "x"}]},
            ])
            for _ in client.messages.create(model="claude-test", max_tokens=50, stream=True,
                                            messages=[{"role": "user", "content": "s"}]):
                pass
            with client.messages.stream(model="claude-test", max_tokens=50, messages=[{"role": "user", "content": "h"}]) as s:
                assert "".join(s.text_stream) == "Helper."
    rows = llm_rows(store)
    # the SDK's own GenAI span of each call is kept as a client request, not a second LLM call
    assert len(rows) == 4
    assert store.one("select count(*) from spans where attributes->>'$.\"agent_rl.covered.operation\"' = 'chat'") == 4
    first = rows[0]
    assert first["provider"] == "anthropic"
    assert json.loads(first["input_messages"])[0] == {"role": "system", "content": "Be brief."}
    out = json.loads(first["output_messages"])[0]
    assert out["content"] == "Let me look."
    assert out["tool_calls"][0]["function"] == {"name": "search", "arguments": json.dumps({"q": "x"})}
    assert [m["role"] for m in json.loads(rows[1]["input_messages"])] == ["user", "assistant", "tool"]
    assert json.loads(rows[1]["input_messages"])[1]["tool_calls"][0]["id"] == tool_use.id
    assert [json.loads(r["output_messages"])[0]["content"] for r in rows[1:]] == ["Whole.", "Streamed.", "Helper."]
    assert [r["output_tokens"] for r in rows[1:]] == [1, 1, 1]


def test_a_failed_call_is_recorded_and_its_error_reaches_the_agent_unchanged(store):
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="test", max_retries=0)
    with arl.rollout(task_id="t"), pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    (row,) = llm_rows(store)
    assert row["status"] == "error" and "APIConnectionError" in (row["error"] or "") + str(row["attributes"])


def test_capture_can_be_switched_off_and_restores_the_sdk_exactly(db_path, server):
    uninstrument_clients()  # an earlier test's configure() may have patched the SDK
    create = openai.resources.chat.completions.Completions.create
    assert not getattr(create, MARKER, False)
    arl.configure(db_path=str(db_path), instrument_clients="none")
    assert openai.resources.chat.completions.Completions.create is create
    client = openai.OpenAI(base_url=server.openai_url, api_key="test")
    with arl.rollout(task_id="t"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert llm_rows(StoreReader(str(db_path))) == []
    assert instrument_clients(["openai"]) == ["openai"]
    assert openai.resources.chat.completions.Completions.create is not create
    assert instrument_clients(["openai"]) == ["openai"]  # idempotent: one wrapper, not two
    assert openai.resources.chat.completions.Completions.create.__wrapped__ is create
    uninstrument_clients(["openai"])
    assert openai.resources.chat.completions.Completions.create is create
    assert "openai" not in instrumented_clients()


def test_paused_capture_records_nothing_so_integrations_do_not_double_record(store, server):
    client = openai.OpenAI(base_url=server.openai_url, api_key="test")
    with arl.rollout(task_id="t"):
        with client_capture_paused():
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "inside"}])
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "outside"}])
    assert [json.loads(r["input_messages"])[0]["content"] for r in llm_rows(store)] == ["outside"]


def test_an_unknown_client_name_is_refused_with_the_supported_ones():
    with pytest.raises(ValueError, match="openai, anthropic, litellm"):
        arl.RLConfig(instrument_clients=["opneai"])
    with pytest.raises(ValueError, match="unknown LLM client 'opneai'") as refused:
        instrument_clients("opneai")
    assert "use 'auto', 'none' or some of: openai, anthropic, litellm" in refused.value.hint


def test_configure_imports_no_sdk_and_patches_it_when_the_agent_imports_it(tmp_path):
    with ScriptedLLMServer(["Paris."]) as server:
        script = textwrap.dedent(f"""
            import sys
            import agent_rl_plugin as arl
            arl.configure(db_path={str(tmp_path / 'late.duckdb')!r})
            assert "openai" not in sys.modules and "anthropic" not in sys.modules, "configure imported an SDK"
            import openai
            client = openai.OpenAI(base_url={server.openai_url!r}, api_key="test")

            @arl.trace_agent
            def agent(q):
                return client.chat.completions.create(model="m", messages=[{{"role": "user", "content": q}}])

            agent("hi")
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    reader = StoreReader(str(tmp_path / "late.duckdb"))
    assert reader.one("select count(*) from llm_calls where rollout_id is not null") == 1


def test_patching_twice_wraps_once_and_restoring_puts_back_the_original():
    from agent_rl_plugin.instrumentation.clients import openai_sdk, registry

    uninstrument_clients()
    create = openai.resources.chat.completions.Completions.create
    patches = openai_sdk.patches()
    assert registry.apply(patches) == registry.apply(patches) == len(patches)
    assert openai.resources.chat.completions.Completions.create.__wrapped__ is create
    registry.restore(patches)
    assert openai.resources.chat.completions.Completions.create is create


def test_the_chat_completions_stream_helper_is_captured(store):
    with ScriptedLLMServer(["helper stream text"]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")
        with arl.rollout(task_id="t"), client.chat.completions.stream(
            model="m", messages=[{"role": "user", "content": "q"}]
        ) as stream:
            for _ in stream:
                pass
            assert stream.get_final_completion().choices[0].message.content == "helper stream text"
    (row,) = llm_rows(store)
    assert json.loads(row["output_messages"]) == [{"role": "assistant", "content": "helper stream text"}]


def test_a_call_made_while_a_captured_call_runs_is_not_recorded_again(store):
    """What keeps LiteLLM-over-OpenAI one span: here the OpenAI call's HTTP request itself makes
    an Anthropic call (as a wrapper SDK would underneath)."""
    import httpx2

    with ScriptedLLMServer(["outer", "inner"]) as server:
        inner = anthropic.Anthropic(base_url=server.base_url, api_key="test")

        def on_request(request: httpx2.Request) -> None:
            inner.messages.create(model="inner", max_tokens=5, messages=[{"role": "user", "content": "x"}])

        outer = openai.OpenAI(base_url=server.openai_url, api_key="test",
                              http_client=httpx2.Client(event_hooks={"request": [on_request]}))
        with arl.rollout(task_id="t"):
            outer.chat.completions.create(model="outer", messages=[{"role": "user", "content": "y"}])
        assert len(server.requests) == 2
    assert [r["request_model"] for r in llm_rows(store)] == ["outer"]


def test_a_call_inside_a_frameworks_own_current_llm_span_is_left_to_the_framework(store, server):
    from opentelemetry import trace

    from agent_rl_plugin import integration

    client = openai.OpenAI(base_url=server.openai_url, api_key="test")
    with arl.rollout(task_id="t"):
        span = integration.start_span("chat framework-model", integration.LLM)
        with trace.use_span(span, end_on_exit=True):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert [r["name"] for r in llm_rows(store)] == ["chat framework-model"]


def test_a_call_inside_another_tracers_current_genai_chat_span_is_left_to_it(store, server):
    """pydantic-ai and other frameworks trace their model requests as GenAI ``chat`` spans."""
    from opentelemetry import trace

    client = openai.OpenAI(base_url=server.openai_url, api_key="test")
    tracer = trace.get_tracer("some.framework")
    with arl.rollout(task_id="t"), tracer.start_as_current_span("chat gpt", attributes={"gen_ai.operation.name": "chat"}):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert [r["name"] for r in llm_rows(store)] == ["chat gpt"]


def test_the_environment_variable_selects_clients():
    assert arl.RLConfig.from_env({"AGENT_RL_INSTRUMENT_CLIENTS": "none"}).instrument_clients == []
    assert arl.RLConfig.from_env({"AGENT_RL_INSTRUMENT_CLIENTS": "openai,LiteLLM"}).instrument_clients == [
        "openai", "litellm"]
    assert arl.RLConfig.from_env({}).instrument_clients == ["auto"]


def test_an_instrumentors_span_inside_a_captured_call_is_kept_as_a_client_request(store):
    """An OpenInference-style instrumentor traces the same request one level down (its span
    says only ``openinference.span.kind=LLM``; the store's normaliser would make it a chat span):
    it stays a client request under the captured call, not a second LLM call."""
    import httpx2
    from opentelemetry import trace

    tracer = trace.get_tracer("openinference.instrumentation.openai")

    def on_request(request: httpx2.Request) -> None:
        span = tracer.start_span("ChatCompletion", attributes={
            "openinference.span.kind": "LLM", "llm.model_name": "m",
            "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "y"})
        span.end()

    with ScriptedLLMServer(["answer"]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test",
                               http_client=httpx2.Client(event_hooks={"request": [on_request]}))
        with arl.rollout(task_id="t"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}])
    rows = llm_rows(store)
    assert [r["provider"] for r in rows] == ["openai"]
    assert store.one("select attributes->>'$.\"gen_ai.operation.name\"' from spans where name = 'ChatCompletion'") == "client_request"


def test_an_sdks_own_span_under_a_frameworks_llm_span_is_not_a_second_llm_call(store):
    """A framework records the model call (its LLM span is current, so capture leaves the call to
    it); the Anthropic SDK's own OpenTelemetry span beneath it describes the same call."""
    from opentelemetry import trace

    from agent_rl_plugin import integration

    with ScriptedLLMServer(["answer"]) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test")
        with arl.rollout(task_id="t"):
            span = integration.start_span("chat framework-model", integration.LLM)
            with trace.use_span(span, end_on_exit=True):
                client.messages.create(model="claude", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert [r["name"] for r in llm_rows(store)] == ["chat framework-model"]
    assert store.one("select count(*) from spans where attributes->>'$.\"agent_rl.covered.operation\"' = 'chat'") == 1


def test_a_captured_stream_is_the_sdks_own_stream_object(store, server):
    client = openai.OpenAI(base_url=server.openai_url, api_key="test")
    aclient = openai.AsyncOpenAI(base_url=server.openai_url, api_key="test")
    with arl.rollout(task_id="t"):
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
        assert type(stream) is openai.Stream
        list(stream)

        async def use() -> type:
            astream = await aclient.chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}],
                                                            stream=True)
            async for _ in astream:
                pass
            return type(astream)

        assert asyncio.run(use()) is openai.AsyncStream
    assert len(llm_rows(store)) == 2


def test_a_stream_left_before_its_end_is_recorded_as_incomplete(store):
    with ScriptedLLMServer(["one two three four five"]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")
        with arl.rollout(task_id="t"):
            with client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                stream=True) as stream:
                for chunk in stream:
                    if chunk.choices and (chunk.choices[0].delta.content or "").strip() == "two":
                        break  # the agent stops reading: the text it has is cut
            for _ in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}], stream=True):
                pass
    cut, whole = llm_rows(store)
    assert json.loads(cut["output_messages"]) == [{"role": "assistant", "content": "one two"}]
    assert attr(cut, "agent_rl.llm.incomplete") is True
    assert attr(whole, "agent_rl.llm.incomplete") is None
    assert json.loads(whole["output_messages"]) == [{"role": "assistant", "content": "one two three four five"}]


def test_anthropic_raw_responses_and_failed_stream_openings_are_recorded(store):
    with ScriptedLLMServer(["raw answer"]) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test")
        with arl.rollout(task_id="t"):
            raw = client.messages.with_raw_response.create(
                model="claude", max_tokens=5, messages=[{"role": "user", "content": "x"}])
            assert raw.parse().content[0].text == "raw answer"
    down = anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="test", max_retries=0)
    with arl.rollout(task_id="t2"), pytest.raises(anthropic.APIConnectionError):
        with down.messages.stream(model="claude", max_tokens=5, messages=[{"role": "user", "content": "x"}]):
            pass
    raw_row, failed = llm_rows(store)
    assert json.loads(raw_row["output_messages"]) == [{"role": "assistant", "content": "raw answer"}]
    assert failed["status"] == "error"


def test_other_exporters_see_the_sdks_own_span_as_the_sdk_made_it(store):
    """Only our store treats the covered span as a client request; a user's own exporter on the
    same tracer provider gets the Anthropic SDK's span unchanged, plus one marker attribute."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    users_exporter = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(users_exporter))
    try:
        with ScriptedLLMServer(["answer"]) as server:
            client = anthropic.Anthropic(base_url=server.base_url, api_key="test")
            with arl.rollout(task_id="t"):
                client.messages.create(model="claude", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        (sdk_span,) = [s for s in users_exporter.get_finished_spans() if s.instrumentation_scope.name != "agent_rl_plugin"]
        assert sdk_span.attributes["gen_ai.operation.name"] == "chat"
        assert sdk_span.attributes["agent_rl.covered"] == "client_request"
    finally:
        users_exporter.shutdown()
    assert [r["provider"] for r in llm_rows(store)] == ["anthropic"]


def test_a_hostile_server_cannot_make_the_agent_record_more_than_it_asked(store):
    """More choices than asked, token ids beyond any vocabulary, endless id lists: recorded as
    the answer it is, never as thousands of spans or ids that cannot index an embedding."""
    replies = [
        Reply(text="ok", token_ids=[5, 2**70], logprobs=[-0.1, -0.2], copies=50),
        Reply(text="long", token_ids=list(range(300_000)), logprobs=[-0.1] * 300_000),
        Reply(text="two", copies=2),
    ]
    with ScriptedLLMServer(replies) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")
        with arl.rollout(task_id="t"):
            answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                    extra_body={"return_token_ids": True})
            assert len(answer.choices) == 50  # the agent still gets what the server sent
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}],
                                           extra_body={"return_token_ids": True})
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "z"}], n=2)
    rows = llm_rows(store)
    assert [json.loads(r["input_messages"])[0]["content"] for r in rows] == ["x", "y", "z", "z"]
    assert attr(rows[0], "agent_rl.token_ids") is None  # 2**70 is no token id
    assert attr(rows[1], "agent_rl.token_ids") is None  # 300,000 ids: longer than any context
    assert json.loads(rows[1]["output_messages"]) == [{"role": "assistant", "content": "long"}]
    assert [attr(r, "agent_rl.choice.index") for r in rows[2:]] == [0, 1]  # n=2: one span per sample
