"""record_llm_call, record_tool_call, record_event and emit_reward: shapes and validation."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pytest
from opentelemetry.trace import StatusCode

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc


def finished(exporter) -> list:
    arl.flush()
    return list(exporter.get_finished_spans())


def by_name(exporter) -> dict:
    return {s.name: s for s in finished(exporter)}


# --- emit_reward ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad, message",
    [
        (math.nan, "finite number"),
        (math.inf, "finite number"),
        (-math.inf, "finite number"),
        ("1.0", "got str '1.0'"),
        (True, "got bool True"),
        (None, "got NoneType None"),
        ([1.0], "got list"),
    ],
)
def test_emit_reward_rejects_what_is_not_a_finite_number(span_exporter, bad, message) -> None:
    with arl.rollout():
        with pytest.raises(ValueError, match="emit_reward\\(\\) needs a finite number") as excinfo:
            arl.emit_reward(bad)
    assert message in str(excinfo.value)


def test_emit_reward_rejects_a_bad_step(span_exporter) -> None:
    with arl.rollout(), pytest.raises(ValueError, match="step must be an int"):
        arl.emit_reward(1.0, step=1.5)


def test_emit_reward_needs_a_rollout(span_exporter) -> None:
    with pytest.raises(ValueError, match=r"needs a rollout: call it inside `with rollout\(...\)`"):
        arl.emit_reward(1.0)


def test_emit_reward_event_shape(span_exporter) -> None:
    with arl.rollout(task_id="t") as info:
        arl.emit_reward(1, name="user_feedback", step=3, reason="liked it", metadata={"by": "ann"})
    (span,) = finished(span_exporter)
    (event,) = span.events
    assert event.name == "gen_ai.evaluation.result"
    assert dict(event.attributes) == {
        sc.GEN_AI_EVALUATION_NAME: "user_feedback",
        sc.GEN_AI_EVALUATION_SCORE_VALUE: 1.0,
        sc.GEN_AI_EVALUATION_EXPLANATION: "liked it",
        sc.STEP_INDEX: 3,
        sc.ROLLOUT_ID: info.rollout_id,
        sc.REWARD_METADATA: '{"by": "ann"}',
        sc.REWARD_SOURCE: "emitted",
    }
    assert isinstance(event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE], float)


def test_emit_reward_inside_a_traced_agent_goes_on_its_span(span_exporter) -> None:
    @arl.trace_agent
    def agent() -> str:
        arl.emit_reward(0.5)
        return "ok"

    agent()
    (span,) = finished(span_exporter)
    (event,) = span.events
    assert event.attributes[sc.ROLLOUT_ID] == span.attributes[sc.ROLLOUT_ID]
    assert event.attributes[sc.GEN_AI_EVALUATION_NAME] == "reward"


def test_emit_reward_for_another_rollout_makes_its_own_span(span_exporter) -> None:
    with arl.rollout(task_id="earlier") as earlier:
        pass
    with arl.rollout(task_id="now", group_id="g"):
        arl.emit_reward(-2.0, name="judge", rollout_id=earlier.rollout_id)
    arl.emit_reward(3.0, rollout_id=earlier.rollout_id)  # no rollout and no span at all
    spans = finished(span_exporter)
    rewards = [s for s in spans if s.attributes[sc.SPAN_KIND] == "reward"]
    assert [s.name for s in rewards] == ["reward judge", "reward reward"]
    for span in rewards:
        assert span.attributes[sc.ROLLOUT_ID] == earlier.rollout_id
        assert sc.TASK_ID not in span.attributes and sc.GROUP_ID not in span.attributes
        assert span.parent is None
        (event,) = span.events
        assert event.attributes[sc.ROLLOUT_ID] == earlier.rollout_id
    assert [e.name for e in by_name(span_exporter)["rollout now"].events] == []


# --- record_event -----------------------------------------------------------------------------
def test_record_event_on_the_current_span(span_exporter) -> None:
    with arl.rollout() as info:
        arl.record_event(
            sc.EVENT_TYPE_VOTE, round=2, agent_id="a1", target="a2", reason="better", content="B",
            confidence=0.9,
        )
        arl.record_event(sc.EVENT_TYPE_RESTART)
    (span,) = finished(span_exporter)
    vote, restart = span.events
    assert vote.name == restart.name == sc.EVENT_NAME
    assert dict(vote.attributes) == {
        sc.EVENT_TYPE: "vote",
        sc.EVENT_ROUND: 2,
        sc.EVENT_AGENT_ID: "a1",
        sc.EVENT_TARGET: "a2",
        sc.EVENT_REASON: "better",
        sc.EVENT_CONTENT: "B",
        sc.EVENT_DATA: '{"confidence": 0.9}',
        sc.ROLLOUT_ID: info.rollout_id,
    }
    assert dict(restart.attributes) == {sc.EVENT_TYPE: "restart", sc.ROLLOUT_ID: info.rollout_id}


def test_record_event_without_a_span_makes_one(span_exporter) -> None:
    arl.record_event(sc.EVENT_TYPE_NEW_ANSWER, agent_id="a1", content={"answer": 4})
    (span,) = finished(span_exporter)
    assert span.name == "event new_answer"
    assert span.attributes[sc.SPAN_KIND] == "event"
    assert span.start_time == span.end_time
    (event,) = span.events
    assert event.attributes[sc.EVENT_CONTENT] == '{"answer": 4}'
    assert sc.ROLLOUT_ID not in event.attributes


# --- record_llm_call --------------------------------------------------------------------------
def test_record_llm_call_shape(span_exporter) -> None:
    with arl.rollout(task_id="t") as info:
        context = arl.record_llm_call(
            "gpt-4o-mini",
            "What is 2+2?",
            "4",
            input_tokens=12,
            output_tokens=1,
            provider="openai",
            reasoning="simple arithmetic",
            finish_reason="tool_calls",
            tool_calls=[{"id": "c1", "name": "calc", "arguments": {"x": 2}}],
            duration_s=0.25,
            agent_id="agent_a",
            temperature=0.1,
        )
    spans = by_name(span_exporter)
    span = spans["chat gpt-4o-mini"]
    assert span.attributes[sc.GEN_AI_AGENT_ID] == "agent_a"
    assert span.context.span_id == context.span_id
    assert span.parent.span_id == spans["rollout t"].context.span_id
    attributes = span.attributes
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert attributes[sc.SPAN_KIND] == "llm"
    assert attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 1
    assert json.loads(attributes[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "content": "What is 2+2?"}
    ]
    assert json.loads(attributes[sc.GEN_AI_OUTPUT_MESSAGES]) == [
        {
            "role": "assistant",
            "content": "4",
            "tool_calls": [{"id": "c1", "name": "calc", "arguments": {"x": 2}}],
        }
    ]
    assert attributes[sc.REASONING] == "simple arithmetic"
    assert tuple(attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ("tool_calls",)
    assert attributes["temperature"] == 0.1
    assert attributes[sc.ROLLOUT_ID] == info.rollout_id
    assert span.end_time - span.start_time == 250_000_000


def test_record_llm_call_with_message_lists_times_and_error(span_exporter) -> None:
    start = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    arl.record_llm_call(
        "m",
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        [{"role": "assistant", "content": "hello"}],
        start_time=start,
        end_time=start + timedelta(seconds=2),
        error=TimeoutError("slow"),
    )
    (span,) = finished(span_exporter)
    assert span.start_time == 1_714_564_800 * 10**9
    assert span.end_time - span.start_time == 2 * 10**9
    assert len(json.loads(span.attributes[sc.GEN_AI_INPUT_MESSAGES])) == 2
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == "TimeoutError"


# --- record_tool_call -------------------------------------------------------------------------
def test_record_tool_call_shape(span_exporter) -> None:
    arl.record_tool_call(
        "search", {"q": "x"}, ["hit"], call_id="call-1", start_time=10, end_time=30
    )
    arl.record_tool_call("fetch", {"url": "u"}, error="404 not found")
    ok, failed = finished(span_exporter)
    assert ok.name == "execute_tool search"
    assert dict(ok.attributes) == {
        sc.GEN_AI_OPERATION_NAME: "execute_tool",
        sc.SPAN_KIND: "tool",
        sc.GEN_AI_TOOL_NAME: "search",
        sc.GEN_AI_TOOL_CALL_ID: "call-1",
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: '{"q": "x"}',
        sc.GEN_AI_TOOL_CALL_RESULT: '["hit"]',
    }
    assert (ok.start_time, ok.end_time) == (10, 30)
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "error: 404 not found"
    assert failed.attributes[sc.ERROR_TYPE] == "error"
    assert len(failed.attributes[sc.GEN_AI_TOOL_CALL_ID]) == 32


def test_record_tool_call_extra_attributes_never_replace_its_own(span_exporter) -> None:
    arl.record_tool_call("search", {"q": "x"}, "hit", call_id="c-1", source="mcp", **{sc.GEN_AI_TOOL_NAME: "other"})
    (span,) = finished(span_exporter)
    assert span.attributes["source"] == "mcp" and span.attributes[sc.GEN_AI_TOOL_NAME] == "search"


def test_capture_content_off_keeps_only_metadata(plugin_manager, span_exporter) -> None:
    arl.configure(db_path=None, export_delay_ms=50, capture_content=False)
    arl.record_llm_call("m", "secret prompt", "secret answer", input_tokens=3)
    arl.record_tool_call("t", {"secret": 1}, "secret")
    llm, tool = finished(span_exporter)
    assert sc.GEN_AI_INPUT_MESSAGES not in llm.attributes
    assert sc.GEN_AI_OUTPUT_MESSAGES not in llm.attributes
    assert llm.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in tool.attributes
