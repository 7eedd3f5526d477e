"""Recording smolagents agents: one object at a time, never a smolagents class.

:func:`instrument_agent` puts recording wrappers in the ``__dict__`` of the agent and of the
objects it uses (its model, its tools, its Python executor), so the classes, and every other
agent, stay untouched; :func:`uninstrument_smolagents` removes them. What each wrapper records:

* ``agent.run`` -> an ``invoke_agent NAME`` span (``arl.trace_agent``): input = the task and
  options, output = the final answer; the rollout root when no rollout is active.
  ``run(stream=True)`` is traced as a generator (the span ends with the stream).
* ``agent.model.generate`` / ``generate_stream`` -> a ``chat MODEL_ID`` span per call: the
  messages as the model receives them (smolagents' ``get_clean_message_list`` with its tool role
  conversions: OpenAI-style ``{"role", "content"}``), the output message with its ``tool_calls``,
  token usage, model class as provider, errors. The call runs inside ``client_capture_paused()``:
  the OpenAI/LiteLLM SDK call a model class makes underneath (``OpenAIServerModel``,
  ``LiteLLMModel``...) is not recorded a second time by agent-rl's LLM client capture.
* ``ToolCallingAgent.execute_tool_call`` -> an ``execute_tool NAME`` span per tool call the model
  asked for (``call_id`` = the model's tool call id; arguments; result; an unknown tool, bad
  arguments or a tool that raised is an error with smolagents' message). ``final_answer`` is a
  tool call too.
* ``CodeAgent``: each tool's ``forward`` (called from the generated code) -> an ``execute_tool``
  span, and each code execution -> an ``execute_tool python_interpreter`` span (arguments
  ``{"code"}``, result ``{"output", "logs", "is_final_answer"}``, the interpreter's error).
* a step that failed (parsing error, tool error, failed final-answer check) -> a ``step_error``
  event (round = step number, content = the error) on the agent span; a managed agent's run ->
  a ``delegate`` event (agent_id = the manager, target = the managed agent, content = the task).

Managed agents are instrumented with their manager. Recording failures are logged, never raised,
and every wrapper returns (or raises) exactly what smolagents did.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from typing import Any

import agent_rl_plugin as arl
from agent_rl_plugin.integration import client_capture_paused, is_enabled

logger = logging.getLogger(__name__)

MARK = "_agent_rl_smolagents"  # in an instrumented object's __dict__: what to remove on undo
CODE_TOOL = "python_interpreter"


def _safe(what: str, action: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return action(*args, **kwargs)
    except Exception:
        logger.warning("agent-rl-smolagents: recording %s failed", what, exc_info=True)
        return None


def _mark(obj: Any, *names: str) -> None:
    obj.__dict__.setdefault(MARK, set()).update(names)


def _set(obj: Any, name: str, value: Any) -> None:
    obj.__dict__[name] = value
    _mark(obj, name)


# --- messages ---------------------------------------------------------------------------------
def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)


def _tool_calls(message: Any) -> list[dict[str, Any]] | None:
    calls = getattr(message, "tool_calls", None)
    if not calls:
        return None
    out = []
    for call in calls:
        function = getattr(call, "function", None)
        out.append(
            {
                "id": getattr(call, "id", None),
                "type": "function",
                "function": {
                    "name": getattr(function, "name", None),
                    "arguments": _arguments_text(getattr(function, "arguments", None)),
                },
            }
        )
    return out


def input_messages(model: Any, messages: Any) -> list[Any]:
    """The messages as smolagents sends them to a chat API (role conversions applied)."""
    from smolagents.models import get_clean_message_list, tool_role_conversions

    try:
        return get_clean_message_list(
            list(messages),
            role_conversions=tool_role_conversions,
            flatten_messages_as_text=bool(getattr(model, "flatten_messages_as_text", False)),
        )
    except Exception:
        return [m.dict() if hasattr(m, "dict") else m for m in messages]


def output_message(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": getattr(message, "content", None)}
    calls = _tool_calls(message)
    if calls:
        out["tool_calls"] = calls
    return out


def _usage(message: Any) -> tuple[int | None, int | None]:
    usage = getattr(message, "token_usage", None)
    return getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)


def _record_llm(model: Any, messages: Any, message: Any, error: BaseException | None, start: int) -> None:
    tokens_in, tokens_out = _usage(message) if message is not None else (None, None)
    arl.record_llm_call(
        str(getattr(model, "model_id", None) or type(model).__name__),
        input_messages(model, messages),
        None if message is None else [output_message(message)],
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        provider=type(model).__name__,
        start_time=start,
        end_time=time.time_ns(),
        error=error,
    )


# --- the model --------------------------------------------------------------------------------
def instrument_model(model: Any) -> Any:
    """Record every ``generate`` / ``generate_stream`` call of this model object."""
    if "generate" in model.__dict__.get(MARK, ()):
        return model
    generate = model.generate

    def traced_generate(messages: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_enabled():
            return generate(messages, *args, **kwargs)
        start = time.time_ns()
        try:
            with client_capture_paused():  # this span is the call's one row of llm_calls
                message = generate(messages, *args, **kwargs)
        except BaseException as exc:
            _safe("an LLM call", _record_llm, model, messages, None, exc, start)
            raise
        _safe("an LLM call", _record_llm, model, messages, message, None, start)
        return message

    _set(model, "generate", traced_generate)
    stream = getattr(model, "generate_stream", None)
    if stream is not None:

        def traced_stream(messages: Any, *args: Any, **kwargs: Any) -> Any:
            if not is_enabled():
                return stream(messages, *args, **kwargs)
            return _recorded_stream(model, stream, messages, args, kwargs)

        _set(model, "generate_stream", traced_stream)
    return model


_END = object()


def _recorded_stream(model: Any, stream: Any, messages: Any, args: tuple, kwargs: dict) -> Any:
    from smolagents.models import agglomerate_stream_deltas

    start = time.time_ns()
    deltas: list[Any] = []
    error: BaseException | None = None
    try:
        # Capture paused around each step of the model's stream (the SDK call starts at the
        # first), never across a yield: the consumer's code between deltas stays captured.
        with client_capture_paused():
            deltas_of = iter(stream(messages, *args, **kwargs))
        while True:
            with client_capture_paused():
                delta = next(deltas_of, _END)
            if delta is _END:
                break
            deltas.append(delta)
            yield delta
    except BaseException as exc:
        error = exc
        raise
    finally:
        message = _safe("a streamed LLM call", agglomerate_stream_deltas, deltas) if deltas else None
        _safe("a streamed LLM call", _record_llm, model, messages, message, error, start)


# --- tools --------------------------------------------------------------------------------------
#: True while a ToolCallingAgent's execute_tool_call runs (in its thread): the Tool's own
#: ``forward`` wrapper (present when the Tool object is shared with a CodeAgent) stays silent.
_IN_TOOL_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_rl_smolagents_tool_call", default=False)


class _PendingIds:
    """Tool call ids of the model output being executed, matched by (name, arguments)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: list[tuple[str, str, str]] = []

    @staticmethod
    def key(arguments: Any) -> str:
        try:
            return json.dumps(arguments, sort_keys=True, default=str)
        except Exception:
            return repr(arguments)

    def set(self, message: Any) -> None:
        with self.lock:
            self.ids = [(c.function.name, self.key(c.function.arguments), c.id) for c in (message.tool_calls or [])]

    def take(self, name: str, arguments: Any) -> str | None:
        wanted = (name, self.key(arguments))
        with self.lock:
            for i, (n, a, call_id) in enumerate(self.ids):
                if (n, a) == wanted:
                    del self.ids[i]
                    return call_id
        return None


