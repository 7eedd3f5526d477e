"""Capture of LiteLLM: ``litellm.completion`` and ``litellm.acompletion``, whole and streamed.

LiteLLM answers in OpenAI's shape (:mod:`.chat_shape` reads it). The calls LiteLLM makes
through another captured SDK underneath (OpenAI's, Anthropic's) are not recorded again: capture
is paused while a captured call runs. Calls through a name imported before capture was switched
on (``from litellm import completion`` earlier in the program) are not captured; call
``litellm.completion(...)`` or configure before importing.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from agent_rl_plugin.instrumentation.clients import capture
from agent_rl_plugin.instrumentation.clients.capture import CallRequest, CallResult, ClientCall
from agent_rl_plugin.instrumentation.clients.chat_shape import (
    ChatStreamAccumulator,
    chat_request,
    chat_results,
)
from agent_rl_plugin.instrumentation.clients.registry import Patch
from agent_rl_plugin.instrumentation.clients.streams import wrap_stream

PROVIDER = "litellm"


def _request(kwargs: dict[str, Any]) -> CallRequest:
    capture.listed(kwargs, "messages")
    return chat_request(PROVIDER, kwargs)


def _wrapper(original: Callable[..., Any], *, is_async: bool) -> Callable[..., Any]:
    def finished(call: ClientCall, kwargs: dict[str, Any], response: Any) -> Any:
        if kwargs.get("stream"):
            return wrap_stream(response, call, ChatStreamAccumulator, is_async=is_async)
        call.finish(lambda: chat_results(response) if response is not None else CallResult())
        return response

    wrapped = capture.call_wrapper(original, PROVIDER, _request, finished, is_async=is_async)
    signature = inspect.signature(original)

    def keywords(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """completion(model, messages, timeout, ...): positional arguments by their names
        (``None`` when they do not bind: the original then raises its own error)."""
        if not args:
            return kwargs
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError:
            return None
        named = {k: v for k, v in bound.arguments.items() if k != "kwargs"}
        return {**named, **bound.arguments.get("kwargs", {})}

    if is_async:

        @functools.wraps(original)
        async def async_by_name(*args: Any, **kwargs: Any) -> Any:
            named = keywords(args, kwargs)
            return await (original(*args, **kwargs) if named is None else wrapped(**named))

        return async_by_name

    @functools.wraps(original)
    def by_name(*args: Any, **kwargs: Any) -> Any:
        named = keywords(args, kwargs)
        return original(*args, **kwargs) if named is None else wrapped(**named)

    return by_name


def patches() -> list[Patch]:
    """The LiteLLM functions captured (the package attributes users call)."""
    return [
        Patch("litellm", "", "completion", lambda o: _wrapper(o, is_async=False)),
        Patch("litellm", "", "acompletion", lambda o: _wrapper(o, is_async=True)),
    ]


__all__ = ["PROVIDER", "patches"]
