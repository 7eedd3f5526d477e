"""The canonical views over a hand-made recording: two rollouts of one group, a foreign trace.

Spans are built with a local OTel ``TracerProvider`` (never the global one) and a
``SimpleSpanProcessor(DuckDBSpanExporter(path))``, with the attributes our instrumentation
sets written out by hand, and explicit timestamps so the expected order is exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store import VIEW_NAMES, DuckDBSpanExporter

T0 = 1_800_000_000_000_000_000  # ns
MS = 1_000_000


def ms(n: float) -> int:
    return T0 + int(n * MS)


class Recorder:
    """A local provider writing into ``path``; ``span(...)`` starts a span with times in ms."""

    def __init__(self, path: Path) -> None:
        self.exporter = DuckDBSpanExporter(path, normalizers=[])
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test-store", "1.0")

    def span(self, name: str, start: float, attributes: dict[str, Any], parent: Any = None) -> Any:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, attributes=attributes, start_time=ms(start))

    def close(self) -> None:
        self.provider.shutdown()


def ids(rollout: str, task: str = "t1", group: str = "g1") -> dict[str, str]:
    return {sc.ROLLOUT_ID: rollout, sc.TASK_ID: task, sc.GROUP_ID: group}


def record_scene(rec: Recorder) -> dict[str, str]:
    """Rollout r1 (agent root), rollout r2 (rollout root, cancelled), a foreign trace, a reward span."""
    # --- rollout r1: an agent span is the root -------------------------------------------
    agent = rec.span(
        "invoke_agent solver",
        0,
        {
            **ids("r1"),
            sc.ROLLOUT_ROOT: True,
            sc.ROLLOUT_METADATA: json.dumps({"seed": 1}),
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: "solver",
            sc.GEN_AI_AGENT_ID: "solver-1",
            sc.SPAN_KIND: sc.SPAN_KIND_AGENT,
            sc.AGENT_ROLE: "agent",
            sc.ROLLOUT_INPUT: json.dumps({"question": "6/0 + 2+2"}),
            sc.ROLLOUT_OUTPUT: json.dumps("4"),
        },
    )
    llm = rec.span(
        "chat tiny",
        1,
        {
            **ids("r1"),
            sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
            sc.SPAN_KIND: sc.SPAN_KIND_LLM,
            sc.GEN_AI_REQUEST_MODEL: "tiny",
            sc.GEN_AI_RESPONSE_MODEL: "tiny-001",
            sc.GEN_AI_PROVIDER_NAME: "local",
            sc.GEN_AI_USAGE_INPUT_TOKENS: 12,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: 3,
            sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "content": "2+2?"}]),
            sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "content": "call add"}]),
            sc.REASONING: "use the tool",
            sc.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_calls",),
            sc.STATE_KEY: "s0",
        },
        parent=agent,
    )
    llm.end(end_time=ms(11))
    add = rec.span(
        "execute_tool add",
        20,
        {
            **ids("r1"),
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
            sc.GEN_AI_TOOL_NAME: "add",
            sc.GEN_AI_TOOL_CALL_ID: "call-1",
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"a": 2, "b": 2}),
            sc.GEN_AI_TOOL_CALL_RESULT: json.dumps(4),
        },
        parent=agent,
    )
    add.end(end_time=ms(25))
    divide = rec.span(
        "execute_tool divide",
        30,
        {
            **ids("r1"),
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
            sc.GEN_AI_TOOL_NAME: "divide",
            sc.GEN_AI_TOOL_CALL_ID: "call-2",
            sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"a": 6, "b": 0}),
        },
        parent=agent,
    )
    divide.set_attribute(sc.ERROR_TYPE, "ZeroDivisionError")
    divide.add_event(
        "exception",
        {"exception.type": "ZeroDivisionError", "exception.message": "division by zero", "exception.stacktrace": "..."},
        timestamp=ms(31),
    )
    divide.set_status(Status(StatusCode.ERROR, "ZeroDivisionError: division by zero"))
    divide.end(end_time=ms(32))
    agent.add_event(
        sc.EVENT_NAME,
        {
            sc.EVENT_TYPE: sc.EVENT_TYPE_VOTE,
            sc.EVENT_ROUND: 1,
            sc.EVENT_AGENT_ID: "solver",
            sc.EVENT_TARGET: "critic",
            sc.EVENT_REASON: "more precise",
            sc.EVENT_DATA: json.dumps({"confidence": 0.9}),
            sc.ROLLOUT_ID: "r1",
        },
        timestamp=ms(40),
    )
    agent.add_event(
        sc.EVENT_EVALUATION_RESULT,
        {
            sc.GEN_AI_EVALUATION_NAME: "correct",
            sc.GEN_AI_EVALUATION_SCORE_VALUE: 1.0,
            sc.GEN_AI_EVALUATION_EXPLANATION: "matches the ground truth",
            sc.ROLLOUT_ID: "r1",
            sc.REWARD_METADATA: json.dumps({"truth": "4"}),
            sc.REWARD_SOURCE: "emitted",
        },
        timestamp=ms(50),
    )
    agent.add_event(
        sc.EVENT_EVALUATION_RESULT,
        {
            sc.GEN_AI_EVALUATION_NAME: "tool_ok",
            sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.5,
            sc.STEP_INDEX: 1,
            sc.ROLLOUT_ID: "r1",
        },
        timestamp=ms(51),
    )
    agent.end(end_time=ms(100))

    # --- rollout r2 (same group): a rollout span is the root; it was cancelled ------------
    root = rec.span(
        "rollout t1",
        200,
        {**ids("r2"), sc.SPAN_KIND: sc.SPAN_KIND_ROLLOUT, sc.ROLLOUT_ROOT: True, sc.ROLLOUT_METADATA: "{}"},
    )
    agent2 = rec.span(
        "invoke_agent solver",
        201,
        {
            **ids("r2"),
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: "solver",
            sc.SPAN_KIND: sc.SPAN_KIND_AGENT,
            sc.ROLLOUT_INPUT: json.dumps({"question": "1+1"}),
            sc.STREAM_CHUNKS: 3,
        },
        parent=root,
    )
    llm2 = rec.span(
        "chat tiny",
        202,
        {**ids("r2"), sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_REQUEST_MODEL: "tiny",
         sc.GEN_AI_USAGE_INPUT_TOKENS: 7, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 1},
        parent=agent2,
    )
    llm2.end(end_time=ms(205))
    event_span = rec.span(
        "event new_answer",
        206,
        {**ids("r2"), sc.SPAN_KIND: sc.SPAN_KIND_EVENT, sc.EVENT_TYPE: sc.EVENT_TYPE_NEW_ANSWER,
         sc.EVENT_AGENT_ID: "solver", sc.EVENT_CONTENT: "2", sc.EVENT_ROUND: 0},
        parent=agent2,
    )
    event_span.end(end_time=ms(206))
    agent2.end(end_time=ms(210))
    root.set_attribute(sc.CANCELLED, True)
    root.set_attribute(sc.ERROR_TYPE, "asyncio.exceptions.CancelledError")
    root.set_status(Status(StatusCode.ERROR))
    root.end(end_time=ms(211))

    # --- a foreign framework's trace: no rollout ids at all -------------------------------
    foreign = rec.span("invoke_agent helper", 300, {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT})
    foreign_llm = rec.span(
        "chat gpt",
        301,
        {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_SYSTEM: "openai",
         sc.GEN_AI_USAGE_INPUT_TOKENS: 5, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 6},
        parent=foreign,
    )
    foreign_llm.end(end_time=ms(302))
    foreign.end(end_time=ms(303))
    plain = rec.span("GET /health", 400, {"http.method": "GET"})  # not a rollout: no gen_ai op
    plain.end(end_time=ms(401))

    # --- a later reward for the past rollout r1, from outside it --------------------------
    reward = rec.span("reward human", 500, {sc.SPAN_KIND: sc.SPAN_KIND_REWARD})
    reward.add_event(
        sc.EVENT_EVALUATION_RESULT,
        {sc.GEN_AI_EVALUATION_NAME: "human", sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.25, sc.ROLLOUT_ID: "r1"},
        timestamp=ms(500),
    )
    reward.end(end_time=ms(500))
    return {
        "foreign_trace": f"{foreign.get_span_context().trace_id:032x}",
        "agent_span": f"{agent.get_span_context().span_id:016x}",
        "divide_span": f"{divide.get_span_context().span_id:016x}",
        "reward_span": f"{reward.get_span_context().span_id:016x}",
    }


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[str, str]]]:
    path = tmp_path_factory.mktemp("views") / "scene.duckdb"
    rec = Recorder(path)
    try:
        info = record_scene(rec)
        assert rec.exporter.force_flush()
        assert rec.exporter.stats["spans_dropped"] == 0
    finally:
        rec.close()
    connection = duckdb.connect(str(path), read_only=True)
    yield connection, info
    connection.close()


def rows(connection: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    result = connection.execute(sql)
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, row)) for row in result.fetchall()]


def test_every_view_exists_and_reads(scene):
    connection, _ = scene
    for view in VIEW_NAMES:
        connection.execute(f"select * from {view}").fetchall()


def test_rollouts(scene):
    connection, info = scene
    by_id = {r["rollout_id"]: r for r in rows(connection, "select * from rollouts")}
    assert set(by_id) == {"r1", "r2", info["foreign_trace"]}

    r1 = by_id["r1"]
    assert (r1["task_id"], r1["group_id"], r1["name"], r1["agent_name"]) == ("t1", "g1", "invoke_agent solver", "solver")
    assert (r1["status"], r1["error"]) == ("ok", None)
    assert r1["duration_ms"] == pytest.approx(100.0)
    assert json.loads(r1["input"]) == {"question": "6/0 + 2+2"}
    assert json.loads(r1["output"]) == "4"
    assert json.loads(r1["metadata"]) == {"seed": 1}
    assert (r1["n_spans"], r1["n_llm_calls"], r1["n_tool_calls"], r1["n_tool_errors"]) == (4, 1, 2, 1)
    assert (r1["input_tokens"], r1["output_tokens"]) == (12, 3)
    # the episode reward: mean of the episode rewards correct and human (the later reward span's);
    # the step reward tool_ok is not part of it
    assert r1["total_reward"] == pytest.approx((1.0 + 0.25) / 2)
    assert r1["root_span_id"] == info["agent_span"]

    r2 = by_id["r2"]
    assert (r2["group_id"], r2["name"], r2["agent_name"]) == ("g1", "rollout t1", "solver")
    assert r2["status"] == "cancelled"
    assert r2["error"] == "asyncio.exceptions.CancelledError"
    assert json.loads(r2["input"]) == {"question": "1+1"}  # from the first agent span
    assert (r2["n_spans"], r2["n_llm_calls"], r2["n_tool_calls"], r2["input_tokens"]) == (4, 1, 0, 7)
    assert r2["total_reward"] is None

    foreign = by_id[info["foreign_trace"]]
    assert foreign["task_id"] is None and foreign["name"] == "invoke_agent helper"
    assert (foreign["n_spans"], foreign["n_llm_calls"], foreign["input_tokens"], foreign["output_tokens"]) == (2, 1, 5, 6)
    assert foreign["agent_name"] == "helper"  # from the span name when gen_ai.agent.name is absent


def test_group_of_rollouts(scene):
    connection, _ = scene
    assert connection.execute(
        "select group_id, count(*) from rollouts where group_id is not null group by group_id"
    ).fetchall() == [("g1", 2)]


def test_llm_calls(scene):
    connection, info = scene
    calls = rows(connection, "select * from llm_calls order by start_time")
    assert [(c["rollout_id"], c["request_model"]) for c in calls] == [
        ("r1", "tiny"),
        ("r2", "tiny"),
        (info["foreign_trace"], None),
    ]
    first = calls[0]
    assert first["response_model"] == "tiny-001" and first["provider"] == "local"
    assert (first["input_tokens"], first["output_tokens"]) == (12, 3)
    assert json.loads(first["input_messages"]) == [{"role": "user", "content": "2+2?"}]
    assert json.loads(first["output_messages"])[0]["content"] == "call add"
    assert first["reasoning"] == "use the tool"
    assert json.loads(first["finish_reasons"]) == ["tool_calls"]
    assert (first["status"], first["error"], first["state_key"]) == ("ok", None, "s0")
    assert first["duration_ms"] == pytest.approx(10.0)
    assert calls[2]["provider"] == "openai"  # the older gen_ai.system


def test_tool_calls(scene):
    connection, info = scene
    calls = rows(connection, "select * from tool_calls order by start_time")
    assert [c["tool_name"] for c in calls] == ["add", "divide"]
    add, divide = calls
    assert (add["call_id"], json.loads(add["arguments"]), json.loads(add["result"])) == ("call-1", {"a": 2, "b": 2}, 4)
    assert (add["status"], add["error"], add["error_type"]) == ("ok", None, None)
    assert divide["status"] == "error"
    assert divide["error_type"] == "ZeroDivisionError"
    assert divide["error"] == "ZeroDivisionError: division by zero"
    assert divide["result"] is None
    assert divide["span_id"] == info["divide_span"] and divide["parent_span_id"] == info["agent_span"]


def test_events(scene):
    connection, info = scene
    events = rows(connection, "select * from events order by time")
    assert [(e["rollout_id"], e["event_type"]) for e in events] == [("r1", "vote"), ("r2", "new_answer")]
    vote, answer = events
    assert (vote["round"], vote["agent_id"], vote["target"], vote["reason"]) == (1, "solver", "critic", "more precise")
    assert json.loads(vote["data"]) == {"confidence": 0.9}
    assert vote["span_id"] == info["agent_span"] and vote["event_index"] == 0
    assert vote["task_id"] == "t1" and vote["group_id"] == "g1"
    assert (answer["content"], answer["round"], answer["agent_id"]) == ("2", 0, "solver")


def test_steps_are_ordered_per_rollout(scene):
    connection, _ = scene
    steps = rows(connection, "select * from steps where rollout_id = 'r1' order by step_index")
    assert [(s["step_index"], s["kind"], s["name"], s["status"]) for s in steps] == [
        (0, "llm", "tiny-001", "ok"),
        (1, "tool", "add", "ok"),
        (2, "tool", "divide", "error"),
        (3, "event", "vote", "ok"),
    ]
    assert json.loads(steps[1]["input"]) == {"a": 2, "b": 2}
    assert steps[2]["error"] == "ZeroDivisionError: division by zero"
    assert json.loads(steps[3]["output"])["target"] == "critic"
    assert steps[0]["state_key"] == "s0"
    r2 = rows(connection, "select kind, name, step_index from steps where rollout_id = 'r2' order by step_index")
    assert [(s["kind"], s["name"], s["step_index"]) for s in r2] == [("llm", "tiny", 0), ("event", "new_answer", 1)]


def test_agents(scene):
    connection, _ = scene
    agents = rows(connection, "select * from agents order by start_time")
    assert [(a["rollout_id"], a["agent_name"], a["is_rollout_root"]) for a in agents][:2] == [
        ("r1", "solver", True),
        ("r2", "solver", False),
    ]
    assert agents[0]["role"] == "agent" and agents[0]["agent_id"] == "solver-1"
    assert agents[1]["stream_chunks"] == 3


def test_rewards_from_evaluation_events(scene):
    connection, info = scene
    rewards = rows(connection, "select * from rewards order by created_at")
    assert [(r["rollout_id"], r["name"], r["value"], r["step_index"]) for r in rewards] == [
        ("r1", "correct", 1.0, None),
        ("r1", "tool_ok", 0.5, 1),
        ("r1", "human", 0.25, None),  # carried by a span outside r1: the event's rollout id wins
    ]
    correct = rewards[0]
    assert correct["source"] == "emitted" and correct["plugin"] is None
    assert correct["reason"] == "matches the ground truth"
    assert json.loads(correct["metrics"]) == {"truth": "4"}
    assert correct["span_id"] == info["agent_span"]
    assert rewards[2]["span_id"] == info["reward_span"]
    assert len({r["reward_id"] for r in rewards}) == 3


def test_spans_table_columns(scene):
    connection, info = scene
    span = rows(connection, f"select * from spans where span_id = '{info['divide_span']}'")[0]
    assert (span["status_code"], span["kind"], span["scope_name"], span["scope_version"]) == ("ERROR", "INTERNAL", "test-store", "1.0")
    assert (span["rollout_id"], span["operation"], span["span_kind"], span["is_rollout_root"]) == ("r1", "execute_tool", "tool", False)
    assert span["end_unix_nano"] - span["start_unix_nano"] == 2 * MS
    events = json.loads(span["events"])
    assert events[0]["name"] == "exception" and events[0]["time"] == ms(31)
    assert events[0]["attributes"]["exception.message"] == "division by zero"
    assert json.loads(span["attributes"])[sc.GEN_AI_TOOL_NAME] == "divide"
    assert span["service_name"]  # the SDK's default resource names a service
    plain = rows(connection, "select rollout_id, trace_id, is_rollout_root from spans where name = 'GET /health'")[0]
    assert plain["rollout_id"] == plain["trace_id"] and plain["is_rollout_root"] is False