def _instrument_tool_calling(agent: Any) -> None:
    pending = _PendingIds()
    process = agent.process_tool_calls
    execute = agent.execute_tool_call

    def traced_process(chat_message: Any, memory_step: Any) -> Any:
        _safe("tool call ids", pending.set, chat_message)
        return process(chat_message, memory_step)

    def traced_execute(tool_name: str, arguments: Any) -> Any:
        if not is_enabled():
            return execute(tool_name, arguments)
        call_id = pending.take(tool_name, arguments)
        start = time.time_ns()
        token = _IN_TOOL_CALL.set(True)  # a Tool shared with a CodeAgent: recorded here only
        try:
            result = execute(tool_name, arguments)
        except BaseException as exc:
            _IN_TOOL_CALL.reset(token)
            _safe("a tool call", arl.record_tool_call, tool_name, arguments, None, exc, call_id, start, time.time_ns())
            raise
        _IN_TOOL_CALL.reset(token)
        _safe("a tool call", arl.record_tool_call, tool_name, arguments, result, None, call_id, start, time.time_ns())
        return result

    _set(agent, "process_tool_calls", traced_process)
    _set(agent, "execute_tool_call", traced_execute)


#: Contexts of the code executions in progress. smolagents runs generated code in a worker
#: thread (its execution timeout), which does not inherit the rollout; a tool called from there
#: is recorded in the context of the execution that called it (when exactly one is running).
_ACTIVE_CODE: list[contextvars.Context] = []
_ACTIVE_LOCK = threading.Lock()


