"""``@trace_agent`` and ``@trace_tool``: record calls of a function or method.

Both work bare (``@trace_agent``) or with arguments (``@trace_agent(name="planner")``), on sync
functions, coroutine functions, generator and async-generator functions, methods (including
``classmethod``/``staticmethod`` objects, in either decorator order) and ``functools.partial``
objects. The decorated callable behaves exactly like the original (see
:mod:`agent_rl_plugin.instrumentation.wrappers`); decorating twice gives one span.

* ``trace_agent``: span ``invoke_agent {name}`` (``name`` defaults to the function's
  ``__name__``); outside any rollout the call opens an implicit rollout.
* ``trace_tool``: span ``execute_tool {name}`` with the tool call's arguments and result.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, overload

from agent_rl_plugin.instrumentation.wrappers import wrap
from agent_rl_plugin.semconv import SPAN_KIND_AGENT, SPAN_KIND_TOOL

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["trace_agent", "trace_tool"]


@overload
def trace_agent(func: F, *, name: str | None = None) -> F: ...
@overload
def trace_agent(func: None = None, *, name: str | None = None) -> Callable[[F], F]: ...
def trace_agent(func: Any = None, *, name: str | None = None) -> Any:
    """Record each call of ``func`` as an agent invocation (``invoke_agent {name}``)."""
    if func is None:
        return lambda f: wrap(f, kind=SPAN_KIND_AGENT, name=name)
    return wrap(func, kind=SPAN_KIND_AGENT, name=name)


@overload
def trace_tool(func: F, *, name: str | None = None) -> F: ...
@overload
def trace_tool(func: None = None, *, name: str | None = None) -> Callable[[F], F]: ...
def trace_tool(func: Any = None, *, name: str | None = None) -> Any:
    """Record each call of ``func`` as a tool execution (``execute_tool {name}``)."""
    if func is None:
        return lambda f: wrap(f, kind=SPAN_KIND_TOOL, name=name)
    return wrap(func, kind=SPAN_KIND_TOOL, name=name)
