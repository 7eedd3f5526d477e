"""Streams of captured calls: the SDK's stream, passed through chunk by chunk, recorded at its end.

Contract:

* :class:`CapturedStream` / :class:`CapturedAsyncStream` wrap the stream object an SDK returned
  for ``stream=True``. Iterating, ``with`` / ``async with``, ``close()`` and every other
  attribute behave as on the SDK's stream (attributes are forwarded); each chunk reaches the
  caller unchanged and is also given to an accumulator.
* The call is recorded once: when the stream is exhausted, closed, left by its ``with`` block,
  or garbage-collected (a loop the caller broke out of). An exception from the stream records
  the call as failed and propagates unchanged.
* The accumulator's ``add(chunk)`` and ``result()`` may raise; a failure is logged once per site
  and never reaches the caller (the chunk is still returned).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from agent_rl_plugin.instrumentation.clients.capture import CallResult, ClientCall
from agent_rl_plugin.instrumentation.spans import log_failure


class Accumulator(Protocol):
    """Builds the call's result from its chunks."""

    def add(self, chunk: Any) -> None: ...

    def result(self) -> CallResult | list[CallResult]: ...


class _Base:
    def __init__(self, stream: Any, call: ClientCall, accumulator: Accumulator) -> None:
        object.__setattr__(self, "_arl_stream", stream)
        object.__setattr__(self, "_arl_call", call)
        object.__setattr__(self, "_arl_acc", accumulator)
        object.__setattr__(self, "_arl_broken", False)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_arl_stream"), name)

    def _arl_add(self, chunk: Any) -> None:
        if self._arl_broken:
            return
        try:
            self._arl_acc.add(chunk)
        except Exception:
            object.__setattr__(self, "_arl_broken", True)
            log_failure(f"reading a {self._arl_call.request.provider} stream chunk")

    def _arl_finish(self) -> None:
        if not self._arl_call.done:
            self._arl_call.finish(self._arl_acc.result)

    def _arl_fail(self, error: BaseException) -> None:
        self._arl_call.fail(error)

    def __del__(self) -> None:
        try:
            self._arl_finish()
        except Exception:
            pass  # interpreter shutdown: nothing left to record to


class CapturedStream(_Base):
    """A synchronous SDK stream whose chunks are also recorded (see the module contract)."""

    def __iter__(self) -> CapturedStream:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self._arl_stream)
        except StopIteration:
            self._arl_finish()
            raise
        except BaseException as error:
            self._arl_fail(error)
            raise
        self._arl_add(chunk)
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
            self._arl_finish()

    def close(self) -> None:
        try:
            close = getattr(self._arl_stream, "close", None)
            if close is not None:
                close()
        finally:
            self._arl_finish()


class CapturedAsyncStream(_Base):
    """An asynchronous SDK stream whose chunks are also recorded (see the module contract)."""

    def __aiter__(self) -> CapturedAsyncStream:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self._arl_stream.__anext__()
        except StopAsyncIteration:
            self._arl_finish()
            raise
        except BaseException as error:
            self._arl_fail(error)
            raise
        self._arl_add(chunk)
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
            self._arl_finish()

    async def close(self) -> None:
        try:
            close = getattr(self._arl_stream, "close", None)
            if close is not None:
                result = close()
                if hasattr(result, "__await__"):
                    await result
        finally:
            self._arl_finish()


def wrap_stream(stream: Any, call: ClientCall, make_accumulator: Callable[[], Accumulator], *, is_async: bool) -> Any:
    """``stream`` wrapped for capture (as an async stream when ``is_async``), or ``stream`` itself
    when it is not that kind of iterator (then the call is recorded without its output)."""
    try:
        accumulator = make_accumulator()
        if is_async and hasattr(stream, "__anext__"):
            return CapturedAsyncStream(stream, call, accumulator)
        if not is_async and hasattr(stream, "__next__"):
            return CapturedStream(stream, call, accumulator)
        call.finish(CallResult)
    except Exception:
        log_failure(f"wrapping a {call.request.provider} stream")
    return stream


__all__ = ["Accumulator", "CapturedAsyncStream", "CapturedStream", "wrap_stream"]
