"""One traced call: its span, its rollout, and how its context is entered on each resume.

Contract:

* :func:`start_call` returns a :class:`CallRecord` with a started span, or ``None`` when the call
  must run straight through: recording disabled (globally, for the instance, or inside a call of
  a disabled instance), the immediately enclosing span is the same wrapper for the same call
  (``super().chat()`` of an instrumented override), or our bookkeeping failed.
* An agent call made outside any rollout opens an implicit rollout: its span is the rollout root
  (``agent_rl.rollout.root=true``) and the rollout hooks fire.
* :meth:`CallRecord.activate` / :meth:`CallRecord.deactivate` bracket every resume of the user's
  code (the whole call for functions, each ``next``/``send``/``throw`` for streams): the span is
  the current span and the call's rollout the current rollout only while user code runs.
* :meth:`CallRecord.finish` ends the span exactly once. No method here raises.
"""

from __future__ import annotations

import contextvars
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from opentelemetry import context as otel_context
from opentelemetry import trace

from agent_rl_plugin import tracing
from agent_rl_plugin.context import current_rollout_now, set_current_now
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.instrumentation import context as rl_context
from agent_rl_plugin.instrumentation.spans import (
    end_span,
    log_failure,
    max_size,
    record_error,
    set_attributes,
    set_clean_attributes,
    to_json_text,
)
from agent_rl_plugin.lean_spans import runtime_context_var
from agent_rl_plugin.semconv import (
    AGENT_ROLE,
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    OP_EXECUTE_TOOL,
    OP_INVOKE_AGENT,
    ROLLOUT_INPUT,
    ROLLOUT_OUTPUT,
    ROLLOUT_ROOT,
    SPAN_KIND,
    SPAN_KIND_AGENT,
    SPAN_KIND_TOOL,
    STREAM_CHUNKS,
    STREAM_OUTCOME,
    TRUNCATION_MARKER,
)
from agent_rl_plugin.serialize import to_json

#: Instance attribute that switches recording off for one object (set by ``enable_rl=False``).
INSTANCE_FLAG = "_agent_rl_enabled"

_STATE = tracing.STATE

_RUNTIME_VAR = runtime_context_var()
_attach: Callable[[Any], Any] = _RUNTIME_VAR.set if _RUNTIME_VAR is not None else otel_context.attach
_detach: Callable[[Any], Any] = _RUNTIME_VAR.reset if _RUNTIME_VAR is not None else otel_context.detach


def _span_context_builder() -> Callable[[trace.Span], otel_context.Context]:
    """``trace.set_span_in_context`` (the current context plus the span), built in one step
    from the runtime's ContextVar when :func:`_runtime_context_var` found it and the span key
    is the one ``set_span_in_context`` uses (checked on a probe); otherwise the API itself."""
    try:
        from opentelemetry.trace import propagation

        key = getattr(propagation, "_SPAN_KEY", None)
        var = _RUNTIME_VAR
        if var is None or not isinstance(key, str):
            return trace.set_span_in_context
        get = var.get
        context_type = otel_context.Context

        def with_span(span: trace.Span) -> otel_context.Context:
            return context_type({**get(), key: span})

        probe = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
        token = var.set(context_type({"agent_rl.probe": 1}))
        try:
            same = (
                with_span(probe) == trace.set_span_in_context(probe)
                and trace.get_current_span(with_span(probe)) is probe
            )
        finally:
            var.reset(token)
        return with_span if same else trace.set_span_in_context
    except Exception:
        return trace.set_span_in_context


_context_with_span = _span_context_builder()

_MISSING: Any = object()

# (call key, span) of the traced call whose user code is running now.
_ACTIVE_CALL: contextvars.ContextVar[tuple[tuple[Any, ...], trace.Span] | None] = contextvars.ContextVar(
    "agent_rl_active_call", default=None
)
# True inside a call of an instance created with enable_rl=False.
_SUPPRESSED: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_rl_suppressed", default=False)


def is_suppressed() -> bool:
    """True inside a call of an instance whose recording is switched off."""
    return _SUPPRESSED.get()


def suppress() -> contextvars.Token[bool]:
    """Switch recording off for the running context; undo with :func:`unsuppress`."""
    return _SUPPRESSED.set(True)


