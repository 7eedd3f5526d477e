"""The rollout context: which episode the running code belongs to (a leaf: core imports only).

Contract:

* The active rollout is a :class:`RolloutInfo` held in a :class:`contextvars.ContextVar`, so it
  follows asyncio tasks (``create_task``/``gather`` copy the context) but **not** plain threads or
  ``ThreadPoolExecutor.submit``/``loop.run_in_executor`` (wrap the callable with
  ``contextvars.copy_context().run`` there).
* :func:`current_rollout_attributes` is called by the span processor
  (:mod:`agent_rl_plugin.tracing`) on every span start; it returns a dict cached on the
  :class:`RolloutInfo` (do not mutate it).
* :func:`set_current` / :func:`reset_current` switch the active rollout; :func:`reset_current`
  never raises.
* Opening a rollout (a span plus the rollout hooks) is :func:`agent_rl_plugin.rollout`, in
  :mod:`agent_rl_plugin.instrumentation.context`, which re-exports every name defined here.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field
from typing import Any

from agent_rl_plugin import semconv
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.semconv import GROUP_ID, ROLLOUT_ID, TASK_ID

__all__ = [
    "RolloutInfo",
    "current_rollout",
    "current_rollout_attributes",
    "reset_current",
    "set_current",
]

# The instrumentation layer's logger: a failed reset is reported where other failures are.
logger = logging.getLogger("agent_rl_plugin.instrumentation")


@dataclass(frozen=True)
class RolloutInfo:
    """One episode: its ids and metadata. Treat as read-only (hooks receive it).

    ``implicit`` is True for a rollout opened by a traced agent call made outside any rollout.
    """

    rollout_id: str = field(default_factory=new_id)
    task_id: str | None = None
    group_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    implicit: bool = False
    attributes: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        attrs = {ROLLOUT_ID: self.rollout_id}
        if self.task_id is not None:
            attrs[TASK_ID] = self.task_id
        if self.group_id is not None:
            attrs[GROUP_ID] = self.group_id
        object.__setattr__(self, "attributes", attrs)


_CURRENT: contextvars.ContextVar[RolloutInfo | None] = contextvars.ContextVar("agent_rl_rollout", default=None)


#: :func:`current_rollout` and :func:`set_current` as the ContextVar's own C methods, for the
#: traced call's hot path (no Python frame each): same results.
current_rollout_now = _CURRENT.get
set_current_now = _CURRENT.set


def current_rollout() -> RolloutInfo | None:
    """The rollout the calling code runs in, or ``None``."""
    return _CURRENT.get()


def current_rollout_attributes() -> dict[str, str] | None:
    """``{ROLLOUT_ID, TASK_ID, GROUP_ID}`` (non-None only) of the active rollout, or ``None``.

    The returned dict is shared: callers must not mutate it.
    """
    info = _CURRENT.get()
    return None if info is None else info.attributes


# True while a captured LLM client call runs (agent_rl_plugin.instrumentation.clients): a span
# that another tracer (an SDK's own GenAI tracing) starts meanwhile describes the same call.
_IN_CLIENT_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_rl_in_client_call", default=False)


def in_captured_client_call() -> bool:
    """True while a captured LLM client call runs in this context."""
    return _IN_CLIENT_CALL.get()


def enter_captured_client_call() -> contextvars.Token[bool]:
    """Mark the running context as inside a captured client call; undo with :func:`leave_captured_client_call`."""
    return _IN_CLIENT_CALL.set(True)


def leave_captured_client_call(token: contextvars.Token[bool]) -> None:
    """Undo :func:`enter_captured_client_call`."""
    _IN_CLIENT_CALL.reset(token)


def _is_llm_span(span: Any) -> bool:
    attributes = getattr(span, "attributes", None) or {}
    return (
        attributes.get(semconv.SPAN_KIND) == semconv.SPAN_KIND_LLM
        or attributes.get(semconv.GEN_AI_OPERATION_NAME) in semconv.LLM_OPERATIONS
    )


def mark_covered(span: Any, parent: Any, own_scope: str) -> None:
    """Called for each span as it starts, with its parent span (or ``None``). A span of another
    tracer that starts inside a captured LLM client call, or as the child of an LLM span (a
    framework's own ``chat`` span, ours or any GenAI one), describes the same model call: the
    SDK's own span (the Anthropic SDK emits one per call), an OpenInference or OpenLLMetry
    instrumentor's, an HTTP client's. It gets one attribute, ``agent_rl.covered``, and nothing
    else changes (other exporters see it as its tracer made it); the store's ``covered``
    normaliser then keeps it as a client request, never a second LLM call. Our own spans are
    never marked. Never raises."""
    try:
        scope = getattr(span, "instrumentation_scope", None)
        if scope is None or scope.name == own_scope:
            return
        if not (_IN_CLIENT_CALL.get() or (parent is not None and _is_llm_span(parent))):
            return
        span.set_attribute(semconv.COVERED, semconv.OP_CLIENT_REQUEST)
    except Exception:  # never break span creation
        logger.debug("could not mark a span covered by an LLM call", exc_info=True)


def set_current(info: RolloutInfo | None) -> contextvars.Token[RolloutInfo | None]:
    """Make ``info`` the active rollout (``None``: no rollout); undo with :func:`reset_current`."""
    return _CURRENT.set(info)


_reset_failed_before = False


def reset_current(token: contextvars.Token[RolloutInfo | None]) -> None:
    """Undo :func:`set_current`. Never raises: a token from another context is logged (the
    first time as a warning, then at debug level) and the active rollout is left as it is."""
    global _reset_failed_before
    try:
        _CURRENT.reset(token)
    except Exception:
        try:
            if _reset_failed_before:
                logger.debug("agent-rl: restoring the rollout context failed again", exc_info=True)
            else:
                _reset_failed_before = True
                logger.warning("agent-rl: restoring the rollout context failed; the agent is unaffected", exc_info=True)
        except Exception:  # pragma: no cover - logging itself broken
            pass
