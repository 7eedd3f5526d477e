"""The same runs with and without the integration give the same outputs: final output, new
items, raw model responses, what each model was sent, stream events, exceptions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import InputGuardrailTripwireTriggered, Runner
from agents.tracing import TracingProcessor, add_trace_processor

import agent_rl_openai_agents as arl_oa
from agent_rl_plugin import configure
from fakes import build_agents

QUESTION = "What is 2+3 and 1/0?"


def _dump(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def snapshot(result: Any, models: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "final_output": result.final_output,
        "last_agent": result.last_agent.name,
        "new_items": [(type(i).__name__, _dump(i.raw_item)) for i in result.new_items],
        "raw_responses": [([_dump(o) for o in r.output], _dump(r.usage)) for r in result.raw_responses],
        "input_list": result.to_input_list(),
        "model_calls": [m.calls for m in models],
    }


def run(recorded: bool, streamed: bool = False, question: str = QUESTION) -> dict[str, Any]:
    wrap = arl_oa.instrument_model if recorded else (lambda m: m)
    triage, main_model, writer_model = build_agents(wrap=wrap)
    if not streamed:
        result = Runner.run_sync(triage, question)
        return snapshot(result, (main_model, writer_model))

    async def go():
        result = Runner.run_streamed(triage, question)
        events = [(e.type, getattr(e, "name", None), _dump(getattr(getattr(e, "item", None), "raw_item", None)))
                  async for e in result.stream_events()]
        return result, events

    result, events = asyncio.run(go())
    return {**snapshot(result, (main_model, writer_model)), "events": events}


@pytest.mark.parametrize("streamed", [False, True])
def test_same_outputs_with_and_without_the_integration(db_path, store, streamed):
    plain = run(recorded=False, streamed=streamed)
    configure(db_path=str(db_path), export_delay_ms=50)
    arl_oa.instrument(exclusive=True)
    recorded = run(recorded=True, streamed=streamed)
    assert recorded == plain
    assert store.rows("select n_llm_calls from rollouts")[0]["n_llm_calls"] == 3


def test_same_exception(db_path):
    with pytest.raises(InputGuardrailTripwireTriggered) as plain:
        run(recorded=False, question="password")
    configure(db_path=str(db_path), export_delay_ms=50)
    arl_oa.instrument(exclusive=True)
    with pytest.raises(InputGuardrailTripwireTriggered) as recorded:
        run(recorded=True, question="password")
    assert str(recorded.value) == str(plain.value)


class Collect(TracingProcessor):
    def __init__(self) -> None:
        self.spans: list[tuple[str, Any]] = []

    def on_trace_start(self, trace): pass
    def on_trace_end(self, trace): pass
    def on_span_start(self, span): pass
    def on_span_end(self, span): self.spans.append((span.span_data.type, span.export()["span_data"].get("name")))
    def shutdown(self): pass
    def force_flush(self): pass


def test_other_processors_see_the_same_spans(db_path, store):
    """add_trace_processor mode: the SDK's other processors keep receiving every span (plus the
    generation spans of the wrapped model)."""
    before = Collect()
    add_trace_processor(before)
    run(recorded=False)
    configure(db_path=str(db_path), export_delay_ms=50)
    arl_oa.instrument()  # added next to `before`, not replacing it
    arl_oa.instrument()  # once only
    after = Collect()
    add_trace_processor(after)
    run(recorded=True)
    spans_plain = before.spans[: len(before.spans) - len(after.spans)]
    assert [s for s in after.spans if s[0] != "generation"] == spans_plain
    assert sum(s[0] == "generation" for s in after.spans) == 3
    assert store.rows("select count(*) as n from rollouts")[0]["n"] == 1


def test_disabled_records_nothing(db_path, store):
    configure(db_path=str(db_path), enable_rl=False)
    arl_oa.instrument(exclusive=True)
    assert run(recorded=True)["final_output"] == run(recorded=False)["final_output"]
    configure(db_path=str(db_path))
    arl_oa.uninstrument()
    run(recorded=True)  # uninstrumented: not recorded either
    assert store.rows("select count(*) as n from spans")[0]["n"] == 0


def test_without_content_capture(db_path, store):
    configure(db_path=str(db_path), capture_content=False)
    arl_oa.instrument(exclusive=True)
    run(recorded=True)
    (r,) = store.rows("select n_llm_calls, n_tool_calls, input, output, input_tokens from rollouts")
    assert (r["n_llm_calls"], r["n_tool_calls"], r["input"], r["output"], r["input_tokens"]) == (3, 2, None, None, 44)
    assert store.rows("select count(*) as n from llm_calls where input_messages is not null or output_messages is not null")[0]["n"] == 0
    assert store.rows("select count(*) as n from tool_calls where arguments is not null or result is not null")[0]["n"] == 0
    assert {e["event_type"] for e in store.rows("select event_type from events")} == {"guardrail", "handoff"}
