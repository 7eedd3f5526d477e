"""Capture of the Anthropic Python SDK: ``client.messages.create`` (whole and ``stream=True``) and
``client.messages.stream(...)`` (the helper's context manager), sync and async.

Anthropic's content blocks are stored in the chat form the store reads: ``system`` becomes the
first message, ``tool_use`` blocks become the assistant's ``tool_calls`` (arguments as JSON
text), ``tool_result`` blocks become ``tool`` messages, ``thinking`` blocks the reasoning.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

from agent_rl_plugin.instrumentation.clients import capture
from agent_rl_plugin.instrumentation.clients.capture import CallRequest, CallResult, ClientCall, get, plain
from agent_rl_plugin.instrumentation.clients.chat_shape import chat_request_attributes
from agent_rl_plugin.instrumentation.clients.registry import Patch
from agent_rl_plugin.instrumentation.clients.streams import wrap_stream
from agent_rl_plugin.semconv import LLM_INCOMPLETE

PROVIDER = "anthropic"


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = [get(block, "text") for block in content or [] if get(block, "type", "text") == "text"]
    return "".join(t for t in texts if isinstance(t, str))


def _tool_call(block: Any) -> dict[str, Any]:
    return {
        "id": get(block, "id"),
        "type": "function",
        "function": {"name": get(block, "name"), "arguments": json.dumps(plain(get(block, "input", {})))},
    }


def input_messages(messages: Any, system: Any = None) -> list[dict[str, Any]]:
    """Anthropic ``messages`` (and ``system``) as chat messages."""
    out: list[dict[str, Any]] = []
    system_text = _block_text(system) if system is not None else ""
    if system_text:
        out.append({"role": "system", "content": system_text})
    for message in messages or []:
        role, content = str(get(message, "role", "user")), get(message, "content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        blocks = list(content or [])
        for block in blocks:
            if get(block, "type") == "tool_result":
                result = get(block, "content")
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": get(block, "tool_use_id"),
                        "content": result if isinstance(result, str) else _block_text(result),
                    }
                )
        calls = [_tool_call(b) for b in blocks if get(b, "type") == "tool_use"]
        text = _block_text(blocks)
        if text or calls or not blocks:
            entry: dict[str, Any] = {"role": role, "content": text if text or not calls else None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
    return out


def message_result(message: Any) -> CallResult:
    """An Anthropic ``Message`` as a :class:`CallResult`."""
    blocks = list(get(message, "content") or [])
    calls = [_tool_call(b) for b in blocks if get(b, "type") == "tool_use"]
    thinking = [get(b, "thinking") for b in blocks if get(b, "type") == "thinking"]
    text = _block_text(blocks)
    usage = get(message, "usage")
    stop = get(message, "stop_reason")
    return CallResult(
        output=text if text or not calls else None,
        tool_calls=calls or None,
        finish_reasons=[str(stop)] if stop else None,
        input_tokens=get(usage, "input_tokens"),
        output_tokens=get(usage, "output_tokens"),
        response_model=get(message, "model"),
        response_id=get(message, "id"),
        reasoning="".join(t for t in thinking if isinstance(t, str)) or None,
    )


class MessageStreamAccumulator:
    """Builds the message from raw stream events (``message_start`` ... ``message_stop``)."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"content": [], "usage": {}}
        self._json: dict[int, list[str]] = {}

    def add(self, event: Any) -> None:
        kind = get(event, "type")
        if kind == "message_start":
            start = plain(get(event, "message")) or {}
            self._message.update({k: v for k, v in start.items() if k != "content"})
            self._message["usage"] = dict(start.get("usage") or {})
        elif kind == "content_block_start":
            self._message["content"].append(plain(get(event, "content_block")) or {})
        elif kind == "content_block_delta" and self._message["content"]:
            block, delta = self._message["content"][-1], get(event, "delta")
            dtype = get(delta, "type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + str(get(delta, "text", ""))
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(get(delta, "thinking", ""))
            elif dtype == "input_json_delta":
                self._json.setdefault(len(self._message["content"]) - 1, []).append(str(get(delta, "partial_json", "")))
        elif kind == "message_delta":
            self._message["stop_reason"] = get(get(event, "delta"), "stop_reason") or self._message.get("stop_reason")
            output = get(get(event, "usage"), "output_tokens")
            if isinstance(output, int):
                self._message["usage"]["output_tokens"] = output

    def result(self) -> CallResult:
        for index, pieces in self._json.items():
            try:
                self._message["content"][index]["input"] = json.loads("".join(pieces) or "{}")
            except (ValueError, IndexError):
                self._message["content"][index]["input"] = {"_partial_json": "".join(pieces)}
        return message_result(self._message)


def whole(message: Any) -> CallResult:
    """A whole answer (a ``Message``; anything else is recorded without output)."""
    return message_result(message) if get(message, "content") is not None else CallResult()


def _request(kwargs: dict[str, Any]) -> CallRequest:
    capture.listed(kwargs, "messages", "system")
    return CallRequest(
        provider=PROVIDER,
        model=str(kwargs.get("model")),
        messages=input_messages(kwargs.get("messages"), kwargs.get("system")),
        attributes=chat_request_attributes(kwargs),
    )


def _create_wrapper(original: Callable[..., Any], *, is_async: bool) -> Callable[..., Any]:
    def finished(call: ClientCall, kwargs: dict[str, Any], response: Any) -> Any:
        raw = capture.raw_mode(kwargs)
        if kwargs.get("stream") and raw is None:
            return wrap_stream(response, call, MessageStreamAccumulator, is_async=is_async)
        if raw == "stream" or kwargs.get("stream"):
            call.finish(CallResult)  # reading it would consume the caller's stream
        else:
            call.finish(lambda: whole(capture.parsed(response, kwargs)))
        return response

    return capture.call_wrapper(original, PROVIDER, _request, finished, is_async=is_async)


class _CapturedStreamManager:
    """``messages.stream(...)``'s context manager; records the final message snapshot on exit."""

    def __init__(self, manager: Any, call: ClientCall) -> None:
        self._manager = manager
        self._call = call
        self._stream: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    def _record(self, error: BaseException | None) -> None:
        if error is not None and not isinstance(error, GeneratorExit):
            self._call.fail(error)
            return
        snapshot = getattr(self._stream, "current_message_snapshot", None) if self._stream is not None else None

        def result() -> CallResult:
            if snapshot is None:
                return CallResult(attributes={LLM_INCOMPLETE: True})
            answer = message_result(snapshot)
            if not answer.finish_reasons:  # left before message_stop: the text is cut
                answer.attributes[LLM_INCOMPLETE] = True
            return answer

        self._call.finish(result)

    def __enter__(self) -> Any:
        try:
            with capture.running_captured_call():
                self._stream = self._manager.__enter__()
        except BaseException as error:
            self._call.fail(error)
            raise
        return self._stream

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self._manager.__exit__(*exc_info)
        finally:
            self._record(exc_info[1])

    async def __aenter__(self) -> Any:
        try:
            with capture.running_captured_call():
                self._stream = await self._manager.__aenter__()
        except BaseException as error:
            self._call.fail(error)
            raise
        return self._stream

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self._manager.__aexit__(*exc_info)
        finally:
            self._record(exc_info[1])


def _stream_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def stream(*args: Any, **kwargs: Any) -> Any:
        call = capture.begin(lambda: _request(kwargs), PROVIDER)
        manager = original(*args, **kwargs)
        return manager if call is None else _CapturedStreamManager(manager, call)

    return stream


def patches() -> list[Patch]:
    """The Anthropic SDK methods captured."""
    module = "anthropic.resources.messages"
    return [
        Patch(module, "Messages", "create", lambda o: _create_wrapper(o, is_async=False)),
        Patch(module, "AsyncMessages", "create", lambda o: _create_wrapper(o, is_async=True)),
        Patch(module, "Messages", "stream", _stream_wrapper),
        Patch(module, "AsyncMessages", "stream", _stream_wrapper),
    ]


__all__ = ["PROVIDER", "MessageStreamAccumulator", "input_messages", "message_result", "patches"]
