"""Datasets from agents that follow the current GenAI conventions (pydantic-ai's shape).

Their messages are ``parts`` lists; a tool result is a ``tool_call_response`` part whose payload
pydantic-ai names ``result`` (the spec says ``response``); parallel tool results share one
``tool`` message; the instructions are in ``gen_ai.system_instructions``, not in the input
messages. The spans are real SDK spans exported by the real ``DuckDBSpanExporter`` into a DuckDB
file, and the datasets are built from that file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import duckdb
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Tracer

from agent_rl_plugin import plugins
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.data import BuildReport, build_grpo_dataset, build_kto_dataset
from agent_rl_plugin.data.sql import messages_sql, system_text_sql
from agent_rl_plugin.store import DuckDBSpanExporter

INSTRUCTIONS = [{"type": "text", "content": "You are a calculator. Use the tools."}]
QUESTION = "What is 6/3, and what is pi?"


# --- the messages pydantic-ai writes ------------------------------------------------------
def user(text: str) -> dict:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def tool_call(call_id: str, name: str, **arguments: Any) -> dict:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def calls(*parts: dict, text: str | None = None) -> dict:
    return {"role": "assistant", "parts": ([{"type": "text", "content": text}] if text else []) + list(parts)}


def result(call_id: str, name: str, value: Any, key: str = "result") -> dict:
    return {"type": "tool_call_response", "id": call_id, "name": name, key: value}


def answer(text: str) -> dict:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}


PARALLEL_CALLS = calls(tool_call("c1", "divide", a=6, b=3), tool_call("c2", "lookup", key="pi"), text="Two tools.")
PARALLEL_RESULTS = {"role": "tool", "parts": [result("c1", "divide", 2.0), result("c2", "lookup", "3.14159")]}


def parallel_run() -> list[tuple[list, list]]:
    """Two chat calls: parallel tool calls, then the answer (each input the whole history)."""
    first_in = [user(QUESTION)]
    first_out = [PARALLEL_CALLS]
    second_in = first_in + first_out + [PARALLEL_RESULTS]
    return [(first_in, first_out), (second_in, [answer("6/3 = 2 and pi is 3.14159")])]


# --- recording ----------------------------------------------------------------------------
def record_runs(path: Path, runs: Sequence[dict[str, Any]]) -> None:
    """One pydantic-ai-like agent run per entry (``llm_calls``: (input, output) message lists;
    ``instructions``: the gen_ai.system_instructions value or None; ``reward``), each its own
    trace, recorded by the real exporter into ``path``."""
    exporter = DuckDBSpanExporter(path, plugin_manager=plugins.new_plugin_manager(load_entry_points=False))
    provider = TracerProvider(resource=Resource({"service.name": "genai-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pydantic-ai")
    for run in runs:
        _agent_run(tracer, **run)
    provider.shutdown()
    assert exporter.stats["last_error"] is None, exporter.stats


def _agent_run(tracer: Tracer, llm_calls: Sequence[tuple[list, list]], reward: float,
               instructions: Any = INSTRUCTIONS, group: str = "g1") -> None:
    root = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "calc", sc.GROUP_ID: group}
    with tracer.start_as_current_span("invoke_agent calc", attributes=root) as agent:
        for messages_in, messages_out in llm_calls:
            attributes = {
                sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                sc.GEN_AI_REQUEST_MODEL: "scripted",
                sc.GEN_AI_INPUT_MESSAGES: json.dumps(messages_in),
                sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(messages_out),
            }
            if instructions is not None:
                attributes[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = (
                    instructions if isinstance(instructions, str) else json.dumps(instructions)
                )
            with tracer.start_as_current_span("chat scripted", attributes=attributes):
                pass
        agent.add_event(sc.EVENT_EVALUATION_RESULT, {
            sc.GEN_AI_EVALUATION_NAME: "correct", sc.GEN_AI_EVALUATION_SCORE_VALUE: reward})


def kto(tmp_path: Path, runs: Sequence[dict[str, Any]], **kwargs: Any):
    path = tmp_path / "genai.duckdb"
    record_runs(path, runs)
    report = BuildReport()
    return build_kto_dataset(path, report=report, **kwargs), report


def plain(messages: list[dict]) -> list[tuple]:
    """(role, content, tool_call_id, [(id, name, arguments)]) of each message."""
    return [
        (m["role"], m["content"], m["tool_call_id"],
         [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m["tool_calls"]]
         if m["tool_calls"] else None)
        for m in messages
    ]


SYSTEM_MESSAGE = ("system", "You are a calculator. Use the tools.", None, None)
EXPECTED_COMPLETION = [
    ("assistant", "Two tools.", None, [("c1", "divide", {"a": 6, "b": 3}), ("c2", "lookup", {"key": "pi"})]),
    ("tool", "2.0", "c1", None),
    ("tool", "3.14159", "c2", None),
    ("assistant", "6/3 = 2 and pi is 3.14159", None, None),
]


# --- the tests ----------------------------------------------------------------------------
def test_a_genai_run_becomes_an_openai_style_conversation(tmp_path):
    ds, report = kto(tmp_path, [{"llm_calls": parallel_run(), "reward": 1.0}])
    row = ds[0]
    assert plain(row["prompt"]) == [SYSTEM_MESSAGE, ("user", QUESTION, None, None)]
    assert plain(row["completion"]) == EXPECTED_COMPLETION
    assert row["completion"][1] == {"role": "tool", "content": "2.0", "tool_calls": None, "tool_call_id": "c1", "name": None}
    assert row["label"] is True and report.rows == 1 and not report.left_out


def test_tool_results_named_result_or_response_are_read(tmp_path):
    """pydantic-ai's ``result``, the spec's ``response``; an object payload is its JSON text."""
    results = {"role": "tool", "parts": [
        result("c1", "divide", {"value": 2.0}, key="response"), result("c2", "lookup", "3.14159", key="result")]}
    first, (second_in, second_out) = parallel_run()
    ds, _ = kto(tmp_path, [{"llm_calls": [first, (second_in[:-1] + [results], second_out)], "reward": 1.0}])
    tools = [m for m in ds[0]["completion"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in tools] == [("c1", {"value": 2.0}), ("c2", 3.14159)]


def test_each_parallel_tool_result_is_its_own_tool_message(tmp_path):
    three = calls(tool_call("a", "f", x=1), tool_call("b", "f", x=2), tool_call("c", "g"))
    results = {"role": "tool", "parts": [result("a", "f", "one"), result("b", "f", "two"), result("c", "g", None)]}
    runs = [{"llm_calls": [([user("go")], [three]), ([user("go"), three, results], [answer("done")])], "reward": 1.0}]
    ds, _ = kto(tmp_path, runs)
    assert plain(ds[0]["completion"]) == [
        ("assistant", "", None, [("a", "f", {"x": 1}), ("b", "f", {"x": 2}), ("c", "g", {})]),
        ("tool", "one", "a", None),
        ("tool", "two", "b", None),
        ("tool", "", "c", None),  # a result without payload (content not captured)
        ("assistant", "done", None, None),
    ]


def test_tool_results_and_text_in_one_user_message_are_split(tmp_path):
    """Older pydantic-ai versions put tool results and a user prompt in one ``user`` message:
    the results become ``tool`` messages, then the text stays a ``user`` message."""
    call = calls(tool_call("a", "f"))
    mixed = {"role": "user", "parts": [result("a", "f", "ok"), {"type": "text", "content": "Now answer."}]}
    runs = [{"llm_calls": [([user("go")], [call]), ([user("go"), call, mixed], [answer("done")])], "reward": 1.0}]
    ds, _ = kto(tmp_path, runs)
    assert plain(ds[0]["completion"]) == [
        ("assistant", "", None, [("a", "f", {})]),
        ("tool", "ok", "a", None),
        ("user", "Now answer.", None, None),
        ("assistant", "done", None, None),
    ]


@pytest.mark.parametrize("instructions, expected", [
    (INSTRUCTIONS, "You are a calculator. Use the tools."),
    ([{"type": "text", "content": "Be brief."}, {"type": "text", "content": "Use tools."}], "Be brief.\nUse tools."),
    ("Plain instructions, not JSON.", "Plain instructions, not JSON."),
    (json.dumps("A JSON string."), "A JSON string."),
])
def test_system_instructions_open_the_conversation(tmp_path, instructions, expected):
    ds, _ = kto(tmp_path, [{"llm_calls": parallel_run(), "reward": 1.0, "instructions": instructions}])
    assert plain(ds[0]["prompt"]) == [("system", expected, None, None), ("user", QUESTION, None, None)]
    assert plain(ds[0]["completion"]) == EXPECTED_COMPLETION


def test_no_system_message_without_instructions_or_when_the_input_has_one(tmp_path):
    own_system = {"role": "system", "parts": [{"type": "text", "content": "From the messages."}]}
    with_system = [([own_system, *inp], out) for inp, out in parallel_run()]
    runs = [
        {"llm_calls": parallel_run(), "reward": 1.0, "instructions": None},
        {"llm_calls": parallel_run(), "reward": 1.0, "instructions": "   "},  # blank: none
        {"llm_calls": parallel_run(), "reward": 1.0, "instructions": '[{"type":"text","content":"cut at the lim'},
        {"llm_calls": with_system, "reward": 1.0},
    ]
    ds, _ = kto(tmp_path, runs)
    assert [plain(p)[0] for p in ds["prompt"]] == [("user", QUESTION, None, None)] * 3 + [
        ("system", "From the messages.", None, None)]
    assert [len(p) for p in ds["prompt"]] == [1, 1, 1, 2]


def test_the_repair_sees_the_system_message_too(tmp_path):
    """An agent that leaves its own turns out of the history: the restored conversation keeps the
    instructions in front and the assistant turns in place."""
    first_in = [user(QUESTION)]
    results = PARALLEL_RESULTS
    runs = [{"llm_calls": [(first_in, [PARALLEL_CALLS]), (first_in + [results], [answer("6/3 = 2 and pi is 3.14159")])],
             "reward": 1.0}]
    ds, report = kto(tmp_path, runs)
    assert plain(ds[0]["prompt"]) == [SYSTEM_MESSAGE, ("user", QUESTION, None, None)]
    assert plain(ds[0]["completion"]) == EXPECTED_COMPLETION
    assert any("restored" in note for note in report.notes)


def test_grpo_groups_share_the_prompt_with_its_system_message(tmp_path):
    path = tmp_path / "genai.duckdb"
    record_runs(path, [{"llm_calls": parallel_run(), "reward": r} for r in (1.0, 0.0)])
    ds = build_grpo_dataset(path)
    assert len(ds) == 1 and plain(ds[0]["prompt"]) == [SYSTEM_MESSAGE, ("user", QUESTION, None, None)]
    assert [plain(c) for c in ds[0]["completions"]] == [EXPECTED_COMPLETION] * 2
    assert ds[0]["advantages"][0] > 0 > ds[0]["advantages"][1]


def test_the_sql_helpers_read_the_stored_llm_calls(tmp_path):
    """``messages_sql`` / ``system_text_sql`` on the llm_calls view (what custom queries use)."""
    path = tmp_path / "genai.duckdb"
    record_runs(path, [{"llm_calls": parallel_run(), "reward": 1.0}])
    connection = duckdb.connect(str(path), read_only=True)
    try:
        ((last_input, instructions),) = connection.sql(
            f"""select {messages_sql('input_messages')}, {system_text_sql('instructions')}
                from (select c.input_messages, s.attributes->>'$."{sc.GEN_AI_SYSTEM_INSTRUCTIONS}"' as instructions
                      from llm_calls c join spans s using (span_id) order by c.start_time desc limit 1)"""
        ).fetchall()
    finally:
        connection.close()
    assert [m["role"] for m in last_input] == ["user", "assistant", "tool", "tool"]
    assert instructions == "You are a calculator. Use the tools."



def test_gigpo_step_prompts_start_with_the_system_instructions_too(tmp_path):
    from agent_rl_plugin.data import build_step_dataset

    path = tmp_path / "steps.duckdb"
    record_runs(path, [{"llm_calls": parallel_run(), "reward": 1.0, "group": "g"},
                       {"llm_calls": parallel_run(), "reward": 0.0, "group": "g", "instructions": None}])
    steps = build_step_dataset(path)
    firsts = [plain(prompt)[0] for prompt in steps["prompt"]]
    assert firsts == [SYSTEM_MESSAGE, SYSTEM_MESSAGE, ("user", QUESTION, None, None), ("user", QUESTION, None, None)]
    assert [len(p) for p in steps["prompt"]] == [2, 5, 1, 4]  # the second call sees the whole history
