"""The rollout context: which episode the running code belongs to.

Contract:

* The active rollout (:class:`RolloutInfo`, :func:`current_rollout`, :func:`set_current`,
  :func:`reset_current`, :func:`current_rollout_attributes`) lives in the leaf module
  :mod:`agent_rl_plugin.context`, so the tracing layer can read it; those names are re-exported
  here unchanged.
* :func:`rollout` opens an explicit rollout (``with`` and ``async with``): a span
  ``rollout {task_id}`` that is the current span inside the block, the ``agent_rl_rollout_start``
  / ``agent_rl_rollout_end`` hooks, and the exception of the block recorded on the span and
  re-raised unchanged. A nested ``rollout()`` starts a new rollout (child span, its own id).
* Hook implementations that raise are logged and swallowed.
"""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import Any, Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace

from agent_rl_plugin import plugins as _plugins
from agent_rl_plugin import tracing
from agent_rl_plugin.context import (
    RolloutInfo,
    current_rollout,
    current_rollout_attributes,
    reset_current,
    set_current,
)
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.instrumentation.spans import end_span, is_cancellation, log_failure, record_error
from agent_rl_plugin.semconv import (
    CANCELLED,
    ROLLOUT_ID,
    ROLLOUT_METADATA,
    ROLLOUT_ROOT,
    SPAN_KIND,
    SPAN_KIND_ROLLOUT,
)
from agent_rl_plugin.serialize import to_json_attribute

__all__ = [
    "RolloutInfo",
    "current_rollout",
    "current_rollout_attributes",
    "set_current",
    "reset_current",
    "rollout",
    "RolloutScope",
    "rollout_status",
    "implicit_rollout",
    "fire_rollout_start",
    "fire_rollout_end",
]


def rollout_status(exc: BaseException | None, closed: bool = False) -> str:
    """``"ok"``, ``"error"`` or ``"cancelled"`` for how a rollout ended.

    Cancellation (:class:`asyncio.CancelledError`), ``GeneratorExit`` and a stream closed
    early or garbage-collected (``closed=True``) count as ``"cancelled"``.
    """
    if exc is None:
        return "cancelled" if closed else "ok"
    if is_cancellation(exc) or isinstance(exc, GeneratorExit):
        return "cancelled"
    return "error"


def implicit_rollout(name: str | None) -> RolloutInfo:
    """``RolloutInfo(name=name, implicit=True)``, built without the frozen dataclass's
    ``__init__`` (one ``__dict__`` update instead of a guarded set per field): same fields, same
    order, same cached ``attributes``."""
    rollout_id = new_id()
    info = object.__new__(RolloutInfo)
    info.__dict__.update(
        rollout_id=rollout_id,
        task_id=None,
        group_id=None,
        metadata={},
        name=name,
        implicit=True,
        attributes={ROLLOUT_ID: rollout_id},
    )
    return info


def _has_impls(caller: Any) -> bool:
    impls = getattr(caller, "_hookimpls", None)  # pluggy's list; get_hookimpls() copies it
    if isinstance(impls, list):
        return bool(impls)
    return bool(caller.get_hookimpls())


# (plugin manager, its rollout-start hook's implementation list, rollout-end's): pluggy keeps
# one list per hook and registers/unregisters in place, so the lists stay current.
_ROLLOUT_IMPLS: tuple[Any, Any, Any] = (None, None, None)


def has_rollout_hooks() -> bool:
    """Whether any ``agent_rl_rollout_start``/``_end`` hook is registered (most processes
    have none: callers then skip entering the call's context for them). True when unsure."""
    global _ROLLOUT_IMPLS
    try:
        pm = _plugins.get_plugin_manager()
        cached = _ROLLOUT_IMPLS
        if cached[0] is not pm:
            hook = pm.hook
            start = getattr(hook.agent_rl_rollout_start, "_hookimpls", None)
            end = getattr(hook.agent_rl_rollout_end, "_hookimpls", None)
            if not (isinstance(start, list) and isinstance(end, list)):  # another pluggy
                return _has_impls(hook.agent_rl_rollout_start) or _has_impls(hook.agent_rl_rollout_end)
            cached = _ROLLOUT_IMPLS = (pm, start, end)
        return bool(cached[1] or cached[2])
    except Exception:
        return True


