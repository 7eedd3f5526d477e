"""Calling one agent once: sync or async, plain or streaming, with an optional deadline.

Contract:

* :func:`agent_kind` is ``"async"`` for coroutine functions and async-generator functions (also
  as a bound method, a ``functools.partial``, a traced function, or an object whose ``__call__``
  is one), ``"sync"`` for every other callable.
* :func:`call_async` awaits an async agent in the event loop; :func:`call_in_thread` runs a sync
  agent in a new **daemon** thread, inside a copy of the caller's :mod:`contextvars` context
  (``contextvars.copy_context().run``), so the rollout context and the current span reach it.
* The value a rollout returns (:func:`resolve_sync` / :func:`resolve_async`): a generator or an
  async iterator is consumed and its streamed text returned (the concatenation of ``str``
  chunks and of chunks' ``.content`` / ``["content"]`` strings; other chunks are dropped); an
  awaitable is awaited (a sync-looking callable that returns a coroutine or an async generator
  is run to completion in its thread with ``asyncio.run``); anything else is returned as is.
* :func:`wait_with_deadline` raises :class:`RolloutTimeout` when the deadline passes. An async
  agent is then cancelled (and given :data:`CANCEL_GRACE_S` to unwind); a sync agent's thread
  **cannot be killed**: it runs on in the background, its late result is dropped, and being a
  daemon thread it does not keep the process alive at exit. That is why sync agents get a
  thread each rather than a ``concurrent.futures`` pool, whose workers are joined at exit (a
  hung agent would hang the program).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Generator
from typing import Any, Callable, Literal

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.instrumentation.calls import chunk_text

__all__ = [
    "CANCEL_GRACE_S",
    "RolloutTimeout",
    "agent_kind",
    "call_async",
    "call_in_thread",
    "resolve_async",
    "resolve_sync",
    "wait_with_deadline",
]

#: Seconds a cancelled async agent gets to finish its ``finally`` blocks after a timeout.
CANCEL_GRACE_S = 1.0

AgentKind = Literal["async", "sync"]


class RolloutTimeout(AgentRLError, TimeoutError):
    """The rollout ran past its ``timeout_s``."""


def _is_async_function(candidate: Any) -> bool:
    return inspect.iscoroutinefunction(candidate) or inspect.isasyncgenfunction(candidate)


def agent_kind(agent_fn: Callable[..., Any]) -> AgentKind:
    """``"async"`` or ``"sync"`` (see the module contract). ``TypeError`` if not callable."""
    if not callable(agent_fn):
        raise TypeError(f"the agent must be callable, got {type(agent_fn).__name__}")
    target = agent_fn
    while isinstance(target, functools.partial):
        target = target.func
    if _is_async_function(target):
        return "async"
    if not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isclass(target)):
        call = getattr(target, "__call__", None)  # noqa: B004 - the bound __call__ of a callable object
        if call is not None and _is_async_function(call):
            return "async"
    return "sync"


# --- results ------------------------------------------------------------------------------
def _join(parts: list[str], chunk: Any) -> None:
    text = chunk_text(chunk)
    if text:
        parts.append(text)


def _collect_sync(stream: Any) -> str:
    parts: list[str] = []
    for chunk in stream:
        _join(parts, chunk)
    return "".join(parts)


async def _collect_async(stream: Any) -> str:
    parts: list[str] = []
    async for chunk in stream:
        _join(parts, chunk)
    return "".join(parts)


async def resolve_async(value: Any) -> Any:
    """Await an awaitable, consume a stream (see the module contract), or return ``value``."""
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, AsyncIterator):
        return await _collect_async(value)
    if isinstance(value, Generator):
        return _collect_sync(value)
    return value


def resolve_sync(value: Any) -> Any:
    """:func:`resolve_async` for a worker thread (async results run with ``asyncio.run``)."""
    if inspect.isawaitable(value) or isinstance(value, AsyncIterator):

        async def finish() -> Any:
            return await resolve_async(value)

        return asyncio.run(finish())
    if isinstance(value, Generator):
        return _collect_sync(value)
    return value


# --- running --------------------------------------------------------------------------------
async def call_async(agent_fn: Callable[[Any], Any], argument: Any) -> Any:
    """Call an async agent with ``argument`` and return its (resolved) result."""
    return await resolve_async(agent_fn(argument))


def call_in_thread(agent_fn: Callable[[Any], Any], argument: Any, name: str) -> asyncio.Future[Any]:
    """Run a sync agent in a daemon thread, in a copy of the current context; a future of its
    resolved result (or exception), completed in the calling event loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def deliver(exc: BaseException | None, result: Any) -> None:
        if future.done():  # timed out or cancelled: the late result is dropped
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    def work() -> None:
        exc: BaseException | None = None
        result: Any = None
        try:
            result = context.run(lambda: resolve_sync(agent_fn(argument)))
        except StopIteration as stop:  # a future refuses StopIteration
            exc = RuntimeError(f"the agent raised StopIteration: {stop}")
        except BaseException as error:  # noqa: BLE001 - handed to the loop, which re-raises it
            exc = error
        try:
            loop.call_soon_threadsafe(deliver, exc, result)
        except RuntimeError:  # the loop is closed: the run finished without us (timeout)
            pass

    threading.Thread(target=work, name=name, daemon=True).start()
    return future


async def wait_with_deadline(job: asyncio.Future[Any], timeout_s: float | None) -> Any:
    """The result of ``job`` (a task or future), or :class:`RolloutTimeout` after
    ``timeout_s`` seconds (``None``: no limit). ``job`` is cancelled on timeout and when the
    caller itself is cancelled."""
    try:
        done, _ = await asyncio.wait({job}, timeout=timeout_s)
    except asyncio.CancelledError:
        job.cancel()
        raise
    if job in done:
        return job.result()
    job.cancel()
    if isinstance(job, asyncio.Task):
        await asyncio.wait({job}, timeout=CANCEL_GRACE_S)  # let its finally blocks run
        if job.done() and not job.cancelled():
            job.exception()  # retrieved: no "exception was never retrieved" warning
    raise RolloutTimeout(f"rollout timed out after {timeout_s:g} s")
