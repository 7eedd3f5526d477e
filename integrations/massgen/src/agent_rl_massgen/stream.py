"""Observe a MassGen backend's ``stream_with_tools`` stream: one LLM call and its tool calls.

:func:`observe_backend` replaces ``backend.stream_with_tools`` on that backend *instance* with a
function returning an :class:`ObservedStream`: the backend's own async generator, forwarded
unchanged (every chunk, exception, ``aclose``/``athrow``), while a :class:`StreamObserver`
reads the chunks:

* ``content`` chunks: the turn's text; ``reasoning`` / ``reasoning_summary`` chunks: its
  reasoning (``agent_rl.reasoning``);
* ``tool_calls`` chunks: the tool calls the model asked for (including MassGen's workflow tools
  ``new_answer`` and ``vote``), stored in the LLM call's output message;
* ``custom_tool_status`` / ``mcp_status`` chunks (tools the backend executes itself): each
  ``*_tool_called`` / ``function_call`` (arguments) / ``function_call_output`` (result) /
  ``*_tool_response`` or ``*_tool_error`` sequence, keyed by ``tool_call_id``, becomes one
  ``execute_tool {name}`` span via :func:`agent_rl_plugin.record_tool_call`;
* token usage: ``chunk.usage`` when the backend sends it (``prompt_tokens``/``input_tokens``,
  ``completion_tokens``/``output_tokens``), else the growth of ``backend.token_usage`` during
  the stream (MassGen's own counter, exact when the backend is not shared between concurrent
  agents).

When the stream ends (exhausted, closed, failed) the turn is recorded with
:func:`agent_rl_plugin.record_llm_call` (``chat {model}``, input = the messages MassGen sent,
start/end = the stream's). Observing never changes the stream and never raises into MassGen.

While the backend produces a chunk, agent-rl's LLM client capture is paused
(``client_capture_paused()``): the SDK calls a backend makes (``ChatCompletionsBackend`` over the
OpenAI SDK...) are this stream's, not extra ``llm_calls`` rows. A backend that runs its own tool
loop makes several model requests in one stream: they are one recorded LLM call (its input = the
messages MassGen sent, its output = all the turn's text and tool calls).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import AsyncGenerator
from typing import Any, Callable

from agent_rl_massgen.runs import current_run
from agent_rl_plugin.integration import client_capture_paused, instance_disabled, record_llm_call, record_tool_call

logger = logging.getLogger(__name__)

__all__ = ["observe_backend", "unobserve_backend", "ObservedStream", "StreamObserver", "WORKFLOW_TOOLS"]

#: MassGen's coordination tools: recorded as coordination events by the orchestrator adapter.
WORKFLOW_TOOLS = frozenset({"new_answer", "vote", "stop", "submit", "broadcast", "ask_others"})
_MARK = "__agent_rl_massgen_observed__"
_ARGS = re.compile(r"Arguments for Calling ([^\s:]+): (.*)", re.S)
_RESULT = re.compile(r"Results for Calling ([^\s:]+): (.*)", re.S)
_CALLING = re.compile(r"Calling ([^\s.]+)")
_STATE_KEY = "agent_rl.state.key"
_MASSGEN_AGENT = "agent_rl.massgen.agent_id"


def _chunk_type(chunk: Any) -> str:
    kind = getattr(chunk, "type", None)
    value = getattr(kind, "value", kind)
    return str(value) if value is not None else ""


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _tool_call_view(call: Any) -> Any:
    """A requested tool call as {id, name, arguments} (chat-completions, Responses or Claude shape)."""
    if not isinstance(call, dict):
        return call
    function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
    name = function.get("name") or call.get("name")
    arguments = function.get("arguments", call.get("arguments", call.get("input")))
    if isinstance(arguments, str):
        arguments = _json_or_text(arguments)
    return {"id": call.get("id") or call.get("call_id"), "name": name, "arguments": arguments}


def _usage_numbers(usage: Any) -> tuple[int | None, int | None]:
    if usage is None:
        return None, None
    get = usage.get if isinstance(usage, dict) else (lambda k, d=None: getattr(usage, k, d))
    prompt = get("prompt_tokens", None)
    if prompt is None:
        prompt = get("input_tokens", None)
    completion = get("completion_tokens", None)
    if completion is None:
        completion = get("output_tokens", None)
    try:
        return (int(prompt) if prompt is not None else None, int(completion) if completion is not None else None)
    except (TypeError, ValueError):
        return None, None


def state_key_of(messages: Any) -> str | None:
    """GiGPO state key of a MassGen turn: a hash of the last user message (MassGen puts the task
    and the answers an agent can see in it, so agents acting on the same state share a key)."""
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)
            return "massgen:" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return None


class StreamObserver:
    """Accumulates one backend stream's chunks; :meth:`finish` records the turn. Never raises."""

    def __init__(self, backend: Any, messages: Any, tools: Any, kwargs: dict[str, Any]) -> None:
        self.backend = backend
        self.messages = messages
        self.agent_id = kwargs.get("agent_id")
        self.start_ns = time.time_ns()
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: list[Any] = []
        self.usage: tuple[int | None, int | None] = (None, None)
        self.tools: dict[str, dict[str, Any]] = {}  # tool_call_id -> pending executed tool
        self.finished = False
        self.tokens_before = self._counter()

    def _counter(self) -> tuple[int, int] | None:
        usage: Any = getattr(self.backend, "token_usage", None)
        try:
            return int(usage.input_tokens), int(usage.output_tokens)
        except Exception:
            return None

    # -- chunks ---------------------------------------------------------------------------
    def see(self, chunk: Any) -> None:
        try:
            self._see(chunk)
        except Exception:
            logger.debug("agent-rl-massgen: could not read a chunk", exc_info=True)

    def _see(self, chunk: Any) -> None:
        kind = _chunk_type(chunk)
        content = getattr(chunk, "content", None)
        if kind == "content" and isinstance(content, str):
            self.text.append(content)
        elif kind in ("reasoning", "reasoning_summary"):
            text = content if isinstance(content, str) and content else None
            text = text or getattr(chunk, "reasoning_delta", None) or getattr(chunk, "reasoning_summary_delta", None)
            if isinstance(text, str) and text:
                self.reasoning.append(text)
        elif kind == "tool_calls":
            self.tool_calls.extend(_tool_call_view(c) for c in (getattr(chunk, "tool_calls", None) or []))
        elif kind in ("custom_tool_status", "mcp_status"):
            self._tool_status(chunk, content if isinstance(content, str) else "")
        usage = getattr(chunk, "usage", None)
        if usage:
            numbers = _usage_numbers(usage)
            if numbers != (None, None):
                self.usage = numbers

    def _tool_status(self, chunk: Any, content: str) -> None:
        status = str(getattr(chunk, "status", "") or "")
        call_id = getattr(chunk, "tool_call_id", None)
        source = str(getattr(chunk, "source", "") or "")
        name = re.sub(r"^(custom_|mcp_)", "", source) if source else None
        if call_id is None:
            return
        pending = self.tools.get(call_id)
        if status.endswith("_tool_called"):
            match = _CALLING.search(content)
            self.tools[call_id] = {
                "name": name or (match.group(1) if match else "unknown"),
                "start": time.time_ns(),
                "arguments": None,
                "result": None,
                "error": None,
            }
            return
        if pending is None:
            return
        if status == "function_call":
            match = _ARGS.search(content)
            if match:
                pending["arguments"] = _json_or_text(match.group(2).strip())
        elif status == "function_call_output":
            match = _RESULT.search(content)
            pending["result"] = match.group(2) if match else content
        elif status.endswith("_tool_error"):
            pending["error"] = content or "tool error"
            self._record_tool(call_id)
        elif status.endswith("_tool_response"):
            self._record_tool(call_id)

    def _record_tool(self, call_id: str) -> None:
        pending = self.tools.pop(call_id, None)
        if pending is None:
            return
        end = time.time_ns()
        record_tool_call(
            pending["name"],
            pending["arguments"],
            pending["result"],
            error=pending["error"],
            call_id=call_id,
            start_time=pending["start"],
            end_time=end,
        )
        run = current_run()
        if run is not None:
            run.add_tool(pending["name"], pending["arguments"], pending["result"], pending["error"])

    # -- end --------------------------------------------------------------------------------
    def finish(self, error: BaseException | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        try:
            for call_id in list(self.tools):  # started but never reported back
                self.tools[call_id]["error"] = self.tools[call_id]["error"] or "no result (stream ended)"
                self._record_tool(call_id)
            self._record_llm(error)
        except Exception:
            logger.warning("agent-rl-massgen: could not record an LLM turn", exc_info=True)

    def _record_llm(self, error: BaseException | None) -> None:
        input_tokens, output_tokens = self.usage
        if input_tokens is None and output_tokens is None:
            after = self._counter()
            if after is not None and self.tokens_before is not None:
                grown = (after[0] - self.tokens_before[0], after[1] - self.tokens_before[1])
                if grown != (0, 0):
                    input_tokens, output_tokens = grown
        model = (
            getattr(self.backend, "model", None)
            or (getattr(self.backend, "config", None) or {}).get("model")
            or "unknown"
        )
        try:
            provider = self.backend.get_provider_name()
        except Exception:
            provider = None
        text = "".join(self.text)
        extra: dict[str, Any] = {}
        key = state_key_of(self.messages)
        if key is not None:
            extra[_STATE_KEY] = key
        if self.agent_id is not None:
            extra[_MASSGEN_AGENT] = str(self.agent_id)
        record_llm_call(
            str(model),
            self.messages,
            text if text or not self.tool_calls else None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            provider=provider,
            reasoning="".join(self.reasoning) or None,
            finish_reason="tool_calls" if self.tool_calls else ("error" if error else "stop"),
            tool_calls=self.tool_calls or None,
            start_time=self.start_ns,
            end_time=time.time_ns(),
            error=error,
            **extra,
        )
        run = current_run()
        if run is not None:
            run.add_llm(str(model), text, input_tokens, output_tokens)


class ObservedStream(AsyncGenerator):  # type: ignore[misc]
    """The backend's async generator, forwarded unchanged, with a :class:`StreamObserver`."""

    __slots__ = ("_inner", "_observer")

    def __init__(self, inner: Any, observer: StreamObserver) -> None:
        self._inner = inner
        self._observer = observer

    def __aiter__(self) -> ObservedStream:
        return self

    async def _step(self, resume: Callable[[], Any]) -> Any:
        try:
            # The backend's own SDK calls (OpenAI, Anthropic, LiteLLM...) run inside a step: not
            # captured again by agent-rl's LLM client capture, this stream is recorded here.
            # Paused per step, never across a yield (the consumer's code stays captured).
            with client_capture_paused():
                chunk = await resume()
        except StopAsyncIteration:
            self._observer.finish()
            raise
        except GeneratorExit:
            self._observer.finish()
            raise
        except BaseException as exc:
            self._observer.finish(exc)
            raise
        self._observer.see(chunk)
        return chunk

    async def __anext__(self) -> Any:
        return await self._step(self._inner.__anext__)

    async def asend(self, value: Any) -> Any:
        return await self._step(lambda: self._inner.asend(value))

    async def athrow(self, *args: Any) -> Any:
        return await self._step(lambda: self._inner.athrow(*args))

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._observer.finish()

    def __getattr__(self, name: str) -> Any:
        if name in ObservedStream.__slots__:
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __del__(self) -> None:
        observer = getattr(self, "_observer", None)
        if observer is not None and not observer.finished:
            observer.finish()


def observe_backend(backend: Any, owner: Any = None) -> bool:
    """Record ``backend``'s streams (once per backend instance). ``owner``: an agent using it,
    whose ``enable_rl=False`` switches recording off for the streams it asks for (recognised by
    the ``agent_id`` MassGen passes). Returns whether the backend was newly observed."""
    try:
        current = backend.__dict__.get("stream_with_tools")
    except Exception:
        return False
    if current is not None and getattr(current, _MARK, False):
        if owner is not None:
            current.__agent_rl_massgen_owners__[getattr(owner, "agent_id", None)] = owner
        return False
    try:
        original = backend.stream_with_tools
    except Exception:
        return False
    owners: dict[Any, Any] = {}
    if owner is not None:
        owners[getattr(owner, "agent_id", None)] = owner

    def disabled(agent_id: Any) -> bool:
        if agent_id in owners:
            return instance_disabled(owners[agent_id])
        return bool(owners) and all(instance_disabled(o) for o in owners.values())

    def stream_with_tools(messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        inner = original(messages, tools, **kwargs)
        if not hasattr(inner, "__anext__") or disabled(kwargs.get("agent_id")):
            return inner
        try:
            observer = StreamObserver(backend, messages, tools, kwargs)
        except Exception:
            return inner
        return ObservedStream(inner, observer)

    setattr(stream_with_tools, _MARK, True)
    stream_with_tools.__wrapped__ = original  # type: ignore[attr-defined]
    stream_with_tools.__agent_rl_massgen_owners__ = owners  # type: ignore[attr-defined]
    try:
        backend.__dict__["stream_with_tools"] = stream_with_tools
    except Exception:
        return False
    return True


def unobserve_backend(backend: Any) -> None:
    """Undo :func:`observe_backend` (the backend's own method is visible again)."""
    try:
        current = backend.__dict__.get("stream_with_tools")
        if current is not None and getattr(current, _MARK, False):
            del backend.__dict__["stream_with_tools"]
    except Exception:
        pass
