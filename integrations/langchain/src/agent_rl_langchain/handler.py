"""``AgentRLCallbackHandler``: LangChain callback events -> GenAI spans in the agent-rl store.

One handler serves sync and async code (``invoke``/``ainvoke``/``stream``/``astream``/``batch``):
it is a plain :class:`~langchain_core.callbacks.BaseCallbackHandler` with ``run_inline = True``,
which LangChain calls directly (no thread hop) from both callback managers. Spans, by run:

* the **outermost run** the handler sees (a LangGraph graph, a chain, a runnable): span
  ``invoke_agent {name}`` (``agent_rl.span.kind=agent``). Outside any rollout it opens one and
  is its root (``agent_rl.rollout.root=true``, rollout hooks fired), like a traced agent of the
  core; inside ``arl.rollout(...)`` or a traced agent it is a child of that span. Its input and
  output are ``agent_rl.input``/``agent_rl.output`` (messages in the OpenAI chat shape);
* a **nested LangGraph graph** (a subgraph node, a ``create_react_agent`` called inside a node or
  a tool): ``invoke_agent {name}`` too, recognised when its first step starts (LangGraph tags
  steps ``graph:step:N``), with its input/output;
* other **chain runs** (graph nodes, sequences, lambdas, routers): spans named after the run,
  ``agent_rl.span.kind=chain``, with ``langgraph.node``/``langgraph.step`` (no content;
  ``record_chains=False`` leaves them out, their children then hang from the nearest recorded
  ancestor). Runs LangChain tags ``langsmith:hidden`` are never recorded;
* **chat model / LLM runs**: ``chat {model}`` (``text_completion {model}`` for string LLMs) with
  ``gen_ai.input.messages``, ``gen_ai.output.messages`` (one assistant message per generation,
  its ``tool_calls``), ``agent_rl.reasoning``, token usage, finish reasons, provider, response
  model, temperature;
* **tool runs**: ``execute_tool {name}`` with ``gen_ai.tool.call.id`` (the model's tool-call id),
  arguments, result (a ``ToolMessage``'s content), and on failure status ERROR + ``error.type`` +
  the message; a ``ToolMessage`` with ``status="error"`` is recorded as an error too.
  **Retrievers** are tool spans with ``gen_ai.tool.type=datastore``;
* **events** (``events`` view): ``handoff`` for every LangGraph ``Command(goto=...)`` returned by a
  node or a tool (``agent_id`` = the agent or node handing off, ``target`` = the node it goes to),
  a ``final_answer`` on the outermost run when its output holds messages ending with an AI
  message (its text: what reward plugins read as the final output), and any custom event
  dispatched with ``dispatch_custom_event(name, data)`` (``data``'s ``agent_id``/``target``/
  ``reason``/``content``/``round`` keys become the event's columns, the rest its ``data``).

While a run executes, its span is the current OTel span and its rollout the current rollout in
the context LangChain runs it in, so ``arl.emit_reward()``/``arl.record_event()`` and other
instrumentation called from inside a node or a tool land in the right rollout, under the right
span. The handler restores the previous values when the run ends (only where they are still
the ones it set). Recording never changes what LangChain does: every method catches its own
failures (logged once), and ``raise_error`` stays ``False``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from opentelemetry import context as otel_context
from opentelemetry import trace

from agent_rl_plugin import integration as rl
from agent_rl_plugin.integration import (
    RolloutInfo,
    capture_content,
    end_span,
    is_recording,
    log_failure,
    new_id,
    record_error,
    record_error_text,
    record_event,
    set_attributes,
    to_attr,
    to_json_text,
)
from agent_rl_plugin.integration import semconv as sc

from agent_rl_langchain import convert

__all__ = ["AgentRLCallbackHandler"]

SPAN_KIND_CHAIN = "chain"
LANGGRAPH_NODE = "langgraph.node"
LANGGRAPH_STEP = "langgraph.step"
RUN_ID = "langchain.run.id"
UNFINISHED = "agent_rl.langchain.unfinished"
HIDDEN_TAG = "langsmith:hidden"
GRAPH_STEP_TAG = "graph:step:"
EVENT_HANDOFF = "handoff"
LANGGRAPH_BUBBLE_UP = "langgraph.bubble_up"
_EVENT_FIELDS = ("round", "agent_id", "target", "reason", "content")


@dataclass(eq=False)
class _Run:
    """One recorded LangChain run: its span and what it made current."""

    kind: str  # agent | chain | llm | tool
    name: str
    span: trace.Span
    ctx: otel_context.Context
    rollout: RolloutInfo | None
    parent: "_Run | None"
    root: "_Run"  # the outermost recorded run of this tree (itself for a root)
    node: str | None = None
    implicit: bool = False  # opened its own rollout
    inputs: Any = None
    attached: otel_context.Context | None = None  # the context value it made current
    previous: otel_context.Context | None = None
    set_rollout: bool = False
    previous_rollout: RolloutInfo | None = None
    seen_commands: set[int] = field(default_factory=set)  # roots: Commands already recorded
    ended: bool = False

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    def agent_name(self) -> str | None:
        """The name of the nearest agent run, this one included."""
        run: _Run | None = self
        while run is not None:
            if run.is_agent:
                return run.name
            run = run.parent
        return None


def _langgraph_attributes(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    metadata = metadata or {}
    attrs: dict[str, Any] = {}
    node = metadata.get("langgraph_node")
    if isinstance(node, str):
        attrs[LANGGRAPH_NODE] = node
    step = metadata.get("langgraph_step")
    if isinstance(step, int) and not isinstance(step, bool):
        attrs[LANGGRAPH_STEP] = step
    return attrs


class AgentRLCallbackHandler(BaseCallbackHandler):
    """Record LangChain / LangGraph runs as agent-rl spans (see the module docstring).

    ::

        handler = AgentRLCallbackHandler()
        graph.invoke(inputs, config={"callbacks": [handler]})

    ``rl_config``: an :class:`agent_rl_plugin.RLConfig` to configure recording with
    (process-wide, like ``arl.configure``); by default the configuration in force (or the
    ``AGENT_RL_*`` environment) is used. ``enable_rl=False``: this handler records nothing.
    ``record_chains=False``: no spans for intermediate chain runs (nodes, sequences); agents,
    LLM calls, tools and events are still recorded. ``final_answer_events=False``: no
    ``final_answer`` event on the outermost run. ``agent_name`` names the outermost run's agent
    (default: LangChain's run name, e.g. the graph's ``name``).
    """

    run_inline = True  # called directly by sync and async callback managers, in the run's context
    raise_error = False

    def __init__(
        self,
        rl_config: Any = None,
        *,
        enable_rl: bool = True,
        record_chains: bool = True,
        final_answer_events: bool = True,
        agent_name: str | None = None,
    ) -> None:
        super().__init__()
        if rl_config is not None:
            from agent_rl_plugin import configure

            configure(rl_config)
        self.enable_rl = enable_rl
        self.record_chains = record_chains
        self.final_answer_events = final_answer_events
        self.agent_name = agent_name
        self._runs: dict[UUID, _Run] = {}
        self._skipped: dict[UUID, _Run | None] = {}  # run not recorded -> its recorded ancestor
        # record_chains=False: chain runs not recorded yet, which may turn out to be graphs
        self._pending: dict[UUID, tuple[str, Any, UUID | None, Any, int]] = {}
        self._attached: dict[int, _Run] = {}  # id(context made current by _enter) -> run
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(enable_rl={self.enable_rl}, record_chains={self.record_chains})"

    # --- bookkeeping -------------------------------------------------------------------------
    def _parent(self, parent_run_id: UUID | None) -> tuple[bool, _Run | None]:
        """(known, run): whether the parent id is one of ours, and its nearest recorded run."""
        if parent_run_id is None:
            return False, None
        with self._lock:
            run = self._runs.get(parent_run_id)
            if run is not None:
                return True, run
            if parent_run_id in self._skipped:
                return True, self._skipped[parent_run_id]
        return False, None

    def _skip(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        known, parent = self._parent(parent_run_id)
        with self._lock:
            self._skipped[run_id] = parent if known else None

    def _start(
        self,
        kind: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        name: str,
        span_name: str,
        attributes: dict[str, Any],
        metadata: Mapping[str, Any] | None,
        inputs: Any = None,
        start_time: int | None = None,
        enter: bool = True,
    ) -> _Run | None:
        _, parent = self._parent(parent_run_id)
        if parent_run_id is None:
            parent = self._langchain_parent()
        # A run of ours whose span is current here but that is not an ancestor of this one (it
        # was started in this same context: RunnableSequence.batch starts every input's run
        # before running any, generate() one run per prompt; or its context was copied here, or
        # it never ended): undo it here first, so this run neither nests under it nor inherits
        # its rollout.
        holder = self._holder()
        if holder is not None and not _is_ancestor(holder, parent):
            self._restore(holder)
        attributes.update(_langgraph_attributes(metadata))
        attributes[RUN_ID] = str(run_id)
        if parent is not None:
            parent_ctx = parent.ctx
            rollout = parent.rollout
            implicit = False
        else:
            parent_ctx = otel_context.get_current()
            rollout = rl.current_rollout()
            implicit = rollout is None and kind == "agent"
            if implicit:
                rollout = RolloutInfo(name=name, implicit=True)
                attributes[sc.ROLLOUT_ROOT] = True
                attributes.update(rollout.attributes)
        token = rl.set_current_rollout(rollout)  # the processor stamps this rollout's ids
        try:
            span = rl.start_span(span_name, attributes=attributes, context=parent_ctx, start_time=start_time)
        finally:
            rl.reset_current_rollout(token)
        ctx = trace.set_span_in_context(span, parent_ctx)
        run = _Run(kind=kind, name=name, span=span, ctx=ctx, rollout=rollout, parent=parent,
                   root=None, node=(metadata or {}).get("langgraph_node"), implicit=implicit,  # type: ignore[arg-type]
                   inputs=inputs)
        run.root = parent.root if parent is not None else run
        with self._lock:
            self._runs[run_id] = run
        if enter:
            self._enter(run)
        if implicit:
            rl.fire_rollout_start(rollout)  # type: ignore[arg-type]
        return run

    def _langchain_parent(self) -> _Run | None:
        """For a run LangChain starts without a parent: the run of ours whose code is calling it
        (a chain invoked with its own ``config={"callbacks": ...}`` from inside a node or a tool),
        found through LangChain's child-config context variable."""
        try:
            from langchain_core.runnables.config import var_child_runnable_config

            config = var_child_runnable_config.get()
            callbacks = config.get("callbacks") if config else None
            run_id = getattr(callbacks, "parent_run_id", None)
        except Exception:
            return None
        if run_id is None:
            return None
        with self._lock:
            return self._runs.get(run_id) or self._skipped.get(run_id)

    def _holder(self) -> _Run | None:
        """The run of ours whose span :meth:`_enter` made current in this context, if any."""
        try:
            current = otel_context.get_current()
        except Exception:
            return None
        with self._lock:
            run = self._attached.get(id(current))
        return run if run is not None and run.attached is current else None

    def _enter(self, run: _Run) -> None:
        """Make the run's span (and rollout) current in the calling context, by value."""
        try:
            run.previous = otel_context.get_current()
            run.attached = otel_context.Context(run.ctx)
            with self._lock:
                self._attached[id(run.attached)] = run
            otel_context.attach(run.attached)
            current = rl.current_rollout()
            if run.rollout is not None and current is not run.rollout:
                run.previous_rollout = current
                run.set_rollout = True
                rl.set_current_rollout(run.rollout)
        except Exception:
            log_failure("entering a LangChain run's context")

    def _restore(self, run: _Run) -> None:
        """In the calling context only: put back what :meth:`_enter` replaced, where the values
        are still the ones it set."""
        try:
            if run.attached is not None and otel_context.get_current() is run.attached:
                otel_context.attach(run.previous)  # type: ignore[arg-type]
            if run.set_rollout and rl.current_rollout() is run.rollout:
                rl.set_current_rollout(run.previous_rollout)
        except Exception:
            log_failure("leaving a LangChain run's context")

    def _leave(self, run: _Run) -> None:
        """The run ended: :meth:`_restore` here, and forget its context."""
        self._restore(run)
        if run.attached is not None:
            with self._lock:
                self._attached.pop(id(run.attached), None)

    def _pop(self, run_id: UUID) -> _Run | None:
        with self._lock:
            run = self._runs.pop(run_id, None)
            if run is None:
                self._skipped.pop(run_id, None)
            return run

    def _finish(self, run: _Run, error: BaseException | None = None, attributes: dict[str, Any] | None = None,
                error_text: str | None = None) -> None:
        try:
            if attributes:
                set_attributes(run.span, attributes)
            if error is not None:
                record_error(run.span, error)
                if isinstance(error, GeneratorExit):
                    set_attributes(run.span, {sc.CANCELLED: True})
            elif error_text is not None:
                record_error_text(run.span, "error", error_text)
            if run.root is run:
                self._end_leftovers(run)
            if run.implicit and run.rollout is not None:
                rl.fire_rollout_end(run.rollout, rl.rollout_status(error), error)
        except Exception:
            log_failure("finishing a LangChain run")
        finally:
            run.ended = True
            self._leave(run)
            end_span(run.span)

    def _end_leftovers(self, root: _Run) -> None:
        """End the spans of runs under ``root`` that never reported their end."""
        with self._lock:
            leftovers = [(rid, r) for rid, r in self._runs.items() if r.root is root]
            for rid, _ in leftovers:
                del self._runs[rid]
            self._skipped = {k: v for k, v in self._skipped.items() if v is None or v.root is not root}
        for _, run in leftovers:
            run.ended = True
            with self._lock:
                if run.attached is not None:
                    self._attached.pop(id(run.attached), None)
            set_attributes(run.span, {UNFINISHED: True})
            end_span(run.span)

    def _active(self) -> bool:
        return self.enable_rl and is_recording()

    # --- events ------------------------------------------------------------------------------
    def _event(self, run: _Run, event_type: str, **fields: Any) -> None:
        """``arl.record_event`` on the run's span, in its rollout."""
        token = otel_context.attach(run.ctx)
        rollout_token = rl.set_current_rollout(run.rollout)
        try:
            record_event(event_type, **fields)
        finally:
            rl.reset_current_rollout(rollout_token)
            otel_context.detach(token)

    def _handoffs(self, run: _Run, output: Any, via: str, node: str | None = None) -> None:
        """A ``handoff`` event per ``Command(goto=...)`` in a node's or a tool's output, on
        ``run``'s span. ``node``: the node that returned it when ``run`` is its recorded
        ancestor (``record_chains=False``)."""
        for command in convert.commands_in(output):
            if id(command) in run.root.seen_commands:
                continue
            run.root.seen_commands.add(id(command))
            if via == "tool":
                source = run.agent_name() or run.node
            else:
                source = node or run.node or run.name
            graph = getattr(command, "graph", None)
            data: dict[str, Any] = {"via": via}
            if via == "tool":
                data["tool"] = run.name
            else:
                data["node"] = source
            if graph is not None:
                data["graph"] = "parent" if graph == "__parent__" else str(graph)
            update = getattr(command, "update", None)
            if update is not None and capture_content():
                data["update"] = convert.jsonable(update)
            for target in convert.goto_targets(command):
                self._event(run, EVENT_HANDOFF, agent_id=source, target=target, **data)

    def _final_answer(self, run: _Run, outputs: Any) -> None:
        messages = outputs.get("messages") if isinstance(outputs, Mapping) else None
        if not isinstance(messages, (list, tuple)) or not messages:
            return
        last = messages[-1]
        if getattr(last, "type", None) not in ("ai", "AIMessageChunk") or getattr(last, "tool_calls", None):
            return
        text = convert.text_of(last)
        if text:
            self._event(run, sc.EVENT_TYPE_FINAL_ANSWER, agent_id=run.name, content=text)

    # --- chains ------------------------------------------------------------------------------
    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, tags: list[str] | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        try:
            if not self._active():
                return
            tags = tags or []
            known, parent = self._parent(parent_run_id)
            if HIDDEN_TAG in tags:
                self._skip(run_id, parent_run_id)
                return
            if parent_run_id is not None and any(t.startswith(GRAPH_STEP_TAG) for t in tags):
                if parent_run_id in self._pending:
                    self._start_pending_agent(parent_run_id)
                    known, parent = self._parent(parent_run_id)
                elif parent is not None:
                    self._mark_agent(parent)
            name = str(kwargs.get("name") or _serialized_name(serialized) or "chain")
            if parent is None:
                if self.agent_name and self._langchain_parent() is None:
                    name = self.agent_name
                self._start("agent", run_id, parent_run_id, name, f"{sc.OP_INVOKE_AGENT} {name}",
                            self._agent_attributes(name, inputs), metadata, inputs)
                return
            if not self.record_chains:
                self._skip(run_id, parent_run_id)
                # keep the inputs: it may turn out to be a graph (an agent) when its steps start
                with self._lock:
                    self._pending[run_id] = (name, inputs, parent_run_id, metadata, time.time_ns())
                return
            self._start("chain", run_id, parent_run_id, name, name, {sc.SPAN_KIND: SPAN_KIND_CHAIN}, metadata,
                        inputs)
        except Exception:
            log_failure("on_chain_start")

    def _start_pending_agent(self, run_id: UUID) -> None:
        """record_chains=False: a chain run not recorded at its start is a graph; record it now
        (with its own start time) as an agent."""
        with self._lock:
            pending = self._pending.pop(run_id, None)
            self._skipped.pop(run_id, None)
        if pending is None:
            return
        name, inputs, parent_run_id, metadata, start_ns = pending
        self._start("agent", run_id, parent_run_id, name, f"{sc.OP_INVOKE_AGENT} {name}",
                    self._agent_attributes(name, inputs), metadata, inputs, start_time=start_ns, enter=False)

    def _agent_attributes(self, name: str, inputs: Any) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.SPAN_KIND: sc.SPAN_KIND_AGENT,
            sc.GEN_AI_AGENT_NAME: name,
            sc.AGENT_ROLE: "agent",
        }
        if capture_content():
            attrs[sc.ROLLOUT_INPUT] = to_json_text(convert.jsonable(inputs))
            messages = inputs.get("messages") if isinstance(inputs, Mapping) else None
            converted = convert.messages_list(messages)
            if converted is not None:
                attrs[sc.GEN_AI_INPUT_MESSAGES] = to_json_text(converted)
        return attrs

    def _mark_agent(self, run: _Run) -> None:
        """A chain run turned out to be a LangGraph graph: record it as an agent."""
        if run.is_agent:
            return
        run.kind = "agent"
        try:
            run.span.update_name(f"{sc.OP_INVOKE_AGENT} {run.name}")
        except Exception:
            log_failure("renaming a span")
        set_attributes(run.span, self._agent_attributes(run.name, run.inputs))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        try:
            with self._lock:
                pending = self._pending.pop(run_id, None)
                ancestor = self._skipped.get(run_id)
            run = self._pop(run_id)
            if run is None:
                if pending is not None and ancestor is not None:  # record_chains=False: a node's handoff
                    name, _, _, metadata, _ = pending
                    self._handoffs(ancestor, outputs, "node", node=(metadata or {}).get("langgraph_node") or name)
                return
            attrs: dict[str, Any] = {}
            if run.is_agent:
                if capture_content():
                    attrs[sc.ROLLOUT_OUTPUT] = to_json_text(convert.jsonable(outputs))
                if run.root is run and self.final_answer_events:
                    self._final_answer(run, outputs)
            self._handoffs(run, outputs, "node")
            self._finish(run, attributes=attrs)
        except Exception:
            log_failure("on_chain_end")

    def on_chain_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                       **kwargs: Any) -> None:
        try:
            run = self._pop(run_id)
            if run is None:
                with self._lock:
                    self._pending.pop(run_id, None)
                return
            if _is_bubble_up(error):  # LangGraph control flow (interrupt, Command to the parent graph)
                self._finish(run, attributes={LANGGRAPH_BUBBLE_UP: type(error).__name__})
                return
            self._finish(run, error=error)
        except Exception:
            log_failure("on_chain_error")

    # --- LLMs --------------------------------------------------------------------------------
    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[Any]], *, run_id: UUID,
                            parent_run_id: UUID | None = None, tags: list[str] | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        try:
            if not self._active():
                return
            batch = messages[0] if messages else []
            self._llm_start(sc.OP_CHAT, serialized, convert.messages_list(batch) or [], run_id, parent_run_id,
                            metadata, kwargs)
        except Exception:
            log_failure("on_chat_model_start")

    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: list[str], *, run_id: UUID,
                     parent_run_id: UUID | None = None, tags: list[str] | None = None,
                     metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        try:
            if not self._active():
                return
            prompt = prompts[0] if prompts else ""
            self._llm_start(sc.OP_TEXT_COMPLETION, serialized, [{"role": "user", "content": prompt}], run_id,
                            parent_run_id, metadata, kwargs)
        except Exception:
            log_failure("on_llm_start")

    def _llm_start(self, operation: str, serialized: Any, messages: list[Any], run_id: UUID,
                   parent_run_id: UUID | None, metadata: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> None:
        params = kwargs.get("invocation_params") or {}
        model = convert.model_name(serialized, metadata, params, kwargs.get("name"))
        attrs: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: operation,
            sc.SPAN_KIND: sc.SPAN_KIND_LLM,
            sc.GEN_AI_REQUEST_MODEL: model,
        }
        provider = (metadata or {}).get("ls_provider")
        if isinstance(provider, str) and provider:
            attrs[sc.GEN_AI_PROVIDER_NAME] = provider
        temperature = params.get("temperature", (metadata or {}).get("ls_temperature"))
        if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
            attrs[sc.GEN_AI_REQUEST_TEMPERATURE] = float(temperature)
        if capture_content():
            attrs[sc.GEN_AI_INPUT_MESSAGES] = to_json_text(messages)
        _, parent = self._parent(parent_run_id)
        if parent is None and parent_run_id is None:
            parent = self._langchain_parent()
        if parent is not None:
            agent = parent.agent_name()
            if agent:
                attrs[sc.GEN_AI_AGENT_NAME] = agent
        self._start("llm", run_id, parent_run_id, model, f"{operation} {model}", attrs, metadata)

    def on_llm_end(self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            run = self._pop(run_id)
            if run is None:
                return
            self._finish(run, attributes=self._llm_result(response))
        except Exception:
            log_failure("on_llm_end")

    def _llm_result(self, response: Any) -> dict[str, Any]:
        generations_all = getattr(response, "generations", None) or []
        generations = list(generations_all[0]) if generations_all else []
        llm_output = getattr(response, "llm_output", None) or {}
        attrs: dict[str, Any] = {}
        input_tokens, output_tokens = convert.usage_of(generations, llm_output)
        if input_tokens is not None:
            attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = input_tokens
        if output_tokens is not None:
            attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = output_tokens
        if generations:
            attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = convert.finish_reasons_of(generations)
        first = getattr(generations[0], "message", None) if generations else None
        meta = getattr(first, "response_metadata", None) or {}
        response_model = meta.get("model_name") or meta.get("model") or llm_output.get("model_name")
        if isinstance(response_model, str) and response_model:
            attrs[sc.GEN_AI_RESPONSE_MODEL] = response_model
        response_id = getattr(first, "id", None) or meta.get("id")
        if isinstance(response_id, str) and response_id:
            attrs[sc.GEN_AI_RESPONSE_ID] = response_id
        if capture_content():
            outputs = []
            reasoning = []
            for generation in generations:
                message = getattr(generation, "message", None)
                if message is not None:
                    outputs.append(convert.message_dict(message))
                    text = convert.reasoning_of(message)
                    if text:
                        reasoning.append(text)
                else:
                    outputs.append({"role": "assistant", "content": getattr(generation, "text", None)})
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = to_json_text(outputs)
            if reasoning:
                attrs[sc.REASONING] = to_attr("\n".join(reasoning))
        return attrs

    def on_llm_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        try:
            run = self._pop(run_id)
            if run is None:
                return
            response = kwargs.get("response")
            attrs = self._llm_result(response) if response is not None and getattr(response, "generations", None) else None
            self._finish(run, error=error, attributes=attrs)
        except Exception:
            log_failure("on_llm_error")

    # --- tools -------------------------------------------------------------------------------
    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, tags: list[str] | None = None,
                      metadata: dict[str, Any] | None = None, inputs: dict[str, Any] | None = None,
                      **kwargs: Any) -> None:
        try:
            if not self._active():
                return
            name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
            call_id = kwargs.get("tool_call_id")
            attrs: dict[str, Any] = {
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
                sc.GEN_AI_TOOL_NAME: name,
                sc.GEN_AI_TOOL_CALL_ID: str(call_id) if call_id else new_id(),
                sc.GEN_AI_TOOL_TYPE: "function",
            }
            description = (serialized or {}).get("description")
            if isinstance(description, str) and description:
                attrs[sc.GEN_AI_TOOL_DESCRIPTION] = to_attr(description)
            if capture_content():
                arguments = inputs if inputs is not None else _maybe_json(input_str)
                attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = to_json_text(convert.jsonable(arguments))
            self._start("tool", run_id, parent_run_id, name, f"{sc.OP_EXECUTE_TOOL} {name}", attrs, metadata)
        except Exception:
            log_failure("on_tool_start")

    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            run = self._pop(run_id)
            if run is None:
                return
            attrs: dict[str, Any] = {}
            result = output
            error_text = None
            if getattr(output, "type", None) == "tool" and hasattr(output, "tool_call_id"):
                result = getattr(output, "content", None)
                if getattr(output, "status", None) == "error":
                    error_text = result if isinstance(result, str) else json.dumps(convert.jsonable(result))
            if capture_content():
                attrs[sc.GEN_AI_TOOL_CALL_RESULT] = to_json_text(convert.jsonable(result))
            self._handoffs(run, output, "tool")
            self._finish(run, attributes=attrs, error_text=error_text)
        except Exception:
            log_failure("on_tool_end")

    def on_tool_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                      **kwargs: Any) -> None:
        try:
            run = self._pop(run_id)
            if run is None:
                return
            self._finish(run, error=error)
        except Exception:
            log_failure("on_tool_error")

    # --- retrievers --------------------------------------------------------------------------
    def on_retriever_start(self, serialized: dict[str, Any] | None, query: str, *, run_id: UUID,
                           parent_run_id: UUID | None = None, tags: list[str] | None = None,
                           metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        try:
            if not self._active():
                return
            name = str(kwargs.get("name") or _serialized_name(serialized) or "retriever")
            attrs: dict[str, Any] = {
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.SPAN_KIND: sc.SPAN_KIND_TOOL,
                sc.GEN_AI_TOOL_NAME: name,
                sc.GEN_AI_TOOL_CALL_ID: new_id(),
                sc.GEN_AI_TOOL_TYPE: "datastore",
            }
            if capture_content():
                attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = to_json_text({"query": query})
            self._start("tool", run_id, parent_run_id, name, f"{sc.OP_EXECUTE_TOOL} {name}", attrs, metadata)
        except Exception:
            log_failure("on_retriever_start")

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, parent_run_id: UUID | None = None,
                         **kwargs: Any) -> None:
        try:
            run = self._pop(run_id)
            if run is None:
                return
            attrs = {sc.GEN_AI_TOOL_CALL_RESULT: to_json_text(convert.jsonable(list(documents)))} if capture_content() else {}
            self._finish(run, attributes=attrs)
        except Exception:
            log_failure("on_retriever_end")

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                           **kwargs: Any) -> None:
        self.on_tool_error(error, run_id=run_id, parent_run_id=parent_run_id)

    # --- custom events -----------------------------------------------------------------------
    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, tags: list[str] | None = None,
                        metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        try:
            if not self._active():
                return
            with self._lock:
                run = self._runs.get(run_id) or self._skipped.get(run_id)
            if run is None:
                return
            fields: dict[str, Any] = {}
            if isinstance(data, Mapping):
                extra = {}
                for key, value in data.items():
                    if key in _EVENT_FIELDS:
                        fields[key] = value
                    else:
                        extra[str(key)] = convert.jsonable(value)
                if "agent_id" not in fields and run.agent_name():
                    fields["agent_id"] = run.agent_name()
                fields.update(extra)
            elif data is not None:
                fields["value"] = convert.jsonable(data)
            self._event(run, str(name), **fields)
        except Exception:
            log_failure("on_custom_event")


def _serialized_name(serialized: Any) -> str | None:
    if not isinstance(serialized, Mapping):
        return None
    name = serialized.get("name")
    if isinstance(name, str) and name:
        return name
    ids = serialized.get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else None


def _is_ancestor(run: _Run, descendant: _Run | None) -> bool:
    """Whether ``run`` is ``descendant`` or one of its recorded ancestors."""
    while descendant is not None:
        if descendant is run:
            return True
        descendant = descendant.parent
    return False


def _is_bubble_up(error: BaseException) -> bool:
    """LangGraph's ``GraphBubbleUp`` (``GraphInterrupt``, ``ParentCommand``): control flow, not a
    failure (recognised by class name: this module does not import LangGraph)."""
    return any(cls.__name__ == "GraphBubbleUp" for cls in type(error).__mro__)


def _maybe_json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text
