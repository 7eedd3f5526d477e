"""Generation spans for models that emit none: :func:`instrument_model` / :class:`RLModel`.

The SDK's own OpenAI models (``OpenAIResponsesModel``: a ``response`` span;
``OpenAIChatCompletionsModel``, LiteLLM, any-llm: a ``generation`` span) trace their calls. A
custom :class:`agents.models.interface.Model` traces nothing, so its calls would be invisible
(the processor then only knows each turn's token usage). :class:`RLModel` wraps such a model:
each ``get_response`` / ``stream_response`` call runs inside an SDK ``generation_span`` holding
what the runner sent (system instructions + input items), what the model returned (output
items), the model name, its settings and the usage. The span goes to every SDK processor
(ours, and the OpenAI exporter when it is registered), and honours the run's tracing switches
(``RunConfig(tracing_disabled=True)``: no span; ``trace_include_sensitive_data=False``: no
input/output).

The wrapper is transparent: the wrapped model's ``ModelResponse`` objects, stream events and
exceptions are passed on unchanged, and every other attribute is the wrapped model's.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from typing import Any

from agents.models.interface import Model, ModelTracing
from agents.tracing import SpanError, generation_span

from agent_rl_openai_agents.convert import as_plain

logger = logging.getLogger(__name__)

__all__ = ["RLModel", "instrument_model", "instrument_agent", "emits_own_spans"]

#: Modules whose models open their own generation/response spans.
_TRACED_MODULES = ("agents.models.", "agents.extensions.models.")
_SIGNATURE = inspect.signature(Model.get_response)


def emits_own_spans(model: Any) -> bool:
    """Whether ``model`` is (a subclass of) one of the SDK's models that trace themselves."""
    return any(
        getattr(cls, "__module__", "").startswith(_TRACED_MODULES) and cls is not Model
        for cls in type(model).__mro__
    )