def fire_rollout_start(info: RolloutInfo) -> None:
    """Call the ``agent_rl_rollout_start`` hook; failures are logged and swallowed."""
    try:
        caller = _plugins.get_plugin_manager().hook.agent_rl_rollout_start
        if _has_impls(caller):  # most processes have none: skip pluggy's call machinery
            caller(rollout=info)
    except Exception:
        log_failure("an agent_rl_rollout_start hook")


def fire_rollout_end(info: RolloutInfo, status: str, error: BaseException | None) -> None:
    """Call the ``agent_rl_rollout_end`` hook; failures are logged and swallowed."""
    try:
        caller = _plugins.get_plugin_manager().hook.agent_rl_rollout_end
        if _has_impls(caller):
            caller(rollout=info, status=status, error=error)
    except Exception:
        log_failure("an agent_rl_rollout_end hook")


class RolloutScope:
    """The object :func:`rollout` returns; ``with``/``async with`` it once.

    Entering returns the :class:`RolloutInfo`. When recording is disabled the rollout is still
    made current (so :func:`current_rollout` works) but no span is started and no hook fires.
    """

    def __init__(self, info: RolloutInfo) -> None:
        self.info = info
        self._span: trace.Span | None = None
        self._rollout_token: contextvars.Token[RolloutInfo | None] | None = None
        self._otel_token: object | None = None

    # --- sync -----------------------------------------------------------------------------
    def __enter__(self) -> RolloutInfo:
        info = self.info
        self._rollout_token = set_current(info)  # before the span: the processor stamps ids
        if not tracing.is_enabled():
            return info
        try:
            tracer = tracing.get_tracer()
            if not tracing.is_enabled():
                return info
            max_size = tracing.current_config().max_attribute_size
            attributes: dict[str, Any] = {
                SPAN_KIND: SPAN_KIND_ROLLOUT,
                ROLLOUT_ROOT: True,
                **info.attributes,
                ROLLOUT_METADATA: to_json_attribute(info.metadata, max_size),
            }
            name = f"rollout {info.task_id}" if info.task_id is not None else "rollout"
            span = tracer.start_span(name, attributes=attributes)
            self._span = span
            self._otel_token = otel_context.attach(trace.set_span_in_context(span))
        except Exception:
            log_failure("starting a rollout span")
            return info
        fire_rollout_start(info)
        return info

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self._span
        try:
            if span is not None:
                if exc is not None:
                    record_error(span, exc)
                    if isinstance(exc, GeneratorExit):
                        span.set_attribute(CANCELLED, True)
                fire_rollout_end(self.info, rollout_status(exc), exc)
        except Exception:
            log_failure("ending a rollout")
        finally:
            if self._otel_token is not None:
                try:
                    otel_context.detach(self._otel_token)  # type: ignore[arg-type]
                except Exception:
                    log_failure("detaching the rollout span")
                self._otel_token = None
            if span is not None:
                end_span(span)
                self._span = None
            if self._rollout_token is not None:
                reset_current(self._rollout_token)
                self._rollout_token = None
        return None

    # --- async ----------------------------------------------------------------------------
    async def __aenter__(self) -> RolloutInfo:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def rollout(
    task_id: str | None = None,
    group_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    name: str | None = None,
    rollout_id: str | None = None,
) -> RolloutScope:
    """Open a rollout (one episode) for the ``with`` / ``async with`` block.

    ``task_id`` names the task (rollouts of one task are compared), ``group_id`` the group
    (GRPO/GiGPO normalise rewards within a group), ``metadata`` is stored as JSON on the rollout
    span, ``rollout_id`` defaults to a new 32-hex id. Exceptions of the block are recorded on the
    rollout span and propagate unchanged::

        with rollout(task_id="t1", group_id="g1") as info:
            agent.run("...")
            emit_reward(1.0)
    """
    info = RolloutInfo(
        rollout_id=str(rollout_id) if rollout_id is not None else new_id(),
        task_id=None if task_id is None else str(task_id),
        group_id=None if group_id is None else str(group_id),
        metadata=dict(metadata) if metadata else {},
        name=name,
    )
    return RolloutScope(info)