def _record_in_code_context(*args: Any) -> None:
    context = None
    if arl.current_rollout() is None:
        with _ACTIVE_LOCK:
            if len(_ACTIVE_CODE) == 1:
                context = _ACTIVE_CODE[0].copy()
    if context is None:
        arl.record_tool_call(*args)
    else:
        context.run(arl.record_tool_call, *args)


def instrument_tool(tool: Any) -> Any:
    """Record every ``forward`` call of this Tool object (what generated code calls)."""
    if "forward" in tool.__dict__.get(MARK, ()) or not hasattr(tool, "forward"):
        return tool
    forward = tool.forward
    name = str(getattr(tool, "name", type(tool).__name__))
    names = list(getattr(tool, "inputs", None) or {})

    def traced_forward(*args: Any, **kwargs: Any) -> Any:
        if not is_enabled() or _IN_TOOL_CALL.get():
            return forward(*args, **kwargs)
        arguments = {**dict(zip(names, args)), **kwargs} if len(args) <= len(names) else {"args": list(args), **kwargs}
        start = time.time_ns()
        try:
            result = forward(*args, **kwargs)
        except BaseException as exc:
            _safe("a tool call", _record_in_code_context, name, arguments, None, exc, None, start, time.time_ns())
            raise
        _safe("a tool call", _record_in_code_context, name, arguments, result, None, None, start, time.time_ns())
        return result

    _set(tool, "forward", traced_forward)
    return tool


class _RecordingExecutor:
    """Stands in for a CodeAgent's Python executor: records each code execution, delegates the
    rest (attributes read and written go to the real executor)."""

    def __init__(self, executor: Any) -> None:
        object.__setattr__(self, "_agent_rl_executor", executor)

    def __call__(self, code: str, *args: Any, **kwargs: Any) -> Any:
        executor = self._agent_rl_executor
        if not is_enabled():
            return executor(code, *args, **kwargs)
        start = time.time_ns()
        quiet = _IN_TOOL_CALL.set(False)  # a managed CodeAgent run from a ToolCallingAgent's tool call
        context = contextvars.copy_context()
        with _ACTIVE_LOCK:
            _ACTIVE_CODE.append(context)
        try:
            output = executor(code, *args, **kwargs)
        except BaseException as exc:
            _safe(
                "a code execution",
                arl.record_tool_call,
                CODE_TOOL,
                {"code": code},
                None,
                exc,
                None,
                start,
                time.time_ns(),
            )
            raise
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE_CODE.remove(context)
            _IN_TOOL_CALL.reset(quiet)
        result = {
            "output": getattr(output, "output", output),
            "logs": getattr(output, "logs", None),
            "is_final_answer": getattr(output, "is_final_answer", None),
        }
        _safe(
            "a code execution",
            arl.record_tool_call,
            CODE_TOOL,
            {"code": code},
            result,
            None,
            None,
            start,
            time.time_ns(),
        )
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent_rl_executor, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._agent_rl_executor, name, value)


