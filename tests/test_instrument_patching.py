"""instrument()/uninstrument() and double instrumentation: one span per call, exact undo."""

from __future__ import annotations

import asyncio

import pytest

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc


def finished(exporter) -> list:
    arl.flush()
    return list(exporter.get_finished_spans())


class Base:
    def run(self, task: str) -> str:
        return f"run {task}"


class Target(Base):
    agent_id = "t-1"

    def chat(self, message: str) -> str:
        return self.search(message)

    @classmethod
    def step(cls, n: int) -> int:
        return n + 1

    @staticmethod
    def invoke(x: int) -> int:
        return 2 * x

    def __call__(self, x: int) -> int:
        return x

    def search(self, query: str) -> str:
        return query.upper()

    def helper(self) -> str:
        return "untouched"


def snapshot(namespace) -> dict:
    return dict(namespace)


def assert_same_entries(now, before: dict) -> None:
    assert set(now) == set(before)
    for key, value in before.items():
        assert now[key] is value, key


# --- double instrumentation -------------------------------------------------------------------
def test_decorator_mixin_and_instrument_give_one_span(span_exporter) -> None:
    class Decorated:
        @arl.trace_agent(name="decorated")
        def chat(self, message: str) -> str:
            return message

    class Mixed(arl.RLAgentMixin, Decorated):
        pass

    arl.instrument(Mixed)
    agent = arl.instrument(Mixed())
    assert agent.chat("hi") == "hi"
    (span,) = finished(span_exporter)
    assert span.name == "invoke_agent decorated"


def test_override_calling_super_gives_one_span(span_exporter) -> None:
    class Plain:
        def chat(self, message: str) -> str:
            return message

    class RLPlain(arl.RLAgentMixin, Plain):
        pass

    class Louder(RLPlain):
        def chat(self, message: str) -> str:
            return super().chat(message) + "!"

    assert Louder().chat("hi") == "hi!"
    (span,) = finished(span_exporter)
    assert span.name == "invoke_agent Louder"
    assert span.attributes[sc.ROLLOUT_OUTPUT] == '"hi!"'


def test_recursion_through_another_instance_still_nests(span_exporter) -> None:
    class Delegating(arl.RLAgentMixin):
        def __init__(self, inner=None) -> None:
            self.inner = inner

        def run(self, x: int) -> int:
            return self.inner.run(x + 1) if self.inner else x

    assert Delegating(Delegating()).run(1) == 2
    spans = finished(span_exporter)
    assert len(spans) == 2
    inner, outer = spans
    assert inner.parent.span_id == outer.context.span_id


def test_instrument_twice_is_a_no_op(span_exporter) -> None:
    class Agent(Target):
        pass

    arl.instrument(Agent)
    first = Agent.__dict__["chat"]
    arl.instrument(Agent)
    assert Agent.__dict__["chat"] is first

    obj = Target()
    arl.instrument(obj)
    bound = vars(obj)["chat"]
    arl.instrument(obj)
    assert vars(obj)["chat"] is bound
    assert obj.chat("x") == "X"
    assert len([s for s in finished(span_exporter) if s.name.startswith("invoke_agent")]) == 1
    arl.uninstrument(Agent)


# --- instrument a class -----------------------------------------------------------------------
def test_instrument_class_and_restore_exactly(span_exporter) -> None:
    before, base_before = snapshot(Target.__dict__), snapshot(Base.__dict__)
    assert arl.instrument(Target, tool_methods=["search"]) is Target
    try:
        for name in ("chat", "step", "invoke", "__call__", "search", "run"):
            assert Target.__dict__[name] is not before.get(name), name
        assert isinstance(Target.__dict__["step"], classmethod)
        assert isinstance(Target.__dict__["invoke"], staticmethod)
        assert_same_entries(Base.__dict__, base_before)  # inherited run wrapped onto Target
        obj = Target()
        assert (obj.chat("a"), obj.step(1), Target.invoke(2), obj(3), obj.run("r")) == (
            "A", 2, 4, 3, "run r",
        )
    finally:
        arl.uninstrument(Target)
    assert_same_entries(Target.__dict__, before)
    assert_same_entries(Base.__dict__, base_before)
    names = [s.name for s in finished(span_exporter)]
    assert names.count("invoke_agent Target") == 5
    assert names.count("execute_tool search") == 1
    Target().chat("after")  # no longer traced
    assert len(finished(span_exporter)) == len(names)


# --- instrument an instance -------------------------------------------------------------------
def test_instrument_instance_and_restore_exactly(span_exporter) -> None:
    class_before = snapshot(Target.__dict__)
    obj = Target()
    obj.extra = 1
    before = snapshot(vars(obj))
    assert arl.instrument(obj, tool_methods=["search"]) is obj
    assert Target().chat("plain") == "PLAIN"  # other instances untouched
    assert obj.chat("a") == "A"
    assert obj.step(1) == 2 and obj.invoke(3) == 6 and obj.run("x") == "run x"
    spans = finished(span_exporter)
    assert sorted(s.name for s in spans) == ["execute_tool search"] + ["invoke_agent Target"] * 4
    chat = next(s for s in spans if s.attributes.get(sc.ROLLOUT_INPUT) == '{"message": "a"}')
    assert chat.attributes[sc.GEN_AI_AGENT_ID] == "t-1"

    arl.uninstrument(obj)
    assert vars(obj) == before
    assert obj.chat.__func__ is Target.__dict__["chat"]
    assert_same_entries(Target.__dict__, class_before)


def test_instance_callable_attribute_is_restored(span_exporter) -> None:
    def custom_run(task: str) -> str:
        return f"custom {task}"

    obj = Target()
    obj.run = custom_run
    arl.instrument(obj, methods=["run"])
    assert obj.run("x") == "custom x"
    arl.uninstrument(obj)
    assert obj.run is custom_run
    assert [s.name for s in finished(span_exporter)] == ["invoke_agent Target"]


def test_instrument_async_and_streaming_methods_of_an_instance(span_exporter) -> None:
    class Streamer:
        async def ainvoke(self, x: int) -> int:
            await asyncio.sleep(0)
            return x

        async def chat(self, text: str):
            for word in text.split():
                yield word

    async def main(obj) -> tuple:
        return await obj.ainvoke(1), [w async for w in obj.chat("a b")]

    obj = arl.instrument(Streamer(), role="orchestrator")
    assert asyncio.run(main(obj)) == (1, ["a", "b"])
    spans = finished(span_exporter)
    assert [s.attributes[sc.AGENT_ROLE] for s in spans] == ["orchestrator"] * 2
    assert spans[1].attributes[sc.ROLLOUT_OUTPUT] == '"ab"'
    arl.uninstrument(obj)
    assert vars(obj) == {}


def test_uninstrument_of_something_not_instrumented_is_a_no_op() -> None:
    before = snapshot(Target.__dict__)
    obj = Target()
    assert arl.uninstrument(Target) is Target and arl.uninstrument(obj) is obj
    assert_same_entries(Target.__dict__, before)
    assert vars(obj) == {}


def test_instrument_an_object_without_dict_says_what_to_do() -> None:
    class Slotted:
        __slots__ = ()

        def run(self) -> None: ...

    with pytest.raises(TypeError, match=r"instrument\(Slotted\)"):
        arl.instrument(Slotted())