def unsuppress(token: contextvars.Token[bool]) -> None:
    """Undo :func:`suppress`. Never raises."""
    try:
        _SUPPRESSED.reset(token)
    except Exception:
        log_failure("restoring the suppression flag")


def is_recording() -> bool:
    """Whether a span started now would be recorded: recording is on (configuring from the
    environment on first use) and not suppressed in the running context. Never raises (a failed
    configuration is logged once and reads as ``False``)."""
    if not tracing.STATE.enabled or _SUPPRESSED.get():
        return False
    try:
        tracing.get_tracer()
    except Exception:
        log_failure("configuring tracing")
        return False
    return tracing.is_enabled()


@dataclass(frozen=True)
class WrapSpec:
    """How calls of one wrapped callable are recorded.

    ``kind`` is ``"agent"`` or ``"tool"``; ``name`` the agent/tool name, or ``None`` to use the
    class name of the bound instance (mixins, ``instrument``); ``has_self`` says the first
    positional argument is ``self``/``cls`` (dropped from the recorded input).
    """

    kind: str
    name: str
    func_name: str
    has_self: bool
    name_from_instance: bool = False
    role: str = "agent"
    signature: inspect.Signature | None = None
    #: Parameter names when every parameter is positional (no ``*args``, ``**kwargs`` or
    #: keyword-only): a call with exactly that many positional arguments binds by ``zip``.
    positional_names: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    #: The span name and the leading attributes every call records, computed once; ``None``
    #: when they depend on the bound instance (``name_from_instance``).
    span_name: str | None = field(init=False, repr=False, compare=False)
    static_attributes: dict[str, Any] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names: tuple[str, ...] | None = None
        if self.signature is not None:
            params = tuple(self.signature.parameters.values())
            if all(p.kind in _POSITIONAL for p in params):
                names = tuple(p.name for p in params)
        object.__setattr__(self, "positional_names", names)
        span_name: str | None = None
        static: dict[str, Any] | None = None
        if not self.name_from_instance:
            span_name, static = leading_attributes(self, self.name)
        object.__setattr__(self, "span_name", span_name)
        object.__setattr__(self, "static_attributes", static)


def leading_attributes(spec: WrapSpec, name: str) -> tuple[str, dict[str, Any]]:
    """The span name and the attributes every call of ``spec`` named ``name`` starts with, in
    the order they are recorded (the caller copies the dict before adding to it)."""
    if spec.kind == SPAN_KIND_AGENT:
        return f"{OP_INVOKE_AGENT} {name}", {
            GEN_AI_OPERATION_NAME: OP_INVOKE_AGENT,
            GEN_AI_AGENT_NAME: name,
            SPAN_KIND: SPAN_KIND_AGENT,
            AGENT_ROLE: spec.role,
        }
    return f"{OP_EXECUTE_TOOL} {name}", {
        GEN_AI_OPERATION_NAME: OP_EXECUTE_TOOL,
        SPAN_KIND: SPAN_KIND_TOOL,
        GEN_AI_TOOL_NAME: name,
    }


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def instance_of(spec: WrapSpec, args: tuple[Any, ...]) -> Any:
    """The bound ``self``/``cls`` of a call, or ``None``."""
    return args[0] if spec.has_self and args else None


def instance_disabled(instance: Any) -> bool:
    """True when ``instance`` was created with ``enable_rl=False``. Never raises."""
    if instance is None:
        return False
    try:
        return instance.__dict__.get(INSTANCE_FLAG, True) is False
    except Exception:  # no __dict__ (slots), odd __getattribute__
        return False