# --- the agent ------------------------------------------------------------------------------------
def _agent_name(agent: Any) -> str:
    return str(getattr(agent, "name", None) or type(agent).__name__)


def _on_step(step: Any, agent: Any = None) -> None:
    error = getattr(step, "error", None)
    if error is None or not is_enabled():
        return
    arl.record_event(
        "step_error",
        round=getattr(step, "step_number", None),
        agent_id=_agent_name(agent),
        content=str(error),
        error_type=type(error).__name__,
    )


def instrument_agent(agent: Any, _manager: Any = None) -> Any:
    """Record this agent's runs, model calls, tool calls, code executions and step errors, and
    those of its managed agents. Idempotent; returns the agent."""
    if "run" in agent.__dict__.get(MARK, ()):
        return agent
    name = _agent_name(agent)
    run = agent.run
    manager = None if _manager is None else _agent_name(_manager)

    @arl.trace_agent(name=name)
    def run_traced(task: str, **kwargs: Any) -> Any:
        return run(task, **kwargs)

    @arl.trace_agent(name=name)
    def run_traced_stream(task: str, **kwargs: Any) -> Any:
        yield from run(task, **kwargs)

    def traced_run(task: str, stream: bool = False, **kwargs: Any) -> Any:
        if not is_enabled():
            return run(task, stream=stream, **kwargs)
        if manager is not None:
            _safe("a delegation", arl.record_event, "delegate", agent_id=manager, target=name, content=task)
        if stream:
            return run_traced_stream(task, stream=True, **kwargs)
        return run_traced(task, **kwargs)

    _set(agent, "run", traced_run)
    instrument_model(agent.model)
    from smolagents.agents import ActionStep, CodeAgent, ToolCallingAgent

    if isinstance(agent, ToolCallingAgent):
        _instrument_tool_calling(agent)
    elif isinstance(agent, CodeAgent):
        for tool in agent.tools.values():
            instrument_tool(tool)
        executor = getattr(agent, "python_executor", None)
        if executor is not None and not isinstance(executor, _RecordingExecutor):
            _set(agent, "python_executor", _RecordingExecutor(executor))
    registry = getattr(agent, "step_callbacks", None)
    if registry is not None and hasattr(registry, "register"):
        registry.register(ActionStep, _on_step)
    for managed in (getattr(agent, "managed_agents", None) or {}).values():
        instrument_agent(managed, _manager=agent)
    return agent


def _undo(obj: Any) -> None:
    for name in obj.__dict__.pop(MARK, ()):
        value = obj.__dict__.pop(name, None)
        if isinstance(value, _RecordingExecutor):
            obj.__dict__[name] = value._agent_rl_executor


def uninstrument_smolagents(agent: Any) -> None:
    """Remove what :func:`instrument_agent` added to the agent, its model, tools, executor and
    managed agents."""
    _undo(agent)
    model = getattr(agent, "model", None)
    if model is not None:
        _undo(model)
    for tool in (getattr(agent, "tools", None) or {}).values():
        _undo(tool)
    registry = getattr(agent, "step_callbacks", None)
    callbacks = getattr(registry, "_callbacks", None)
    if isinstance(callbacks, dict):
        for hooks in callbacks.values():
            while _on_step in hooks:
                hooks.remove(_on_step)
    for managed in (getattr(agent, "managed_agents", None) or {}).values():
        uninstrument_smolagents(managed)
