"""Tracing never changes what the traced code does.

Read each test as an example: the same user code is run plain and traced, and everything the
caller can observe (values, exceptions, tracebacks, generator protocol, introspection) is equal.
The spans are checked only for what they say about the call (status, error type, outcome).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from opentelemetry.trace import StatusCode

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc

DECORATORS = {"trace_agent": arl.trace_agent, "trace_tool": arl.trace_tool}


def finished(exporter) -> list:
    arl.flush()
    return list(exporter.get_finished_spans())


def only_span(exporter):
    spans = finished(exporter)
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


# --- the user code ----------------------------------------------------------------------------
RAISED: list[BaseException] = []  # every exception the user code raised, to compare identity


def boom() -> ValueError:
    RAISED.append(ValueError("bad input: 42"))
    return RAISED[-1]


def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


async def add_later(a: int, b: int = 1) -> int:
    """Add two numbers after a tick."""
    await asyncio.sleep(0)
    return a + b


def count(n: int):
    """Yield 0..n-1, then return "done"."""
    for i in range(n):
        yield i
    return "done"


async def count_later(n: int):
    """Yield 0..n-1 with a tick before each."""
    for i in range(n):
        await asyncio.sleep(0)
        yield i


def fail(a: int) -> int:
    raise boom()


async def fail_later(a: int) -> int:
    await asyncio.sleep(0)
    raise boom()


def fail_midway(n: int):
    yield 1
    raise boom()


async def fail_midway_later(n: int):
    yield 1
    await asyncio.sleep(0)
    raise boom()


def echo():
    """A generator using the whole protocol: send, throw, close."""
    received = []
    try:
        while True:
            try:
                value = yield len(received)
                received.append(value)
            except KeyError as exc:
                yield f"caught {exc!r}"
    finally:
        received.append("closed")


async def aecho():
    """The async twin of ``echo``."""
    received = []
    try:
        while True:
            try:
                value = yield len(received)
                received.append(value)
            except KeyError as exc:
                yield f"caught {exc!r}"
    finally:
        received.append("closed")


# --- drivers: what a caller observes -----------------------------------------------------------
def drive_generator(gen) -> tuple[list[Any], Any]:
    """(yielded values, return value) seen through ``yield from``."""

    def outer():
        result = yield from gen
        return result

    items, it = [], outer()
    while True:
        try:
            items.append(next(it))
        except StopIteration as stop:
            return items, stop.value


async def drain(agen) -> list[Any]:
    return [item async for item in agen]


def observe(action: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("value", action())
    except BaseException as exc:  # noqa: BLE001 - the point is to compare
        return ("raised", (type(exc), str(exc)))


def echo_transcript(gen) -> list[tuple[str, Any]]:
    steps = [
        lambda: next(gen),
        lambda: gen.send("a"),
        lambda: gen.throw(KeyError("k")),
        lambda: gen.send("b"),
        lambda: gen.close(),
        lambda: next(gen),
    ]
    return [observe(step) for step in steps]


async def aecho_transcript(agen) -> list[tuple[str, Any]]:
    steps = [
        lambda: agen.__anext__(),
        lambda: agen.asend("a"),
        lambda: agen.athrow(KeyError("k")),
        lambda: agen.asend("b"),
        lambda: agen.aclose(),
        lambda: agen.__anext__(),
    ]
    out = []
    for step in steps:
        try:
            out.append(("value", await step()))
        except BaseException as exc:  # noqa: BLE001
            out.append(("raised", (type(exc), str(exc))))
    return out


@dataclass
class Case:
    target: Any
    run: Callable[[Any], Any]


CASES = {
    "sync function": Case(add, lambda f: f(2, b=3)),
    "coroutine function": Case(add_later, lambda f: asyncio.run(f(2, b=3))),
    "generator function": Case(count, lambda f: drive_generator(f(3))),
    "async generator function": Case(count_later, lambda f: asyncio.run(drain(f(3)))),
    "partial of a function": Case(functools.partial(add, 2), lambda f: f(b=3)),
    "partial of a coroutine function": Case(
        functools.partial(add_later, 2), lambda f: asyncio.run(f(b=3))
    ),
    "partial of a generator function": Case(
        functools.partial(count, 2), lambda f: drive_generator(f())
    ),
}


# --- return values ----------------------------------------------------------------------------
@pytest.mark.parametrize("decorator", DECORATORS.values(), ids=DECORATORS.keys())
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_results_are_unchanged(span_exporter, case: Case, decorator) -> None:
    assert case.run(decorator(case.target)) == case.run(case.target)
    span = only_span(span_exporter)
    assert span.status.status_code is StatusCode.UNSET


def test_generator_return_value_reaches_yield_from(span_exporter) -> None:
    assert drive_generator(arl.trace_agent(count)(2)) == ([0, 1], "done")
    span = only_span(span_exporter)
    assert span.attributes[sc.STREAM_OUTCOME] == "exhausted"
    assert span.attributes[sc.STREAM_CHUNKS] == 2


# --- introspection ----------------------------------------------------------------------------
FUNCTIONS = {"sync": add, "async": add_later, "generator": count, "async generator": count_later}
PREDICATES = [inspect.iscoroutinefunction, inspect.isgeneratorfunction, inspect.isasyncgenfunction]


@pytest.mark.parametrize("decorator", DECORATORS.values(), ids=DECORATORS.keys())
@pytest.mark.parametrize("original", FUNCTIONS.values(), ids=FUNCTIONS.keys())
def test_wrapper_looks_like_the_original(original, decorator) -> None:
    wrapped = decorator(original)
    assert wrapped.__wrapped__ is original
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__"):
        assert getattr(wrapped, attribute) == getattr(original, attribute)
    assert inspect.signature(wrapped) == inspect.signature(original)
    for predicate in PREDICATES:
        assert predicate(wrapped) is predicate(original), predicate.__name__


def test_decorators_take_a_name(span_exporter) -> None:
    assert arl.trace_tool(name="web_search")(add)(1) == 2
    assert arl.trace_agent(name="planner")(add)(1) == 2
    assert [s.name for s in finished(span_exporter)] == [
        "execute_tool web_search",
        "invoke_agent planner",
    ]


def test_decorating_twice_changes_nothing() -> None:
    once = arl.trace_agent(add)
    assert arl.trace_agent(once) is once
    assert arl.trace_tool(once) is once


# --- exceptions -------------------------------------------------------------------------------
FAILING = {
    "sync": (fail, lambda f: f(1), "fail"),
    "async": (fail_later, lambda f: asyncio.run(f(1)), "fail_later"),
    "generator": (fail_midway, lambda f: list(f(1)), "fail_midway"),
    "async generator": (fail_midway_later, lambda f: asyncio.run(drain(f(1))), "fail_midway_later"),
}


@pytest.mark.parametrize("decorator", DECORATORS.values(), ids=DECORATORS.keys())
@pytest.mark.parametrize("target, run, function_name", FAILING.values(), ids=FAILING.keys())
def test_exceptions_pass_through_and_are_recorded(
    span_exporter, target, run, function_name, decorator
) -> None:
    with pytest.raises(ValueError) as excinfo:
        run(decorator(target))
    assert excinfo.value is RAISED[-1]  # the very object the user code raised
    assert excinfo.traceback[-1].name == function_name  # raised in the user's code
    span = only_span(span_exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == "ValueError"
    (event,) = [e for e in span.events if e.name == "exception"]
    assert event.attributes["exception.message"] == "bad input: 42"


# --- the generator protocol -------------------------------------------------------------------
def test_generator_send_throw_close_behave_the_same(span_exporter) -> None:
    assert echo_transcript(arl.trace_agent(echo)()) == echo_transcript(echo())
    span = only_span(span_exporter)
    assert span.attributes[sc.STREAM_OUTCOME] == "closed"
    assert span.attributes[sc.STREAM_CHUNKS] == 4
    assert span.status.status_code is StatusCode.UNSET


def test_async_generator_asend_athrow_aclose_behave_the_same(span_exporter) -> None:
    plain = asyncio.run(aecho_transcript(aecho()))
    traced = asyncio.run(aecho_transcript(arl.trace_agent(aecho)()))
    assert traced == plain
    span = only_span(span_exporter)
    assert span.attributes[sc.STREAM_OUTCOME] == "closed"
    assert span.attributes[sc.STREAM_CHUNKS] == 4


def test_generator_closed_early_ends_its_span(span_exporter) -> None:
    gen = arl.trace_agent(count)(10)
    assert next(gen) == 0
    gen.close()
    span = only_span(span_exporter)
    assert span.attributes[sc.STREAM_OUTCOME] == "closed"
    assert span.attributes[sc.STREAM_CHUNKS] == 1


def test_garbage_collected_generator_ends_its_span(span_exporter) -> None:
    cleaned_up = []

    def stream():
        try:
            yield "first"
            yield "second"
        finally:
            cleaned_up.append(True)

    gen = arl.trace_agent(stream)()
    next(gen)
    del gen
    gc.collect()
    assert cleaned_up == [True]  # the generator's finally block still ran
    span = only_span(span_exporter)
    assert span.attributes[sc.STREAM_OUTCOME] == "collected"
    assert span.attributes[sc.ROLLOUT_OUTPUT] == '"first"'


def test_garbage_collected_async_generator_ends_its_span(span_exporter) -> None:
    async def main() -> None:
        agen = arl.trace_agent(count_later)(10)
        assert await agen.__anext__() == 0
        del agen
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(main())
    span = only_span(span_exporter)
    assert span.attributes[sc.STREAM_OUTCOME] == "collected"


def test_a_generator_that_is_never_iterated_still_ends_its_span(span_exporter) -> None:
    arl.trace_agent(count)(3)
    gc.collect()
    assert only_span(span_exporter).attributes[sc.STREAM_OUTCOME] == "collected"


def test_context_managers_built_on_traced_generators(span_exporter) -> None:
    def run(decorate) -> list:
        log: list = []

        @contextlib.contextmanager
        @decorate
        def managed(x):
            try:
                yield x
            except KeyError:
                log.append("handled")
            finally:
                log.append("exit")

        with managed(1) as value:
            log.append(value)
        with managed(2):
            raise KeyError("swallowed by the generator")
        with pytest.raises(ValueError):
            with managed(3):
                raise ValueError("propagates")
        return log

    assert run(arl.trace_agent) == run(lambda f: f) == [1, "exit", "handled", "exit", "exit"]
    outcomes = [s.attributes[sc.STREAM_OUTCOME] for s in finished(span_exporter)]
    assert outcomes == ["exhausted", "exhausted", "error"]


def test_plain_function_returning_a_generator_or_coroutine_is_traced_to_the_end(
    span_exporter,
) -> None:
    assert list(arl.trace_agent(lambda n: count(n))(2)) == [0, 1]
    assert asyncio.run(arl.trace_agent(lambda a: add_later(a))(1)) == 2
    stream_span, coroutine_span = finished(span_exporter)
    assert stream_span.attributes[sc.STREAM_OUTCOME] == "exhausted"
    assert coroutine_span.attributes[sc.ROLLOUT_OUTPUT] == "2"


# --- cancellation -----------------------------------------------------------------------------
def test_cancelled_coroutine_is_recorded_and_still_cancelled(span_exporter) -> None:
    @arl.trace_agent
    async def slow() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.create_task(slow())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    span = only_span(span_exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == "asyncio.exceptions.CancelledError"
    assert span.attributes[sc.CANCELLED] is True


def test_cancelled_async_generator_is_recorded(span_exporter) -> None:
    @arl.trace_agent
    async def ticker():
        while True:
            await asyncio.sleep(10)
            yield "tick"

    async def consume() -> None:
        async for _ in ticker():
            pass

    async def main() -> None:
        task = asyncio.create_task(consume())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    span = only_span(span_exporter)
    assert span.attributes[sc.CANCELLED] is True
    assert span.attributes[sc.STREAM_OUTCOME] == "error"


# --- methods, classmethods, staticmethods -----------------------------------------------------
class Calculator:
    agent_id = "calc-1"

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset

    @arl.trace_agent
    def run(self, a: int, b: int = 1) -> int:
        """Add with an offset."""
        return a + b + self.offset

    @arl.trace_agent
    async def arun(self, a: int) -> int:
        return a + self.offset

    @arl.trace_agent
    def stream(self, n: int):
        yield from range(self.offset, self.offset + n)

    @arl.trace_agent
    async def astream(self, n: int):
        for i in range(n):
            yield i + self.offset

    @arl.trace_agent
    @classmethod
    def make(cls, offset: int) -> "Calculator":
        return cls(offset)

    @classmethod
    @arl.trace_agent
    def make_other(cls, offset: int) -> "Calculator":
        return cls(offset)

    @arl.trace_tool
    @staticmethod
    def double(x: int) -> int:
        return 2 * x

    @staticmethod
    @arl.trace_tool
    def triple(x: int) -> int:
        return 3 * x


METHOD_CALLS = {
    "method": (lambda c: c.run(1, b=2), 13, '{"a": 1, "b": 2}'),
    "async method": (lambda c: asyncio.run(c.arun(1)), 11, '{"a": 1}'),
    "generator method": (lambda c: list(c.stream(2)), [10, 11], '{"n": 2}'),
    "async generator method": (lambda c: asyncio.run(drain(c.astream(2))), [10, 11], '{"n": 2}'),
    "classmethod (traced outside)": (lambda c: Calculator.make(5).offset, 5, '{"offset": 5}'),
    "classmethod (traced inside)": (lambda c: c.make_other(6).offset, 6, '{"offset": 6}'),
}


@pytest.mark.parametrize(
    "call, expected, recorded_input", METHOD_CALLS.values(), ids=METHOD_CALLS.keys()
)
def test_methods_keep_binding_and_record_without_self(
    span_exporter, call, expected, recorded_input
) -> None:
    assert call(Calculator(10)) == expected
    span = only_span(span_exporter)
    assert span.attributes[sc.ROLLOUT_INPUT] == recorded_input


def test_staticmethods_in_either_order(span_exporter) -> None:
    calc = Calculator()
    results = (calc.double(2), Calculator.double(2), calc.triple(2), Calculator.triple(2))
    assert results == (4, 4, 6, 6)
    assert isinstance(Calculator.__dict__["double"], staticmethod)
    assert isinstance(Calculator.__dict__["make"], classmethod)
    spans = finished(span_exporter)
    assert [s.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] for s in spans] == ['{"x": 2}'] * 4


def test_method_introspection_is_preserved() -> None:
    calc = Calculator()
    original = Calculator.run.__wrapped__
    assert inspect.signature(calc.run) == inspect.signature(original.__get__(calc))
    assert calc.run.__doc__ == "Add with an offset."
    assert inspect.ismethod(calc.stream) and inspect.isgeneratorfunction(calc.stream)
    assert inspect.isasyncgenfunction(calc.astream)
    assert inspect.iscoroutinefunction(calc.arun)


def test_instance_methods_record_the_agent_id(span_exporter) -> None:
    Calculator().run(1)
    assert only_span(span_exporter).attributes[sc.GEN_AI_AGENT_ID] == "calc-1"
