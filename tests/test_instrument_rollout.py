"""The rollout context: explicit ``rollout()``, implicit rollouts, and the rollout hooks."""

from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry.trace import StatusCode

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.instrumentation.context import RolloutInfo, current_rollout_attributes


def finished(exporter) -> list:
    arl.flush()
    return list(exporter.get_finished_spans())


class RolloutRecorder:
    """A test plugin remembering every rollout hook call."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @hookimpl
    def agent_rl_rollout_start(self, rollout: RolloutInfo) -> None:
        self.calls.append(("start", rollout.rollout_id, rollout.task_id))

    @hookimpl
    def agent_rl_rollout_end(self, rollout: RolloutInfo, status: str, error) -> None:
        error_name = type(error).__name__ if error else None
        self.calls.append(("end", rollout.rollout_id, status, error_name))


@pytest.fixture
def hooks(plugin_manager, span_exporter) -> RolloutRecorder:
    recorder = RolloutRecorder()
    plugin_manager.register(recorder, name="rollout-recorder")
    return recorder


@arl.trace_agent(name="solver")
def solve(task: str) -> str:
    return helper(task)


@arl.trace_agent(name="helper")
def helper(task: str) -> str:
    return lookup(task)


@arl.trace_tool
def lookup(query: str) -> str:
    return query[::-1]


def test_rollout_span_shape(span_exporter) -> None:
    assert arl.current_rollout() is None
    with arl.rollout(task_id="t1", group_id="g1", metadata={"seed": 3}, name="episode") as info:
        assert arl.current_rollout() is info
        assert current_rollout_attributes() == {
            sc.ROLLOUT_ID: info.rollout_id,
            sc.TASK_ID: "t1",
            sc.GROUP_ID: "g1",
        }
        solve("abc")
    assert arl.current_rollout() is None
    spans = {s.name: s for s in finished(span_exporter)}
    root = spans["rollout t1"]
    assert root.attributes[sc.SPAN_KIND] == "rollout"
    assert root.attributes[sc.ROLLOUT_ROOT] is True
    assert json.loads(root.attributes[sc.ROLLOUT_METADATA]) == {"seed": 3}
    assert len(info.rollout_id) == 32 and info.name == "episode"
    for span in spans.values():
        assert span.attributes[sc.ROLLOUT_ID] == info.rollout_id
        assert span.attributes[sc.GROUP_ID] == "g1"
    assert spans["invoke_agent solver"].parent.span_id == root.context.span_id
    assert sc.ROLLOUT_ROOT not in spans["invoke_agent solver"].attributes


def test_rollout_without_task_and_with_given_id(span_exporter) -> None:
    with arl.rollout(rollout_id="my-id") as info:
        assert info.rollout_id == "my-id"
    (span,) = finished(span_exporter)
    assert span.name == "rollout"
    assert span.attributes[sc.ROLLOUT_ID] == "my-id"
    assert sc.TASK_ID not in span.attributes


def test_async_with_rollout(span_exporter) -> None:
    async def main() -> str:
        async with arl.rollout(task_id="a") as info:
            await asyncio.sleep(0)
            assert arl.current_rollout() is info
            return info.rollout_id

    rollout_id = asyncio.run(main())
    (span,) = finished(span_exporter)
    assert span.attributes[sc.ROLLOUT_ID] == rollout_id


def test_nested_rollout_is_a_new_rollout_under_the_outer_span(span_exporter) -> None:
    with arl.rollout(task_id="outer") as outer:
        with arl.rollout(task_id="inner") as inner:
            solve("x")
        assert arl.current_rollout() is outer
    assert inner.rollout_id != outer.rollout_id
    spans = {s.name: s for s in finished(span_exporter)}
    assert spans["rollout inner"].parent.span_id == spans["rollout outer"].context.span_id
    assert spans["rollout inner"].attributes[sc.ROLLOUT_ID] == inner.rollout_id
    assert spans["rollout inner"].attributes[sc.TASK_ID] == "inner"
    assert spans["invoke_agent solver"].attributes[sc.ROLLOUT_ID] == inner.rollout_id


def test_exception_in_rollout_is_recorded_and_reraised(span_exporter) -> None:
    error = KeyError("missing")
    with pytest.raises(KeyError) as excinfo:
        with arl.rollout(task_id="bad"):
            raise error
    assert excinfo.value is error
    (span,) = finished(span_exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == "KeyError"
    assert [e.name for e in span.events] == ["exception"]


def test_implicit_rollout_from_an_agent_call(span_exporter) -> None:
    solve("abc")
    lookup("outside")  # a tool outside any rollout: no rollout id
    spans = {s.name: s for s in finished(span_exporter)}
    solver = spans["invoke_agent solver"]
    assert solver.attributes[sc.ROLLOUT_ROOT] is True
    rollout_id = solver.attributes[sc.ROLLOUT_ID]
    assert spans["invoke_agent helper"].attributes[sc.ROLLOUT_ID] == rollout_id
    assert sc.ROLLOUT_ROOT not in spans["invoke_agent helper"].attributes
    tools = [s for s in finished(span_exporter) if s.name == "execute_tool lookup"]
    assert [sc.ROLLOUT_ID in t.attributes for t in tools] == [True, False]


def test_each_top_level_agent_call_is_its_own_rollout(span_exporter) -> None:
    solve("a")
    solve("b")
    roots = [s for s in finished(span_exporter) if s.name == "invoke_agent solver"]
    assert len({s.attributes[sc.ROLLOUT_ID] for s in roots}) == 2


def test_hooks_fire_with_ok_and_error(hooks) -> None:
    with arl.rollout(task_id="fine") as fine:
        pass
    with pytest.raises(RuntimeError):
        with arl.rollout(task_id="broken") as broken:
            raise RuntimeError("x")
    assert hooks.calls == [
        ("start", fine.rollout_id, "fine"),
        ("end", fine.rollout_id, "ok", None),
        ("start", broken.rollout_id, "broken"),
        ("end", broken.rollout_id, "error", "RuntimeError"),
    ]


def test_hooks_report_cancellation(hooks, span_exporter) -> None:
    async def episode() -> None:
        async with arl.rollout(task_id="slow"):
            await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.create_task(episode())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert hooks.calls[-1][2:] == ("cancelled", "CancelledError")
    (span,) = finished(span_exporter)
    assert span.attributes[sc.CANCELLED] is True
    assert span.attributes[sc.ERROR_TYPE] == "asyncio.exceptions.CancelledError"


def test_hooks_fire_for_implicit_rollouts(hooks) -> None:
    solve("a")
    with pytest.raises(ZeroDivisionError):
        arl.trace_agent(lambda: 1 / 0)()
    (start, end, start2, end2) = hooks.calls
    assert start[0] == "start" and end[1:] == (start[1], "ok", None)
    assert end2[2:] == ("error", "ZeroDivisionError")


def test_streaming_agent_closed_early_ends_its_implicit_rollout_as_cancelled(hooks) -> None:
    @arl.trace_agent
    def stream():
        yield "a"
        yield "b"

    gen = stream()
    next(gen)
    gen.close()
    assert hooks.calls[-1][2] == "cancelled"


def test_failing_hooks_never_reach_the_agent(plugin_manager, span_exporter) -> None:
    class Broken:
        @hookimpl
        def agent_rl_rollout_start(self, rollout):
            raise RuntimeError("hook start")

        @hookimpl
        def agent_rl_rollout_end(self, rollout, status, error):
            raise RuntimeError("hook end")

    plugin_manager.register(Broken(), name="broken")
    with arl.rollout(task_id="t"):
        assert solve("ab") == "ba"
    assert solve("cd") == "dc"
    assert len(finished(span_exporter)) == 7
