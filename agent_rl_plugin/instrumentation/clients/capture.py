"""One captured LLM client call: what the SDK was asked, what it answered, recorded as one span.

Contract:

* :func:`begin` is called by a patched SDK method before it runs the real call. It returns a
  :class:`ClientCall` when the call should be recorded, or ``None`` (recording off or suppressed,
  client capture paused with :func:`client_capture_paused`, or a framework's own LLM span is the
  current span, so the call is already recorded). It never raises.
* The SDK call itself runs exactly once, outside any ``try`` of ours: its result or exception
  reaches the caller unchanged.
* :meth:`ClientCall.finish` records the call from a :class:`CallResult` (built by the SDK's
  extractor); :meth:`ClientCall.fail` records an exception. Each records at most once, in the
  context that was current when the call began (its rollout and parent span), even when a stream
  is consumed elsewhere. Neither raises: a failing extractor is logged once per site.
* While the real call runs, capture is paused for the running context, so an SDK built on
  another captured SDK (LiteLLM on OpenAI's) records one span, not two.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from opentelemetry import trace

from agent_rl_plugin import context as rl_context
from agent_rl_plugin.instrumentation.calls import is_recording
from agent_rl_plugin.instrumentation.recording import record_llm_call
from agent_rl_plugin.instrumentation.spans import log_failure
from agent_rl_plugin.semconv import GEN_AI_OPERATION_NAME, LLM_OPERATIONS, SPAN_KIND, SPAN_KIND_LLM

_PAUSED: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_rl_client_capture_paused", default=False)


@contextlib.contextmanager
def running_captured_call() -> Iterator[None]:
    """While a captured call runs: capture paused (no nested SDK records it again), and spans
    other tracers start meanwhile are marked as covered by this call (``tracing``)."""
    paused = _PAUSED.set(True)
    inside = rl_context.enter_captured_client_call()
    try:
        yield
    finally:
        rl_context.leave_captured_client_call(inside)
        _PAUSED.reset(paused)


@contextlib.contextmanager
def client_capture_paused() -> Iterator[None]:
    """Inside this block (this context and tasks started from it) no LLM client call is captured.

    For integrations that record a framework's LLM calls from the framework's own events: wrap
    the framework's model call in it, and the SDK call underneath is not recorded a second time.
    """
    token = pause_client_capture()
    try:
        yield
    finally:
        resume_client_capture(token)


def pause_client_capture() -> contextvars.Token[bool]:
    """:func:`client_capture_paused` for callback-style integrations, whose framework tells them
    when a model call starts and ends (two callbacks, one context): pause here, and pass what it
    returns to :func:`resume_client_capture` when the call ends."""
    return _PAUSED.set(True)


def resume_client_capture(token: contextvars.Token[bool]) -> None:
    """Undo :func:`pause_client_capture`. Never raises (a token from another context is logged:
    that context's pause ended with it)."""
    try:
        _PAUSED.reset(token)
    except Exception:
        log_failure("resuming LLM client capture")


def is_capture_paused() -> bool:
    """True inside :func:`client_capture_paused` (or inside a captured call)."""
    return _PAUSED.get()


@dataclass
class CallResult:
    """What one SDK call answered, in the shape :func:`record_llm_call` takes."""

    output: Any = None
    tool_calls: list[dict[str, Any]] | None = None
    finish_reasons: list[str] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    response_model: str | None = None
    response_id: str | None = None
    logprobs: list[float] | None = None
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    reasoning: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class CallRequest:
    """What one SDK call was asked: the model, the messages (system first) and request settings."""

    provider: str
    model: str
    messages: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    #: How many choices (samples) were asked for: a server that answers with more is not
    #: allowed to make the agent record more spans than that.
    choices: int = 1


def _framework_llm_span_is_current() -> bool:
    """True when the current span is an LLM call of its own (a framework's ``chat`` span: ours,
    by ``agent_rl.span.kind``, or any GenAI one, by ``gen_ai.operation.name``)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return False
    attributes = getattr(span, "attributes", None) or {}
    return attributes.get(SPAN_KIND) == SPAN_KIND_LLM or attributes.get(GEN_AI_OPERATION_NAME) in LLM_OPERATIONS


class ClientCall:
    """A call being captured: its request, start time and the context it began in."""

    __slots__ = ("request", "start_ns", "context", "done")

    def __init__(self, request: CallRequest) -> None:
        self.request = request
        self.start_ns = time.time_ns()
        self.context = contextvars.copy_context()
        self.done = False

    def finish(self, extract: Callable[[], CallResult | list[CallResult]]) -> None:
        """Record the call with what ``extract()`` returns: one span per result (a request for
        ``n`` samples answers with ``n`` choices: each is a sample of its own, with its own token
        ids and log-probs). Never raises; records once."""
        if self.done:
            return
        self.done = True
        try:
            extracted = extract()
            results = extracted if isinstance(extracted, list) else [extracted]
            if len(results) > self.request.choices:
                log_failure(f"a {self.request.provider} answer with more choices than asked ({len(results)})")
                results = results[: self.request.choices]
        except Exception:
            log_failure(f"reading a {self.request.provider} response")
            results = [CallResult()]
        for result in results or [CallResult()]:
            self.context.run(self._record, result, None)

    def fail(self, error: BaseException) -> None:
        """Record the call as failed with ``error``. Never raises; records once."""
        if self.done:
            return
        self.done = True
        self.context.run(self._record, CallResult(), error)

    def _record(self, result: CallResult, error: BaseException | None) -> None:
        try:
            request = self.request
            extra = {**request.attributes, **result.attributes}
            if result.response_model:
                extra["gen_ai.response.model"] = result.response_model
            if result.response_id:
                extra["gen_ai.response.id"] = result.response_id
            record_llm_call(
                request.model,
                request.messages,
                result.output,
                provider=request.provider,
                tool_calls=result.tool_calls or None,
                finish_reason=result.finish_reasons or None,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                reasoning=result.reasoning,
                logprobs=result.logprobs,
                token_ids=result.token_ids,
                prompt_token_ids=result.prompt_token_ids,
                start_time=self.start_ns,
                error=error,
                **extra,
            )
        except Exception:
            log_failure(f"recording a {self.request.provider} call")


#: The clients whose calls are captured now. Checked on every call, so switching a client off
#: holds even when another library wrapped the SDK method on top of ours (then our wrapper stays
#: in its chain, but records nothing).
ENABLED: set[str] = set()


def begin(build_request: Callable[[], CallRequest], provider: str) -> ClientCall | None:
    """A :class:`ClientCall` for a call about to run, or ``None`` when it is not captured."""
    try:
        if provider not in ENABLED or _PAUSED.get() or not is_recording() or _framework_llm_span_is_current():
            return None
        return ClientCall(build_request())
    except Exception:
        log_failure(f"capturing a {provider} call")
        return None


def call_wrapper(
    original: Callable[..., Any],
    provider: str,
    build: Callable[[dict[str, Any]], CallRequest],
    finished: Callable[[ClientCall, dict[str, Any], Any], Any],
    *,
    is_async: bool,
) -> Callable[..., Any]:
    """Wrap an SDK method: ``build(kwargs)`` the request (it may make one-shot iterables lists),
    run ``original`` once with capture paused, then ``finished(call, kwargs, response)`` records
    the call (or wraps the stream) and returns what the caller gets. An exception from
    ``original`` is recorded and re-raised unchanged."""
    if is_async:

        @functools.wraps(original)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            call = begin(lambda: build(kwargs), provider)
            if call is None:
                return await original(*args, **kwargs)
            try:
                with running_captured_call():
                    response = await original(*args, **kwargs)
            except BaseException as error:
                call.fail(error)
                raise
            return finished(call, kwargs, response)

        return async_wrapper

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = begin(lambda: build(kwargs), provider)
        if call is None:
            return original(*args, **kwargs)
        try:
            with running_captured_call():
                response = original(*args, **kwargs)
        except BaseException as error:
            call.fail(error)
            raise
        return finished(call, kwargs, response)

    return wrapper


def raw_mode(kwargs: dict[str, Any]) -> str | None:
    """``"stream"`` for a ``with_streaming_response`` call, another value (``"true"``, ``"raw"``)
    for ``with_raw_response`` (Stainless SDKs: OpenAI, Anthropic), else ``None``."""
    headers = kwargs.get("extra_headers")
    value = headers.get("X-Stainless-Raw-Response") if isinstance(headers, dict) else None
    return str(value) if value else None


def parsed(response: Any, kwargs: dict[str, Any]) -> Any:
    """The parsed body of a ``with_raw_response`` answer (the SDK caches it, so the caller's own
    ``parse()`` gets the same object); the answer itself otherwise."""
    if raw_mode(kwargs) not in (None, "stream") and callable(getattr(response, "parse", None)):
        return response.parse()
    return response


def listed(kwargs: dict[str, Any], *names: str) -> None:
    """Make one-shot iterable arguments lists, so reading them does not exhaust the SDK's copy."""
    for name in names:
        value = kwargs.get(name)
        if value is not None and not isinstance(value, (str, bytes, list, tuple, dict)) and hasattr(value, "__iter__"):
            kwargs[name] = list(value)


def get(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, else the attribute ``name`` (extra fields of pydantic models
    too); ``default`` when absent or ``None``. Reads a pydantic model's fields and extras
    directly, without the exception a missing attribute costs (this runs for every streamed chunk)."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        value = obj.get(name)
    else:
        fields = getattr(obj, "__dict__", None)
        if fields is not None and name in fields:
            value = fields[name]
        elif hasattr(type(obj), "model_fields"):  # pydantic: not a field, maybe an extra
            extra = getattr(obj, "__pydantic_extra__", None)
            value = extra.get(name) if isinstance(extra, dict) else None
        else:
            value = getattr(obj, name, None)
    return default if value is None else value


_EMPTY: dict[str, Any] = {}


def view(obj: Any) -> Mapping[str, Any]:
    """A read-only mapping of ``obj``'s fields: a dict itself; a pydantic model's fields and
    extras (vLLM's ``token_ids``...); a plain object's ``__dict__``; ``{}`` for ``None``. One
    lookup per field afterwards, for the per-chunk path. Do not modify what it returns."""
    if obj is None:
        return _EMPTY
    if isinstance(obj, dict):
        return obj
    fields = getattr(obj, "__dict__", None)
    if not isinstance(fields, dict):
        return _EMPTY
    extra = getattr(obj, "__pydantic_extra__", None)
    return {**fields, **extra} if extra else fields


#: Exact types that hold nothing to convert (they have no ``model_dump``): returned as they are.
_ATOMS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """A JSON-friendly copy of an SDK value (pydantic models to dicts, recursively)."""
    cls = type(value)
    if cls in _ATOMS:
        return value
    if cls is dict:  # the common message: a dict of str (no lookup of model_dump on each value)
        return {k: v if type(v) in _ATOMS else plain(v) for k, v in value.items()}
    if cls is list:
        return [v if type(v) in _ATOMS else plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:
            return dump()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def int_list(value: Any) -> list[int] | None:
    """``value`` as a list of ints, or ``None`` when it is not one."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if set(map(type, value)) == _INT or all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


_INT = {int}


__all__ = [
    "CallRequest",
    "CallResult",
    "ClientCall",
    "ENABLED",
    "begin",
    "call_wrapper",
    "client_capture_paused",
    "get",
    "int_list",
    "is_capture_paused",
    "listed",
    "parsed",
    "pause_client_capture",
    "plain",
    "raw_mode",
    "view",
    "resume_client_capture",
    "running_captured_call",
]