class CallRecord:
    """The span of one traced call and the context to enter around its user code."""

    __slots__ = (
        "spec", "span", "ctx", "rollout", "implicit", "key", "finished",
        "chunks", "parts", "text_len", "text_bytes", "capture",
    )  # fmt: skip

    def __init__(
        self,
        spec: WrapSpec,
        span: trace.Span,
        rollout: rl_context.RolloutInfo | None,
        implicit: bool,
        key: tuple[Any, ...] | None,
        capture: bool,
    ) -> None:
        self.spec = spec
        self.span = span
        self.ctx = _context_with_span(span)
        self.rollout = rollout
        self.implicit = implicit
        self.key = key
        self.finished = False
        self.capture = capture
        self.chunks = 0
        self.parts: list[str] = []
        self.text_len = 0
        self.text_bytes = 0

    # --- context around user code -----------------------------------------------------------
    def activate(self) -> tuple[Any, Any, Any]:
        """Make this call's span and rollout current; returns tokens for :meth:`deactivate`."""
        try:
            otel_token = _attach(self.ctx)
            rollout = self.rollout
            rollout_token = set_current_now(rollout) if current_rollout_now() is not rollout else None
            call_token = _ACTIVE_CALL.set((self.key, self.span)) if self.key is not None else None
            return otel_token, rollout_token, call_token
        except Exception:
            log_failure("entering a traced call's context")
            return None, None, None

    def deactivate(self, tokens: tuple[Any, Any, Any]) -> None:
        """Undo :meth:`activate`. Never raises."""
        otel_token, rollout_token, call_token = tokens
        if call_token is not None:
            try:
                _ACTIVE_CALL.reset(call_token)
            except Exception:
                log_failure("leaving a traced call's context")
        if rollout_token is not None:
            rl_context.reset_current(rollout_token)  # never raises
        if otel_token is not None:
            try:
                _detach(otel_token)
            except Exception:
                log_failure("detaching a traced call's span")

    # --- results ------------------------------------------------------------------------------
    def add_chunk(self, chunk: Any) -> None:
        """Count one streamed chunk and keep its text (up to the attribute size)."""
        self.chunks += 1
        if not self.capture:
            return
        try:
            text = chunk_text(chunk)
            if text:
                self.text_bytes += len(text.encode("utf-8", errors="replace"))
                limit = max_size()
                if self.text_len <= limit:
                    self.parts.append(text[: limit + 1 - self.text_len])
                self.text_len += len(text)
        except Exception:
            log_failure("reading a streamed chunk")

    def finish(
        self,
        result: Any = _MISSING,
        exc: BaseException | None = None,
        outcome: str | None = None,
    ) -> None:
        """Record the result or error (and stream outcome), fire rollout-end, end the span."""
        if self.finished:
            return
        self.finished = True
        span = self.span
        try:
            output_key = ROLLOUT_OUTPUT if self.spec.kind == SPAN_KIND_AGENT else GEN_AI_TOOL_CALL_RESULT
            if outcome is not None:
                attributes: dict[str, Any] = {STREAM_CHUNKS: self.chunks, STREAM_OUTCOME: outcome}
                if self.capture:
                    attributes[output_key] = self._stream_text()
                set_attributes(span, attributes)
            elif result is not _MISSING and self.capture:
                set_clean_attributes(span, {output_key: to_json_text(result)})
            if exc is not None:
                record_error(span, exc)
            if self.implicit and self.rollout is not None and rl_context.has_rollout_hooks():
                closed = outcome in ("closed", "collected")
                status = rl_context.rollout_status(exc, closed=closed)
                rl_context.fire_rollout_end(self.rollout, status, exc)
        except Exception:
            log_failure("finishing a traced call")
        finally:
            end_span(span)

    def _stream_text(self) -> str:
        """The streamed text as a JSON string, cut like any attribute (the marker counts the
        UTF-8 bytes of the whole text, quotes included)."""
        limit = max_size()
        text = to_json("".join(self.parts))
        if self.text_len > limit or len(text) > limit:
            return text[:limit] + TRUNCATION_MARKER.format(original=self.text_bytes + 2)
        return text


def chunk_text(chunk: Any) -> str | None:
    """The text a streamed chunk contributes: a str, a str ``.content`` or ``["content"]``."""
    if isinstance(chunk, str):
        return chunk
    if isinstance(chunk, dict):
        content = chunk.get("content")
        return content if isinstance(content, str) else None
    content = getattr(chunk, "content", None)
    return content if isinstance(content, str) else None


