"""Proxies for generators and async generators returned by traced calls.

Contract:

* A proxy behaves like the generator it wraps: ``next``/``send``/``throw``/``close`` (and
  ``__anext__``/``asend``/``athrow``/``aclose``) are forwarded, values, exceptions and the
  ``StopIteration``/``StopAsyncIteration`` return value pass through unchanged, so
  ``yield from proxy`` sees the generator's ``return`` value. Other attributes (``gi_frame``,
  ``ag_running``, ...) are read from the wrapped generator.
* The span is never held across a ``yield``: the call's context is entered around each resume
  of the wrapped generator and left right after (see :class:`CallRecord.activate`).
* The span ends exactly once, with ``agent_rl.stream.outcome`` = ``exhausted`` (ran to its end),
  ``closed`` (``close()``/``aclose()`` or ``GeneratorExit``), ``error`` (raised) or
  ``collected`` (the proxy was garbage-collected before any of those).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from typing import Any

from agent_rl_plugin.instrumentation.calls import CallRecord, suppress, unsuppress
from agent_rl_plugin.instrumentation.spans import log_failure

_PROXY_SLOTS = ("_inner", "_record")


def _outcome_of(exc: BaseException) -> str:
    return "closed" if isinstance(exc, GeneratorExit) else "error"


class _ProxyBase:
    __slots__ = _PROXY_SLOTS

    _inner: Any
    _record: CallRecord | None

    def _end(self, outcome: str, exc: BaseException | None = None) -> None:
        record, self._record = self._record, None
        if record is not None:
            record.finish(exc=exc, outcome=outcome)

    def __getattr__(self, name: str) -> Any:
        if name in _PROXY_SLOTS:
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return repr(self._inner)


class GeneratorProxy(_ProxyBase, Generator):  # type: ignore[misc]
    """A traced generator: see the module docstring."""

    __slots__ = ("__weakref__",)

    def __init__(self, inner: Generator[Any, Any, Any], record: CallRecord) -> None:
        self._inner = inner
        self._record: CallRecord | None = record

    def __iter__(self) -> GeneratorProxy:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        if self._record is None or self._inner.gi_running:
            return self._inner.send(value)
        return self._resume(self._inner.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        args = (typ,) if val is None and tb is None else (typ, val, tb)
        if self._record is None or self._inner.gi_running:
            return self._inner.throw(*args)
        return self._resume(self._inner.throw, *args)

    def _resume(self, method: Any, *args: Any) -> Any:
        """Run one resume of the wrapped generator inside the call's context."""
        record = self._record
        assert record is not None
        tokens = record.activate()
        try:
            chunk = method(*args)
        except StopIteration:
            self._end("exhausted")
            raise
        except BaseException as exc:
            self._end(_outcome_of(exc), exc)
            raise
        else:
            record.add_chunk(chunk)
        finally:
            record.deactivate(tokens)
        return chunk

    def close(self) -> None:
        record = self._record
        if record is None or self._inner.gi_running:
            return self._inner.close()
        tokens = record.activate()
        try:
            self._inner.close()
        except BaseException as exc:
            self._end("error", exc)
            raise
        else:
            self._end("closed")
        finally:
            record.deactivate(tokens)

    def __del__(self) -> None:
        try:
            record = self._record
        except AttributeError:
            return
        if record is None:
            return
        self._record = None
        tokens = record.activate()
        try:
            self._inner.close()  # run the generator's finally blocks inside its span
        except BaseException:
            log_failure("closing a garbage-collected generator")
        finally:
            record.finish(outcome="collected")
            record.deactivate(tokens)


class AsyncGeneratorProxy(_ProxyBase, AsyncGenerator):  # type: ignore[misc]
    """A traced async generator: see the module docstring."""

    __slots__ = ("__weakref__",)

    def __init__(self, inner: AsyncGenerator[Any, Any], record: CallRecord) -> None:
        self._inner = inner
        self._record: CallRecord | None = record

    def __aiter__(self) -> AsyncGeneratorProxy:
        return self

    def __anext__(self) -> Any:
        return self.asend(None)

    async def asend(self, value: Any) -> Any:
        if self._record is None or self._inner.ag_running:
            return await self._inner.asend(value)
        return await self._resume(self._inner.asend, value)

    async def athrow(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        args = (typ,) if val is None and tb is None else (typ, val, tb)
        if self._record is None or self._inner.ag_running:
            return await self._inner.athrow(*args)
        return await self._resume(self._inner.athrow, *args)

    async def _resume(self, method: Any, *args: Any) -> Any:
        """Await one resume of the wrapped async generator inside the call's context."""
        record = self._record
        assert record is not None
        tokens = record.activate()
        try:
            chunk = await method(*args)
        except StopAsyncIteration:
            self._end("exhausted")
            raise
        except BaseException as exc:
            self._end(_outcome_of(exc), exc)
            raise
        else:
            record.add_chunk(chunk)
        finally:
            record.deactivate(tokens)
        return chunk

    async def aclose(self) -> None:
        record = self._record
        if record is None or self._inner.ag_running:
            return await self._inner.aclose()
        tokens = record.activate()
        try:
            await self._inner.aclose()
        except BaseException as exc:
            self._end("error", exc)
            raise
        else:
            self._end("closed")
        finally:
            record.deactivate(tokens)

    def __del__(self) -> None:
        # An async generator cannot be closed from here (that needs an event loop); the wrapped
        # generator is finalised by the loop's async-generator hooks as usual.
        try:
            record = self._record
        except AttributeError:
            return
        if record is None:
            return
        self._record = None
        tokens = record.activate()
        try:
            record.finish(outcome="collected")
        finally:
            record.deactivate(tokens)


class SuppressedGenerator(Generator):  # type: ignore[misc]
    """The generator of an ``enable_rl=False`` instance: nothing is recorded while it runs
    (recording is switched off around each resume, as for its sync and async calls)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Generator[Any, Any, Any]) -> None:
        self._inner = inner

    def __iter__(self) -> SuppressedGenerator:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        token = suppress()
        try:
            return self._inner.send(value)
        finally:
            unsuppress(token)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        token = suppress()
        try:
            return self._inner.throw(typ, val, tb) if val is not None or tb is not None else self._inner.throw(typ)
        finally:
            unsuppress(token)

    def close(self) -> None:
        token = suppress()
        try:
            self._inner.close()
        finally:
            unsuppress(token)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class SuppressedAsyncGenerator(AsyncGenerator):  # type: ignore[misc]
    """The async generator of an ``enable_rl=False`` instance (see :class:`SuppressedGenerator`)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: AsyncGenerator[Any, Any]) -> None:
        self._inner = inner

    def __aiter__(self) -> SuppressedAsyncGenerator:
        return self

    def __anext__(self) -> Any:
        return self.asend(None)

    async def asend(self, value: Any) -> Any:
        token = suppress()
        try:
            return await self._inner.asend(value)
        finally:
            unsuppress(token)

    async def athrow(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        token = suppress()
        try:
            if val is None and tb is None:
                return await self._inner.athrow(typ)
            return await self._inner.athrow(typ, val, tb)
        finally:
            unsuppress(token)

    async def aclose(self) -> None:
        token = suppress()
        try:
            await self._inner.aclose()
        finally:
            unsuppress(token)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
