"""Wrapping callables so each call is recorded, without changing what the call does.

Contract of :func:`wrap`:

* The wrapper returns what the original returns and raises what it raises (same object, same
  traceback plus the wrapper's own frame above the user's frames).
* ``__name__``, ``__qualname__``, ``__doc__``, ``__module__``, ``__wrapped__`` and
  ``inspect.signature`` are those of the original, and so are ``inspect.iscoroutinefunction``,
  ``isgeneratorfunction`` and ``isasyncgenfunction``: coroutine functions get an ``async def``
  wrapper; generator and async-generator functions get a function-like object
  (:class:`StreamFunction`) whose calls return a :mod:`~agent_rl_plugin.instrumentation.streams`
  proxy, so the span can also end when the generator is garbage-collected.
* ``classmethod``/``staticmethod`` objects are unwrapped, their function wrapped, and re-wrapped
  in the same descriptor type; a bound method is wrapped as its function and bound again.
* Wrapping something already wrapped (marked with ``__agent_rl_wrapped__``) returns it as is.
* A sync function whose *result* is a generator, async generator or coroutine (a plain ``def``
  returning ``agen()``) gets the matching proxy, so its span covers the real work.
* When recording is off (``enable_rl=False``) the wrapper calls straight through after one
  bool check.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, Coroutine

from agent_rl_plugin import tracing
from agent_rl_plugin.instrumentation.calls import (
    CallRecord,
    WrapSpec,
    instance_disabled,
    instance_of,
    signature_of,
    start_call,
    suppress,
    unsuppress,
)
from agent_rl_plugin.instrumentation.streams import (
    AsyncGeneratorProxy,
    GeneratorProxy,
    SuppressedAsyncGenerator,
    SuppressedGenerator,
)

#: Attribute set on every wrapper we create; its value is the :class:`WrapSpec`.
WRAPPED_MARK = "__agent_rl_wrapped__"

_STATE = tracing.STATE


def underlying(obj: Any) -> Any:
    """``obj`` without classmethod/staticmethod/bound-method/partial layers."""
    seen = 0
    while seen < 16:
        seen += 1
        if isinstance(obj, (classmethod, staticmethod, types.MethodType)):
            obj = obj.__func__
        elif isinstance(obj, functools.partial):
            obj = obj.func
        else:
            return obj
    return obj


def is_wrapped(obj: Any) -> bool:
    """True when ``obj`` (or the function inside a descriptor/partial/bound method) is ours."""
    seen = 0
    while seen < 16:
        seen += 1
        try:
            if isinstance(getattr(obj, WRAPPED_MARK, None), WrapSpec):
                return True
        except Exception:  # an odd __getattr__
            return False
        if isinstance(obj, (classmethod, staticmethod, types.MethodType)):
            obj = obj.__func__
        elif isinstance(obj, functools.partial):
            obj = obj.func
        else:
            return False
    return False


def wrap(
    target: Any,
    *,
    kind: str,
    name: str | None = None,
    role: str = "agent",
    has_self: bool | None = None,
    name_from_instance: bool = False,
) -> Any:
    """Return a recording wrapper of ``target`` (see the module contract).

    ``kind`` is ``"agent"`` or ``"tool"``; ``name`` defaults to the function's ``__name__``;
    ``has_self=None`` guesses from the first parameter's name (``self``/``cls``);
    ``name_from_instance=True`` names agent spans after the bound instance's class at call time.
    """
    if is_wrapped(target):
        return target
    if isinstance(target, classmethod):
        return classmethod(
            wrap(target.__func__, kind=kind, name=name, role=role, has_self=True,
                 name_from_instance=name_from_instance)
        )  # fmt: skip
    if isinstance(target, staticmethod):
        return staticmethod(wrap(target.__func__, kind=kind, name=name, role=role, has_self=False))
    if isinstance(target, types.MethodType):
        wrapped = wrap(target.__func__, kind=kind, name=name, role=role, has_self=True,
                       name_from_instance=name_from_instance)  # fmt: skip
        return types.MethodType(wrapped, target.__self__)
    if not callable(target):
        raise TypeError(f"agent-rl can only trace callables, got {type(target).__name__}")

    base = underlying(target)
    func_name = getattr(target, "__name__", None) or getattr(base, "__name__", None)
    func_name = func_name or type(target).__name__
    signature = signature_of(target)
    if has_self is None:
        has_self = _first_param_is_self(signature)
    spec = WrapSpec(
        kind=kind,
        name=name or func_name,
        func_name=func_name,
        has_self=has_self,
        name_from_instance=name_from_instance,
        role=role,
        signature=signature,
    )
    if inspect.isasyncgenfunction(target):
        return StreamFunction(target, spec, AsyncGeneratorProxy)
    if inspect.isgeneratorfunction(target):
        return StreamFunction(target, spec, GeneratorProxy)
    if inspect.iscoroutinefunction(target):
        wrapper: Any = _async_wrapper(target, spec)
    else:
        wrapper = _sync_wrapper(target, spec)
    if not hasattr(target, "__name__"):  # a partial or a callable object
        wrapper.__name__ = func_name
        wrapper.__qualname__ = getattr(base, "__qualname__", func_name)
    setattr(wrapper, WRAPPED_MARK, spec)
    return wrapper


def _first_param_is_self(signature: inspect.Signature | None) -> bool:
    if signature is None or not signature.parameters:
        return False
    first = next(iter(signature.parameters.values()))
    return first.name in ("self", "cls") and first.kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


def _sync_wrapper(func: Callable[..., Any], spec: WrapSpec) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _STATE.enabled:
            return func(*args, **kwargs)
        record = start_call(spec, args, kwargs)
        if record is None:
            return _call_through(func, spec, args, kwargs)
        tokens = record.activate()
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            record.finish(exc=exc)
            raise
        else:
            cls = type(result)  # these three types cannot be subclassed: `is` is isinstance
            if cls is types.GeneratorType or cls is types.AsyncGeneratorType or cls is types.CoroutineType:
                result = _finish_or_proxy(record, result)
            else:
                record.finish(result=result)
        finally:
            record.deactivate(tokens)
        return result

    return wrapper


def _async_wrapper(func: Callable[..., Any], spec: WrapSpec) -> Callable[..., Any]:
    @functools.wraps(func)
    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _STATE.enabled:
            return await func(*args, **kwargs)
        record = start_call(spec, args, kwargs)
        if record is None:
            if _suppressing(spec, args):
                return await _await_suppressed(func(*args, **kwargs))
            return await func(*args, **kwargs)
        tokens = record.activate()
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            record.finish(exc=exc)
            raise
        else:
            record.finish(result=result)
        finally:
            record.deactivate(tokens)
        return result

    return async_wrapper


class StreamFunction:
    """A function-like wrapper of a generator or async-generator function.

    It carries the original's ``__code__``/``__defaults__``/``__kwdefaults__`` so ``inspect``
    reports it as a generator (async generator) function, binds like a function when stored on
    a class, and returns a traced proxy of the generator the original returns.
    """

    def __init__(self, func: Callable[..., Any], spec: WrapSpec, proxy: type) -> None:
        functools.update_wrapper(self, func)
        base = underlying(func)
        self.__code__ = base.__code__
        self.__defaults__ = getattr(base, "__defaults__", None)
        self.__kwdefaults__ = getattr(base, "__kwdefaults__", None)
        if not isinstance(getattr(self, "__name__", None), str):
            self.__name__ = spec.func_name
        self._func = func
        self._spec = spec
        self._proxy = proxy
        setattr(self, WRAPPED_MARK, spec)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        func = self._func
        if not _STATE.enabled:
            return func(*args, **kwargs)
        record = start_call(self._spec, args, kwargs)
        if record is None:
            if _suppressing(self._spec, args):
                return _suppressed_stream(_call_through(func, self._spec, args, kwargs))
            return func(*args, **kwargs)
        tokens = record.activate()
        try:
            inner = func(*args, **kwargs)
        except BaseException as exc:
            record.finish(exc=exc)
            raise
        finally:
            record.deactivate(tokens)
        return self._proxy(inner, record)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self, instance)

    def __repr__(self) -> str:
        return f"<traced {self._func!r}>"


def _finish_or_proxy(record: CallRecord, result: Any) -> Any:
    if isinstance(result, types.GeneratorType):
        return GeneratorProxy(result, record)
    if isinstance(result, types.AsyncGeneratorType):
        return AsyncGeneratorProxy(result, record)
    if isinstance(result, types.CoroutineType):
        return _await_recorded(result, record)
    record.finish(result=result)
    return result


async def _await_recorded(coro: Coroutine[Any, Any, Any], record: CallRecord) -> Any:
    tokens = record.activate()
    try:
        result = await coro
    except BaseException as exc:
        record.finish(exc=exc)
        raise
    else:
        record.finish(result=result)
    finally:
        record.deactivate(tokens)
    return result


# --- instances created with enable_rl=False ---------------------------------------------------
def _suppressing(spec: WrapSpec, args: tuple[Any, ...]) -> bool:
    return instance_disabled(instance_of(spec, args))


def _call_through(func: Callable[..., Any], spec: WrapSpec, args: Any, kwargs: Any) -> Any:
    """Run a call unrecorded; for a disabled instance, nothing inside it is recorded either."""
    if not _suppressing(spec, args):
        return func(*args, **kwargs)
    token = suppress()
    try:
        return func(*args, **kwargs)
    finally:
        unsuppress(token)


def _suppressed_stream(result: Any) -> Any:
    """The generator of a disabled instance, with recording off around each resume."""
    if isinstance(result, types.GeneratorType):
        return SuppressedGenerator(result)
    if isinstance(result, types.AsyncGeneratorType):
        return SuppressedAsyncGenerator(result)
    return result


async def _await_suppressed(coro: Coroutine[Any, Any, Any]) -> Any:
    token = suppress()
    try:
        return await coro
    finally:
        unsuppress(token)
