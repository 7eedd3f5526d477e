"""Streams of captured calls: the SDK's stream, passed through chunk by chunk, recorded at its end.

Contract:

* The caller gets the SDK's own stream object back (same type, same methods) whenever the SDK
  keeps its chunk iterator in ``stream._iterator`` (the OpenAI and Anthropic SDKs): that
  iterator is replaced, in place, by one that hands each chunk to an accumulator on its way,
  and ``close`` by one that also records. Other streams (LiteLLM's) are wrapped in a proxy that
  forwards every attribute.
* Each chunk reaches the caller unchanged. The call is recorded once: when the stream is
  exhausted, closed, left by its ``with`` block, or garbage-collected (a loop the caller broke
  out of). An exception from the stream records the call as failed and propagates unchanged.
* A stream the caller stopped reading before the end (no finish reason seen) is recorded with
  what arrived and ``agent_rl.llm.incomplete = true``: its text is cut, so datasets leave it out.
* The accumulator's ``add(chunk)`` and ``result()`` may raise; a failure is logged once per site
  and never reaches the caller (the chunk is still returned).
"""

from __future__ import annotations

import inspect
from typing import Any, AsyncIterator, Callable, Iterator, Protocol

from agent_rl_plugin.instrumentation.clients.capture import CallResult, ClientCall
from agent_rl_plugin.instrumentation.spans import log_failure
from agent_rl_plugin.semconv import LLM_INCOMPLETE


class Accumulator(Protocol):
    """Builds the call's result from its chunks."""

    def add(self, chunk: Any) -> None: ...

    def result(self) -> CallResult | list[CallResult]: ...


class StreamState:
    """One stream's capture: chunks in, one record out (see the module contract)."""

    __slots__ = ("call", "accumulator", "broken", "exhausted")

    def __init__(self, call: ClientCall, accumulator: Accumulator) -> None:
        self.call = call
        self.accumulator = accumulator
        self.broken = False
        self.exhausted = False

    def add(self, chunk: Any) -> None:
        if self.broken:
            return
        try:
            self.accumulator.add(chunk)
        except Exception:
            self.broken = True
            log_failure(f"reading a {self.call.request.provider} stream chunk")

    def finish(self) -> None:
        if not self.call.done:
            self.call.finish(self._results)

    def fail(self, error: BaseException) -> None:
        self.call.fail(error)

    def _results(self) -> CallResult | list[CallResult]:
        extracted = self.accumulator.result()
        results = extracted if isinstance(extracted, list) else [extracted]
        if not self.exhausted:
            for result in results:
                if not result.finish_reasons:
                    result.attributes[LLM_INCOMPLETE] = True
        return results


def _relay(inner: Iterator[Any], state: StreamState) -> Iterator[Any]:
    try:
        for chunk in inner:
            state.add(chunk)
            yield chunk
    except GeneratorExit:
        state.finish()
        raise
    except BaseException as error:
        state.fail(error)
        raise
    state.exhausted = True
    state.finish()


async def _async_relay(inner: AsyncIterator[Any], state: StreamState) -> AsyncIterator[Any]:
    try:
        async for chunk in inner:
            state.add(chunk)
            yield chunk
    except GeneratorExit:
        state.finish()
        raise
    except BaseException as error:
        state.fail(error)
        raise
    state.exhausted = True
    state.finish()


def _in_place(stream: Any, state: StreamState, is_async: bool) -> bool:
    """Swap ``stream._iterator`` (and ``close``) for recording ones; ``False`` when the stream
    does not keep a generator there."""
    inner: Any = getattr(stream, "_iterator", None)
    close = getattr(stream, "close", None)
    if close is None or not (inspect.isasyncgen(inner) if is_async else inspect.isgenerator(inner)):
        return False
    if is_async:
        stream._iterator = _async_relay(inner, state)

        async def async_close() -> Any:
            try:
                return await close()
            finally:
                state.finish()

        stream.close = async_close
    else:
        stream._iterator = _relay(inner, state)

        def sync_close() -> Any:
            try:
                return close()
            finally:
                state.finish()

        stream.close = sync_close
    return True


class _Proxy:
    """Forwards every attribute to the SDK's stream; iteration goes through the state."""

    def __init__(self, stream: Any, state: StreamState) -> None:
        object.__setattr__(self, "_arl_stream", stream)
        object.__setattr__(self, "_arl_state", state)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_arl_stream"), name)

    def __del__(self) -> None:
        try:
            self._arl_state.finish()
        except Exception:
            pass  # interpreter shutdown: nothing left to record to


class CapturedStream(_Proxy):
    """A synchronous stream that keeps no generator of its own (LiteLLM's)."""

    def __iter__(self) -> CapturedStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self._arl_stream)
        except StopIteration:
            self._arl_state.exhausted = True
            self._arl_state.finish()
            raise
        except BaseException as error:
            self._arl_state.fail(error)
            raise
        self._arl_state.add(chunk)
        return chunk

    def __enter__(self) -> CapturedStream:
        enter = getattr(self._arl_stream, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            exit_ = getattr(self._arl_stream, "__exit__", None)
            return exit_(*exc_info) if exit_ is not None else None
        finally:
            self._arl_state.finish()


class CapturedAsyncStream(_Proxy):
    """An asynchronous stream that keeps no generator of its own (LiteLLM's)."""

    def __aiter__(self) -> CapturedAsyncStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self._arl_stream.__anext__()
        except StopAsyncIteration:
            self._arl_state.exhausted = True
            self._arl_state.finish()
            raise
        except BaseException as error:
            self._arl_state.fail(error)
            raise
        self._arl_state.add(chunk)
        return chunk

    async def __aenter__(self) -> CapturedAsyncStream:
        enter = getattr(self._arl_stream, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            exit_ = getattr(self._arl_stream, "__aexit__", None)
            return (await exit_(*exc_info)) if exit_ is not None else None
        finally:
            self._arl_state.finish()


def wrap_stream(stream: Any, call: ClientCall, make_accumulator: Callable[[], Accumulator], *, is_async: bool) -> Any:
    """``stream`` recording as it is read (in place, else through a proxy), or ``stream`` itself
    when it is not that kind of iterator (then the call is recorded without its output)."""
    try:
        state = StreamState(call, make_accumulator())
        if _in_place(stream, state, is_async):
            return stream
        if is_async and hasattr(stream, "__anext__"):
            return CapturedAsyncStream(stream, state)
        if not is_async and hasattr(stream, "__next__"):
            return CapturedStream(stream, state)
        call.finish(CallResult)
    except Exception:
        log_failure(f"wrapping a {call.request.provider} stream")
    return stream


__all__ = ["Accumulator", "CapturedAsyncStream", "CapturedStream", "StreamState", "wrap_stream"]