def start_call(spec: WrapSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallRecord | None:
    """Start recording one call, or return ``None`` to run it straight through. Never raises."""
    if _SUPPRESSED.get():
        return None
    instance = args[0] if spec.has_self and args else None
    key = None
    if instance is not None:
        if instance_disabled(instance):
            return None
        key = (spec.kind, spec.func_name, id(instance))
        active = _ACTIVE_CALL.get()
        if active is not None and active[0] == key and active[1] is trace.get_current_span():
            return None  # the same method again (override calling super()): one span
    try:
        tracer = _STATE.tracer or tracing.get_tracer()
        if not _STATE.enabled:
            return None
        return _start(tracer, spec, instance, key, args, kwargs)
    except Exception:
        log_failure("starting a traced call")
        return None


def _start(
    tracer: trace.Tracer,
    spec: WrapSpec,
    instance: Any,
    key: tuple[Any, ...] | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> CallRecord:
    """Start the call's span (see :func:`start_call`): the leading attributes, then the agent
    id, input and messages (agents) or call id and arguments (tools), then, for an agent call
    outside any rollout, the implicit rollout's root flag and id."""
    config = _STATE.config or tracing.current_config()
    capture = config.capture_content
    static = spec.static_attributes
    if static is None or spec.span_name is None:
        name = display_name(spec, instance)
        span_name, static = leading_attributes(spec, name)
    else:
        name, span_name = spec.name, spec.span_name
    attributes = static.copy()
    is_agent = spec.kind == SPAN_KIND_AGENT
    if is_agent:
        if instance is not None:
            agent_id = _agent_id(instance)
            if agent_id is not None:
                attributes[GEN_AI_AGENT_ID] = agent_id
        if capture:
            arguments = bound_arguments(spec, args, kwargs)
            attributes[ROLLOUT_INPUT] = to_json_text(arguments)
            messages = arguments.get("messages")
            if isinstance(messages, list):
                attributes[GEN_AI_INPUT_MESSAGES] = to_json_text(messages)
    else:
        attributes[GEN_AI_TOOL_CALL_ID] = new_id()
        if capture:
            attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = to_json_text(bound_arguments(spec, args, kwargs))

    rollout = current_rollout_now()
    implicit = False
    if rollout is None and is_agent:
        rollout = rl_context.implicit_rollout(name)
        implicit = True
        attributes[ROLLOUT_ROOT] = True
        attributes.update(rollout.attributes)
        # The span carries the new rollout's ids itself: our processor stamps the *current*
        # rollout's ids only on spans that lack them, so the rollout need not be current yet.
    span = tracing.start_with_attributes(tracer, span_name, attributes)
    record = CallRecord(spec, span, rollout, implicit, key, capture)
    if implicit and rl_context.has_rollout_hooks():
        tokens = record.activate()
        try:
            rl_context.fire_rollout_start(rollout)  # type: ignore[arg-type]
        finally:
            record.deactivate(tokens)
    return record


def display_name(spec: WrapSpec, instance: Any) -> str:
    """The agent/tool name: fixed, or the class name of the bound instance."""
    if spec.name_from_instance and instance is not None:
        cls = instance if isinstance(instance, type) else type(instance)
        return cls.__name__
    return spec.name


def _agent_id(instance: Any) -> str | None:
    if instance is None or isinstance(instance, type):
        return None
    try:
        value = getattr(instance, "agent_id", None)
    except Exception:
        return None
    return None if value is None or callable(value) else str(value)


def bound_arguments(spec: WrapSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter name, without ``self``/``cls``.

    Falls back to ``{"args": [...], "kwargs": {...}}`` when the signature is unknown or the
    arguments do not bind (the call itself will then raise ``TypeError``).
    """
    names = spec.positional_names
    if names is not None and not kwargs and len(args) == len(names):
        # What Signature.bind gives for this call, without its general machinery.
        if spec.has_self:
            return dict(zip(names[1:], args[1:]))
        return dict(zip(names, args))
    positional = args[1:] if spec.has_self else args
    if spec.signature is not None:
        try:
            bound = spec.signature.bind(*args, **kwargs)
            arguments = dict(bound.arguments)
            if spec.has_self and arguments:
                arguments.pop(next(iter(spec.signature.parameters)), None)
            return arguments
        except (TypeError, ValueError):
            pass
    return {"args": list(positional), "kwargs": dict(kwargs)}


def signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    """``inspect.signature(func)`` or ``None``."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None
