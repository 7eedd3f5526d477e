"""Fuzzing span attributes with hypothesis: whatever an agent hands us, it never raises, every
span lands in the DuckDB store, and the store stays queryable.

Arbitrary values (nested dicts/lists/tuples/sets, objects whose ``repr`` raises, circular lists,
huge strings, NaN and infinities, huge ints, bytes, lone surrogates, NUL characters, keys that
are not strings or that shadow our own attribute names) go in through every public way
attributes reach a span: a traced agent's arguments and return value, the OTel API's
``set_attributes`` on the current span (what other libraries do; the SDK keeps only primitive
values), ``record_llm_call(**attributes)`` and its model name, ``record_tool_call`` arguments
and result, ``record_event(content=..., reason=..., **data)`` and ``emit_reward(metadata=...)``.

(``tests/test_receiver_fuzz.py`` fuzzes OTLP bodies sent to the receiver, not this path.)
"""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin import tracing
from agent_rl_plugin.store import open_reader


class Unreprable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __str__(self) -> str:
        raise RuntimeError("no str")


class HugeRepr:
    def __repr__(self) -> str:
        return "R" * 100_000


class RaisesOnEq:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparisons")

    __hash__ = object.__hash__


def circular() -> list:
    loop: list = [1]
    loop.append(loop)
    return loop


ANY_CHAR = st.characters(exclude_categories=())  # lone surrogates included
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=30),
    st.sampled_from(["", "\x00", "\ud800", "a\udfffb", "🙂", "é" * 3, "NaN", '{"json": 1}', "[", "null"]),
)
HUGE_TEXT = st.builds(lambda n, c: c * n, st.integers(20_000, 200_000), st.sampled_from(["x", "é", "\ud800", "🙂", "\x00"]))
NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**70),  # past int64
    st.integers(min_value=-(2**70), max_value=-(2**63) + 2),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]),
)
OBJECTS = st.sampled_from(
    [Unreprable, HugeRepr, RaisesOnEq, object, lambda: complex(1, 2), lambda: range(3), lambda: Path("/tmp/x"),
     lambda: ValueError("boom"), lambda: type]
).map(lambda make: make())
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT, HUGE_TEXT, st.binary(max_size=40), OBJECTS,
                   st.builds(circular))
KEYS = st.one_of(TEXT, st.sampled_from([sc.ROLLOUT_ID, sc.SPAN_KIND, sc.TASK_ID, sc.GEN_AI_OPERATION_NAME, "x" * 5000]))
VALUES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.one_of(KEYS, st.integers(), st.none(), st.tuples(st.integers())), children, max_size=4),
        st.frozensets(st.one_of(st.integers(), TEXT), max_size=3),
    ),
    max_leaves=12,
)
ATTRIBUTES = st.dictionaries(KEYS, VALUES, max_size=6)
#: What the OTel API accepts on set_attributes (the SDK drops anything else, with a warning).
OTEL_PRIMITIVE = st.one_of(st.booleans(), NUMBERS, TEXT, HUGE_TEXT, st.binary(max_size=20))
OTEL_ATTRIBUTES = st.dictionaries(
    KEYS, st.one_of(OTEL_PRIMITIVE, st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3),
                    st.lists(TEXT, max_size=3), st.lists(st.floats(), max_size=3)), max_size=5)

#: record_llm_call's own parameter names cannot also be extra attributes (a TypeError untraced too).
LLM_PARAMETERS = {"model", "input_messages", "output", "input_tokens", "output_tokens", "provider", "reasoning",
                  "finish_reason", "tool_calls", "start_time", "end_time", "duration_s", "error"}
EVENT_PARAMETERS = {"event_type", "round", "agent_id", "target", "reason", "content"}
SPANS_PER_EXAMPLE = 4  # rollout, agent, LLM call, tool call (events and the reward go on the agent span)


@arl.trace_agent(name="fuzzed")
def agent(value, attributes, otel_attributes, name, text):  # noqa: ANN001
    trace.get_current_span().set_attributes(otel_attributes)
    extra = {k: v for k, v in attributes.items() if isinstance(k, str) and k not in LLM_PARAMETERS}
    arl.record_llm_call(name, value, value, input_tokens=1, output_tokens=2, reasoning=text, **extra)
    arl.record_tool_call(name, arguments=attributes, result=value, error=text or None)
    data = {k: v for k, v in attributes.items() if isinstance(k, str) and k not in EVENT_PARAMETERS}
    arl.record_event(text, content=value, reason=text, **data)
    arl.emit_reward(0.5, name=text, reason=text, metadata=attributes)
    return value


def test_arbitrary_attributes_never_raise_and_every_span_lands(plugin_manager, tmp_path) -> None:
    db = tmp_path / "fuzz.duckdb"
    arl.configure(db=str(db), export_delay_ms=50)
    exporter = tracing.STATE.exporters["duckdb"]
    examples = {"n": 0}

    @settings(max_examples=250, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.large_base_example, HealthCheck.data_too_large])
    @given(value=VALUES, attributes=ATTRIBUTES, otel_attributes=OTEL_ATTRIBUTES, name=TEXT, text=TEXT)
    def example(value, attributes, otel_attributes, name, text) -> None:  # noqa: ANN001
        # Hypothesis seeds the global `random` for every example, and trace, span and rollout
        # ids come from it (as in the OTel SDK): without this every example would get the same ids.
        random.seed(os.urandom(16))
        with arl.rollout(task_id=text, group_id=name):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            assert agent(value, attributes, otel_attributes, name, text) is value  # never raises
        examples["n"] += 1
        assert arl.flush(60)
        reader = open_reader(db)
        try:
            rows = reader.execute(
                "select name, attributes, events from spans where trace_id = ?", [trace_id]
            ).fetchall()
        finally:
            reader.close()
        # By trace: the raw OTel API may overwrite even our own attributes (agent_rl.rollout.id,
        # agent_rl.span.kind) on the agent span; the span still lands, under what was set.
        assert len(rows) == SPANS_PER_EXAMPLE, rows
        assert sorted(name.split(" ", 1)[0] for name, *_ in rows) == ["chat", "execute_tool", "invoke_agent", "rollout"]
        for _, attributes_json, events_json in rows:
            assert isinstance(json.loads(attributes_json), dict)  # valid JSON, as stored
            assert isinstance(json.loads(events_json or "[]"), list)
        stats = exporter.stats
        assert stats["spans_dropped"] == 0, stats
        assert stats["spans_written"] == SPANS_PER_EXAMPLE * examples["n"]

    example()

    # The whole store stays queryable: every table and view reads back in full.
    reader = open_reader(db)
    try:
        total = reader.execute("select count(*) from spans").fetchone()[0]
        assert total == SPANS_PER_EXAMPLE * examples["n"]
        for relation in ("spans", "rewards", "rollouts", "steps", "llm_calls", "tool_calls", "events", "agents"):
            reader.execute(f"select * from {relation}").fetchall()
        assert reader.execute("select count(*) from rewards").fetchone()[0] == examples["n"]
        assert reader.execute("select count(*) from rollouts").fetchone()[0] >= examples["n"]
    finally:
        reader.close()
