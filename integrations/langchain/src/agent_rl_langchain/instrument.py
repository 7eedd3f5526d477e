"""``instrument_langchain()``: record every LangChain/LangGraph run in the process.

LangChain builds each run's callback manager in ``CallbackManager.configure``, which also adds
the handlers of every *configure hook* (``langchain_core.tracers.context.register_configure_hook``,
the mechanism LangSmith's tracer uses). :func:`instrument_langchain` registers one hook, once per
process, whose variable is process-wide (not a ``ContextVar``): threads and asyncio tasks
started anywhere see it. The hook adds the handler as an *inheritable* handler of every
top-level run, unless an :class:`AgentRLCallbackHandler` was passed in ``config["callbacks"]``
already (no double recording).
"""

from __future__ import annotations

import threading
from typing import Any

from agent_rl_langchain.handler import AgentRLCallbackHandler

__all__ = ["instrument_langchain", "uninstrument_langchain", "global_handler"]


class _ProcessWideHandler:
    """What ``register_configure_hook`` reads with ``.get()``: the installed handler or None."""

    def __init__(self) -> None:
        self.handler: AgentRLCallbackHandler | None = None

    def get(self) -> AgentRLCallbackHandler | None:
        return self.handler


_GLOBAL = _ProcessWideHandler()
_registered = False
_lock = threading.Lock()


def instrument_langchain(rl_config: Any = None, **options: Any) -> AgentRLCallbackHandler:
    """Record every LangChain run of the process with a new :class:`AgentRLCallbackHandler`
    (``rl_config`` and ``options`` as for the handler); returns it. Calling it again replaces
    the handler. Undo with :func:`uninstrument_langchain`."""
    global _registered
    from langchain_core.tracers.context import register_configure_hook

    handler = AgentRLCallbackHandler(rl_config, **options)
    with _lock:
        if not _registered:
            register_configure_hook(_GLOBAL, True, AgentRLCallbackHandler)  # type: ignore[arg-type]
            _registered = True
        _GLOBAL.handler = handler
    return handler


def uninstrument_langchain() -> None:
    """Stop recording runs that were not given a handler explicitly (runs already started
    keep theirs until they end)."""
    _GLOBAL.handler = None


def global_handler() -> AgentRLCallbackHandler | None:
    """The handler :func:`instrument_langchain` installed, if any."""
    return _GLOBAL.handler