def _model_name(model: Any) -> str:
    for attr in ("model", "model_name", "name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _call_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = _SIGNATURE.bind_partial(None, *args, **kwargs)
        return dict(bound.arguments)
    except TypeError:
        return dict(kwargs)


def _input_items(system_instructions: Any, model_input: Any) -> list[Any]:
    items: list[Any] = []
    if isinstance(system_instructions, str) and system_instructions:
        items.append({"role": "system", "content": system_instructions})
    if isinstance(model_input, str):
        items.append({"role": "user", "content": model_input})
    elif isinstance(model_input, (list, tuple)):
        items.extend(as_plain(list(model_input)))
    elif model_input is not None:
        items.append(as_plain(model_input))
    return items


def _usage(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    out: dict[str, Any] = {}
    for key in ("requests", "input_tokens", "output_tokens", "total_tokens"):
        value = getattr(usage, key, None) if not isinstance(usage, dict) else usage.get(key)
        if isinstance(value, int):
            out[key] = value
    return out or None


def _settings(model_settings: Any) -> dict[str, Any] | None:
    for attr in ("to_traceable_dict", "to_json_dict"):
        method = getattr(model_settings, attr, None)
        if callable(method):
            try:
                return {k: v for k, v in method().items() if v is not None}
            except Exception:
                continue
    return None


class _Call:
    """One model call being traced (never raises into the model's caller)."""

    def __init__(self, wrapper: RLModel, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.span: Any = None
        call = _call_args(args, kwargs)
        tracing = call.get("tracing")
        self.include_data = tracing.include_data() if isinstance(tracing, ModelTracing) else True
        disabled = tracing.is_disabled() if isinstance(tracing, ModelTracing) else False
        if disabled:
            return
        try:
            self.span = generation_span(
                model=wrapper.rl_model_name,
                model_config=_settings(call.get("model_settings")),
                input=_input_items(call.get("system_instructions"), call.get("input")) if self.include_data else None,
            )
        except Exception:
            logger.debug("agent-rl-openai-agents: could not open a generation span", exc_info=True)
            self.span = None

    def start(self, current: bool) -> None:
        if self.span is not None:
            try:
                self.span.start(mark_as_current=current)
            except Exception:
                self.span = None

    def output(self, output: Any, usage: Any) -> None:
        if self.span is None:
            return
        try:
            data = self.span.span_data
            if self.include_data and output is not None:
                data.output = as_plain(list(output))
            data.usage = _usage(usage)
        except Exception:
            logger.debug("agent-rl-openai-agents: could not fill a generation span", exc_info=True)

    def error(self, exc: BaseException) -> None:
        if self.span is None:
            return
        try:
            detail = f"{type(exc).__name__}: {exc}" if self.include_data else type(exc).__name__
            self.span.set_error(SpanError(message="Error getting response", data={"error": detail}))
        except Exception:
            pass

    def finish(self, current: bool) -> None:
        if self.span is not None:
            try:
                self.span.finish(reset_current=current)
            except Exception:
                pass


class RLModel(Model):
    """A :class:`Model` wrapper that traces each call of ``model`` as a generation span."""

    def __init__(self, model: Model, *, name: str | None = None) -> None:
        self.rl_wrapped = model
        self.rl_model_name = name or _model_name(model)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("rl_"):
            raise AttributeError(name)
        return getattr(self.rl_wrapped, name)

    def __repr__(self) -> str:
        return f"RLModel({self.rl_wrapped!r})"

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        call = _Call(self, args, kwargs)
        call.start(current=True)
        try:
            response = await self.rl_wrapped.get_response(*args, **kwargs)
        except BaseException as exc:
            if isinstance(exc, Exception):
                call.error(exc)
            call.finish(current=True)
            raise
        call.output(getattr(response, "output", None), getattr(response, "usage", None))
        call.finish(current=True)
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return self._stream(args, kwargs)

    async def _stream(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        # Not made current: a generator must not leave the SDK's span context changed between
        # its yields (the consumer runs there).
        call = _Call(self, args, kwargs)
        call.start(current=False)
        stream = self.rl_wrapped.stream_response(*args, **kwargs)
        final: Any = None
        try:
            async for event in stream:
                if getattr(event, "type", None) in ("response.completed", "response.incomplete", "response.failed"):
                    final = getattr(event, "response", None) or final
                yield event
        except BaseException as exc:
            if isinstance(exc, Exception):
                call.error(exc)
            raise
        finally:
            try:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                if final is not None:
                    call.output(getattr(final, "output", None), getattr(final, "usage", None))
                call.finish(current=False)

    # Model's own concrete methods: the wrapped model's (``__getattr__`` does not see them).
    async def close(self) -> None:
        await self.rl_wrapped.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        cleanup = getattr(self.rl_wrapped, "_cleanup_on_run_end", None)
        if cleanup is not None:
            await cleanup(owner)

    def get_retry_advice(self, request: Any) -> Any:
        return self.rl_wrapped.get_retry_advice(request)


def instrument_model(model: Any, *, name: str | None = None) -> Any:
    """``model`` wrapped in :class:`RLModel` when it is a custom :class:`Model`; unchanged when
    it is a model name (``"gpt-4o-mini"``), ``None``, already wrapped, or one of the SDK's own
    models (they trace themselves). ``name``: the model name to record (default: its ``model``
    attribute, else its class name)."""
    if not isinstance(model, Model) or isinstance(model, RLModel) or emits_own_spans(model):
        return model
    return RLModel(model, name=name)


def instrument_agent(agent: Any) -> Any:
    """Wrap ``agent.model`` with :func:`instrument_model`, and that of every agent it can hand
    off to (recursively). Returns ``agent``."""
    seen: set[int] = set()
    todo = [agent]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        model = getattr(current, "model", None)
        wrapped = instrument_model(model)
        if wrapped is not model:
            current.model = wrapped
        for target in getattr(current, "handoffs", None) or []:
            candidate = getattr(target, "agent", target)  # an Agent, or a Handoff holding one
            if hasattr(candidate, "handoffs") and hasattr(candidate, "model"):
                todo.append(candidate)
    return agent
