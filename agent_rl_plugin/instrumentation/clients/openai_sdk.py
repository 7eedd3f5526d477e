"""Capture of the OpenAI Python SDK: ``client.chat.completions.create`` / ``.parse`` and
``client.responses.create``, sync and async, whole and streamed (``stream=True``).

Works against any OpenAI-compatible server the SDK talks to (vLLM, SGLang, our
``agent-rl policy serve``): where the server returns token ids and log-probs they are stored on
the call (:mod:`.chat_shape`). ``with_raw_response`` calls are read through their ``parse()``
(cached by the SDK, so the caller's own ``parse()`` gets the same object); a
``with_streaming_response`` call is recorded without its output (reading it would consume the
caller's stream).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from agent_rl_plugin.instrumentation.clients import capture
from agent_rl_plugin.instrumentation.clients.capture import CallRequest, CallResult, ClientCall, get, int_list, plain
from agent_rl_plugin.instrumentation.clients.chat_shape import (
    ChatStreamAccumulator,
    chat_request,
    chat_request_attributes,
    chat_results,
)
from agent_rl_plugin.instrumentation.clients.registry import Patch
from agent_rl_plugin.instrumentation.clients.streams import wrap_stream

PROVIDER = "openai"


# --- chat completions ----------------------------------------------------------------------------
def _chat_request(kwargs: dict[str, Any]) -> CallRequest:
    return chat_request(PROVIDER, kwargs)


# --- responses -----------------------------------------------------------------------------------
def _text_of(content: Any) -> Any:
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, (list, tuple)):
        texts = [get(part, "text") for part in content]
        return "".join(t for t in texts if isinstance(t, str))
    return plain(content)


def responses_input_messages(value: Any, instructions: Any = None) -> list[dict[str, Any]]:
    """The Responses API's ``input`` (and ``instructions``) as chat messages (tool calls and tool
    results in the chat form the store reads)."""
    messages: list[dict[str, Any]] = []
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(value, str):
        return [*messages, {"role": "user", "content": value}]
    for item in value or []:
        kind = get(item, "type")
        if kind == "function_call":
            call = {
                "id": get(item, "call_id"),
                "type": "function",
                "function": {"name": get(item, "name"), "arguments": get(item, "arguments", "")},
            }
            if messages and messages[-1].get("role") == "assistant" and not messages[-1].get("content"):
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = get(item, "output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": get(item, "call_id"),
                    "content": output if isinstance(output, str) else json.dumps(plain(output)),
                }
            )
        elif get(item, "role"):
            messages.append({"role": str(get(item, "role")), "content": _text_of(get(item, "content"))})
    return messages


def _responses_request(kwargs: dict[str, Any]) -> CallRequest:
    return CallRequest(
        provider=PROVIDER,
        model=str(kwargs.get("model")),
        messages=responses_input_messages(kwargs.get("input"), kwargs.get("instructions")),
        attributes=chat_request_attributes({**kwargs, "max_tokens": kwargs.get("max_output_tokens")}),
    )


def response_result(response: Any) -> CallResult:
    """A Responses API ``Response`` as a :class:`CallResult`."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    logprobs: list[float] = []
    for item in get(response, "output") or []:
        kind = get(item, "type")
        if kind == "message":
            for part in get(item, "content") or []:
                text = get(part, "text")
                if isinstance(text, str):
                    texts.append(text)
                for lp in get(part, "logprobs") or []:
                    value = get(lp, "logprob")
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        logprobs.append(float(value))
        elif kind == "function_call":
            calls.append(
                {
                    "id": get(item, "call_id"),
                    "type": "function",
                    "function": {"name": get(item, "name"), "arguments": get(item, "arguments", "")},
                }
            )
        elif kind == "reasoning":
            for part in get(item, "summary") or []:
                text = get(part, "text")
                if isinstance(text, str):
                    reasoning.append(text)
    usage = get(response, "usage")
    status = get(response, "status")
    reason = get(get(response, "incomplete_details"), "reason")
    return CallResult(
        output="".join(texts) if texts or not calls else None,
        tool_calls=calls or None,
        finish_reasons=[str(reason or status)] if (reason or status) else None,
        input_tokens=get(usage, "input_tokens"),
        output_tokens=get(usage, "output_tokens"),
        response_model=get(response, "model"),
        response_id=get(response, "id"),
        logprobs=logprobs or None,
        token_ids=int_list(get(response, "token_ids")),
        reasoning="\n".join(reasoning) or None,
    )


class ResponsesStreamAccumulator:
    """Takes the final ``Response`` from a Responses API event stream."""

    FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self) -> None:
        self._final: Any = None
        self._text: list[str] = []

    def add(self, event: Any) -> None:
        kind = get(event, "type")
        if kind in self.FINAL_EVENTS:
            self._final = get(event, "response")
        elif kind == "response.output_text.delta" and isinstance(get(event, "delta"), str):
            self._text.append(get(event, "delta"))

    def result(self) -> CallResult:
        if self._final is not None:
            return response_result(self._final)
        return CallResult(output="".join(self._text) or None, finish_reasons=["incomplete"])


# --- wrappers ------------------------------------------------------------------------------------
def _wrapper(
    original: Callable[..., Any],
    build: Callable[[dict[str, Any]], CallRequest],
    whole: Callable[[Any], CallResult | list[CallResult]],
    accumulator: Callable[[], Any],
    *,
    is_async: bool,
) -> Callable[..., Any]:
    def request(kwargs: dict[str, Any]) -> CallRequest:
        capture.listed(kwargs, "messages", "input")
        return build(kwargs)

    def finished(call: ClientCall, kwargs: dict[str, Any], response: Any) -> Any:
        raw = capture.raw_mode(kwargs)
        if kwargs.get("stream") and raw is None:
            return wrap_stream(response, call, accumulator, is_async=is_async)
        if raw == "stream" or kwargs.get("stream"):
            call.finish(CallResult)
        else:
            call.finish(lambda: whole(capture.parsed(response, kwargs)))
        return response

    return capture.call_wrapper(original, PROVIDER, request, finished, is_async=is_async)


def patches() -> list[Patch]:
    """The OpenAI SDK methods captured."""
    chat = "openai.resources.chat.completions"
    responses = "openai.resources.responses"

    def chat_wrap(is_async: bool) -> Callable[[Any], Any]:
        return lambda original: _wrapper(
            original, _chat_request, chat_results, ChatStreamAccumulator, is_async=is_async
        )

    def responses_wrap(is_async: bool) -> Callable[[Any], Any]:
        return lambda original: _wrapper(
            original, _responses_request, response_result, ResponsesStreamAccumulator, is_async=is_async
        )

    return [
        Patch(chat, "Completions", "create", chat_wrap(False)),
        Patch(chat, "AsyncCompletions", "create", chat_wrap(True)),
        Patch(chat, "Completions", "parse", chat_wrap(False)),
        Patch(chat, "AsyncCompletions", "parse", chat_wrap(True)),
        Patch(responses, "Responses", "create", responses_wrap(False)),
        Patch(responses, "AsyncResponses", "create", responses_wrap(True)),
    ]


__all__ = ["PROVIDER", "ResponsesStreamAccumulator", "patches", "response_result", "responses_input_messages"]
