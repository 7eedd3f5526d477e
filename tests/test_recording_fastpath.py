"""The recording hot path (``@trace_agent``/``@trace_tool``): what each span holds, exactly.

The per-call work was cut (leading attributes computed at decoration time, one shared JSON
encoder, the implicit rollout no longer made current around ``start_span``, OTel's context
variable set directly, results set without re-filtering). These tests pin what a span holds,
key by key and in order, for each kind of call, and the context user code runs in, so a faster
path cannot silently change a recorded span.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from typing import Any

import pytest
from opentelemetry import trace

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.instrumentation import calls as calls_module
from agent_rl_plugin.instrumentation import trace_agent, trace_tool
from agent_rl_plugin.instrumentation.spans import fast_json, to_json_text
from agent_rl_plugin.instrumentation.wrappers import wrap
from agent_rl_plugin.serialize import to_json

ROOT_AGENT = ["gen_ai.operation.name", "gen_ai.agent.name", "agent_rl.span.kind", "agent_rl.agent.role"]


def _spans(exporter) -> list:  # noqa: ANN001
    tracing.flush()
    return sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)


def _items(span) -> list[tuple[str, Any]]:  # noqa: ANN001
    return list(span.attributes.items())


def test_implicit_agent_span_holds_exactly_its_attributes_in_order(span_exporter) -> None:
    @trace_agent
    def plain(x, y=2):  # noqa: ANN001, ANN202
        return {"sum": x + y, "t": (1, 2)}

    assert plain(3, y=4) == {"sum": 7, "t": (1, 2)}
    (span,) = _spans(span_exporter)
    rollout_id = span.attributes["agent_rl.rollout.id"]
    assert span.name == "invoke_agent plain"
    assert _items(span) == [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.agent.name", "plain"),
        ("agent_rl.span.kind", "agent"),
        ("agent_rl.agent.role", "agent"),
        ("agent_rl.input", '{"x": 3, "y": 4}'),
        ("agent_rl.rollout.root", True),
        ("agent_rl.rollout.id", rollout_id),
        ("agent_rl.output", '{"sum": 7, "t": [1, 2]}'),
    ]
    assert len(rollout_id) == 32 and span.parent is None and not span.events


def test_messages_named_agent_and_str_result(span_exporter) -> None:
    @trace_agent(name="chat")
    def chat(messages, *, temperature=0.5):  # noqa: ANN001, ANN202
        return "héllo"

    chat([{"role": "user", "content": "hi"}], temperature=0.1)
    (span,) = _spans(span_exporter)
    assert span.name == "invoke_agent chat"
    assert _items(span)[4:6] == [
        ("agent_rl.input", '{"messages": [{"role": "user", "content": "hi"}], "temperature": 0.1}'),
        ("gen_ai.input.messages", '[{"role": "user", "content": "hi"}]'),
    ]
    assert _items(span)[-1] == ("agent_rl.output", '"héllo"')
    assert [k for k, _ in _items(span)] == ROOT_AGENT + [
        "agent_rl.input", "gen_ai.input.messages", "agent_rl.rollout.root", "agent_rl.rollout.id", "agent_rl.output",
    ]  # fmt: skip


def test_tool_span_and_tool_error(span_exporter) -> None:
    @trace_tool
    def tool(q: str) -> list:
        return [q, 1.5, None, True]

    @trace_tool(name="boom")
    def boom() -> None:
        raise ValueError("bad")

    tool("q")
    error = None
    try:
        boom()
    except ValueError as exc:
        error = exc
    assert error is not None and str(error) == "bad" and error.__traceback__ is not None
    ok, failed = _spans(span_exporter)
    call_id = ok.attributes["gen_ai.tool.call.id"]
    assert _items(ok) == [
        ("gen_ai.operation.name", "execute_tool"),
        ("agent_rl.span.kind", "tool"),
        ("gen_ai.tool.name", "tool"),
        ("gen_ai.tool.call.id", call_id),
        ("gen_ai.tool.call.arguments", '{"q": "q"}'),
        ("gen_ai.tool.call.result", '["q", 1.5, null, true]'),
    ]
    assert failed.name == "execute_tool boom"
    assert [k for k, _ in _items(failed)] == [
        "gen_ai.operation.name", "agent_rl.span.kind", "gen_ai.tool.name", "gen_ai.tool.call.id",
        "gen_ai.tool.call.arguments", "error.type",
    ]  # fmt: skip
    assert failed.attributes["gen_ai.tool.call.arguments"] == "{}"
    assert failed.status.description == "ValueError: bad"
    assert [e.name for e in failed.events] == ["exception"]
    assert failed.attributes["gen_ai.tool.call.id"] != call_id


def test_method_agent_with_id_and_nested_tool_in_its_rollout(span_exporter) -> None:
    @trace_tool
    def tool(q: str) -> str:
        return q.upper()

    class Agent:
        agent_id = "A-7"

        @trace_agent
        def run(self, task: str) -> str:
            return tool(task)

    assert Agent().run("t") == "T"
    agent, child = _spans(span_exporter)
    rollout_id = agent.attributes["agent_rl.rollout.id"]
    assert _items(agent) == [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.agent.name", "run"),
        ("agent_rl.span.kind", "agent"),
        ("agent_rl.agent.role", "agent"),
        ("gen_ai.agent.id", "A-7"),
        ("agent_rl.input", '{"task": "t"}'),
        ("agent_rl.rollout.root", True),
        ("agent_rl.rollout.id", rollout_id),
        ("agent_rl.output", '"T"'),
    ]
    assert child.parent.span_id == agent.context.span_id
    # The tool started inside the implicit rollout carries its id (stamped by our processor).
    assert [k for k, _ in _items(child)] == [
        "gen_ai.operation.name", "agent_rl.span.kind", "gen_ai.tool.name", "gen_ai.tool.call.id",
        "gen_ai.tool.call.arguments", "agent_rl.rollout.id", "gen_ai.tool.call.result",
    ]  # fmt: skip
    assert child.attributes["agent_rl.rollout.id"] == rollout_id


def test_agent_inside_explicit_rollout_is_no_root(span_exporter) -> None:
    @trace_agent
    def plain(x):  # noqa: ANN001, ANN202
        return x

    with arl.rollout(task_id="T1", group_id="G1") as info:
        plain(5)
    rollout_span, span = _spans(span_exporter)
    assert _items(span) == [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.agent.name", "plain"),
        ("agent_rl.span.kind", "agent"),
        ("agent_rl.agent.role", "agent"),
        ("agent_rl.input", '{"x": 5}'),
        ("agent_rl.rollout.id", info.rollout_id),
        ("agent_rl.task.id", "T1"),
        ("agent_rl.group.id", "G1"),
        ("agent_rl.output", "5"),
    ]
    assert span.parent.span_id == rollout_span.context.span_id


def test_name_from_instance_and_role(span_exporter) -> None:
    class Planner:
        def step(self, goal: str) -> str:
            return goal

    Planner.step = wrap(Planner.step, kind="agent", role="orchestrator", name_from_instance=True)

    class SubPlanner(Planner):
        pass

    Planner().step("a")
    SubPlanner().step("b")
    first, second = _spans(span_exporter)
    assert (first.name, second.name) == ("invoke_agent Planner", "invoke_agent SubPlanner")
    assert _items(second)[:4] == [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.agent.name", "SubPlanner"),
        ("agent_rl.span.kind", "agent"),
        ("agent_rl.agent.role", "orchestrator"),
    ]
    assert _items(second)[4] == ("agent_rl.input", '{"goal": "b"}')


def test_capture_content_off_records_no_input_or_output(plugin_manager) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.conftest import MemoryExporterPlugin

    exporter = InMemorySpanExporter()
    plugin_manager.register(MemoryExporterPlugin(exporter), name="memory-exporter")
    tracing.configure(db_path=None, export_delay_ms=50, capture_content=False)

    @trace_agent
    def plain(x):  # noqa: ANN001, ANN202
        return x

    @trace_tool
    def tool(q):  # noqa: ANN001, ANN202
        return q

    plain(1)
    tool(2)
    agent, tool_span = _spans(exporter)
    assert [k for k, _ in _items(agent)] == ROOT_AGENT + ["agent_rl.rollout.root", "agent_rl.rollout.id"]
    assert [k for k, _ in _items(tool_span)] == [
        "gen_ai.operation.name", "agent_rl.span.kind", "gen_ai.tool.name", "gen_ai.tool.call.id",
    ]  # fmt: skip


def test_async_and_generator_agents(span_exporter) -> None:
    @trace_agent
    async def aplain(x):  # noqa: ANN001, ANN202
        await asyncio.sleep(0)
        return x * 2

    @trace_agent
    def gen(n):  # noqa: ANN001, ANN202
        for i in range(n):
            yield {"content": str(i)}

    assert asyncio.run(aplain(2)) == 4
    assert [c["content"] for c in gen(3)] == ["0", "1", "2"]
    a, g = _spans(span_exporter)
    assert _items(a)[-1] == ("agent_rl.output", "4")
    assert [k for k, _ in _items(g)][-3:] == ["agent_rl.stream.chunks", "agent_rl.stream.outcome", "agent_rl.output"]
    assert (g.attributes["agent_rl.stream.chunks"], g.attributes["agent_rl.output"]) == (3, '"012"')


def test_user_code_runs_in_the_calls_span_and_rollout_and_both_are_restored(span_exporter) -> None:
    seen: dict[str, Any] = {}
    other = trace.get_tracer("someone.else")

    @trace_agent
    def agent(fail: bool) -> object:
        seen["span"] = trace.get_current_span()
        seen["rollout"] = arl.current_rollout()
        with other.start_as_current_span("child"):
            pass
        if fail:
            raise KeyError("k")
        return seen

    result = agent(False)
    assert result is seen  # the very object
    assert trace.get_current_span() is trace.INVALID_SPAN and arl.current_rollout() is None
    with pytest.raises(KeyError):
        agent(True)
    assert trace.get_current_span() is trace.INVALID_SPAN and arl.current_rollout() is None
    spans = _spans(span_exporter)
    parents = [s for s in spans if s.name == "invoke_agent agent"]
    children = [s for s in spans if s.name == "child"]
    assert len(parents) == 2 and len(children) == 2
    for parent, child in zip(parents, children):
        assert child.parent.span_id == parent.context.span_id
        # the foreign child is stamped with the call's implicit rollout
        assert child.attributes["agent_rl.rollout.id"] == parent.attributes["agent_rl.rollout.id"]
    assert seen["rollout"].rollout_id == parents[1].attributes["agent_rl.rollout.id"]
    assert seen["rollout"].implicit is True
    assert seen["span"].get_span_context().span_id == parents[1].context.span_id


def test_rollout_start_hook_sees_the_implicit_rollout_current(span_exporter, plugin_manager) -> None:
    events: list[tuple[str, Any, Any]] = []

    class Hooks:
        @hookimpl
        def agent_rl_rollout_start(self, rollout):  # noqa: ANN001, ANN201
            events.append(("start", rollout.rollout_id, arl.current_rollout()))

        @hookimpl
        def agent_rl_rollout_end(self, rollout, status, error):  # noqa: ANN001, ANN201
            events.append(("end", rollout.rollout_id, status))

    plugin_manager.register(Hooks(), name="rollout-hooks")

    @trace_agent
    def agent() -> int:
        return 1

    agent()
    (span,) = _spans(span_exporter)
    rollout_id = span.attributes["agent_rl.rollout.id"]
    assert [e[:2] for e in events] == [("start", rollout_id), ("end", rollout_id)]
    assert events[0][2].rollout_id == rollout_id and events[1][2] == "ok"
    assert list(span.attributes).count("agent_rl.rollout.id") == 1


def test_the_otel_runtime_context_is_used_directly_only_when_it_is_the_default() -> None:
    from opentelemetry import context as otel_context

    var = calls_module._RUNTIME_VAR  # noqa: SLF001
    assert var is otel_context._RUNTIME_CONTEXT._current_context  # noqa: SLF001
    token = calls_module._attach(otel_context.set_value("k", 1))  # noqa: SLF001
    assert otel_context.get_value("k") == 1
    calls_module._detach(token)  # noqa: SLF001
    assert otel_context.get_value("k") is None


class _Model:
    def model_dump(self, mode: str = "python") -> dict:
        return {"m": mode}


@dataclasses.dataclass
class _Point:
    x: int
    y: tuple


class _Odd:
    def __repr__(self) -> str:
        return "<odd>"


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def _values() -> list[Any]:
    circular: dict[str, Any] = {"a": 1}
    circular["self"] = circular
    loop: list[Any] = [1]
    loop.append(loop)
    return [
        {},
        [],
        {"x": 1, "y": 2},
        {"s": 'héllo "q" \n \u2028', "f": 1.5, "n": None, "b": True},
        {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
        {3: "int key", 2.5: "float", None: "none", False: "f"},
        [{"role": "user", "content": "hi"}, ("t", 1), {3}, frozenset()],
        {"m": _Model(), "p": _Point(1, (2,))},
        {"o": _Odd(), "b": b"xyz", "r": _BadRepr()},
        circular,
        loop,
        [[[[["deep"]]]]],
        {"big": 10**30},
        "plain str",
        7,
        2.5,
        None,
        True,
        ("tuple", 1),
        _Model(),
    ]


@pytest.mark.parametrize("value", _values(), ids=lambda v: type(v).__name__)
def test_fast_json_is_exactly_to_json(value: Any) -> None:
    assert fast_json(value) == to_json(value)


def test_fast_json_results_are_valid_json_for_plain_data() -> None:
    value = {"a": [1, 2.5, None, "é"], "b": {"c": False}}
    assert json.loads(fast_json(value)) == value
    assert fast_json(value) == json.dumps(value, ensure_ascii=False)


def test_to_json_text_truncates_like_before(span_exporter) -> None:
    size = tracing.current_config().max_attribute_size
    text = to_json_text({"s": "x" * (size + 10)})
    assert len(text) > size and text.startswith('{"s": "xxx') and "truncated" in text[size:]
    assert to_json_text({"s": "x"}) == '{"s": "x"}'
