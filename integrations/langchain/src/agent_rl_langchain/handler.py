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

This module decides what each callback records; the rest lives next to it:
:mod:`~agent_rl_langchain.runs` (the runs in flight, their spans and context),
:mod:`~agent_rl_langchain.attributes` (payloads -> span attributes),
:mod:`~agent_rl_langchain.events` (handoff / final-answer / custom events) and
:mod:`~agent_rl_langchain.convert` (LangChain objects -> JSON and chat messages).
"""

from __future__ import annotations

import time
from typing import Any, Sequence
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from agent_rl_langchain import attributes, convert, events

# ``X as X``: names this module defined before its helpers moved out, still importable from here.
from agent_rl_langchain.attributes import LANGGRAPH_BUBBLE_UP, SPAN_KIND_CHAIN
from agent_rl_langchain.attributes import LANGGRAPH_NODE as LANGGRAPH_NODE
from agent_rl_langchain.attributes import LANGGRAPH_STEP as LANGGRAPH_STEP
from agent_rl_langchain.events import EVENT_HANDOFF as EVENT_HANDOFF
from agent_rl_langchain.runs import RUN_ID as RUN_ID
from agent_rl_langchain.runs import UNFINISHED as UNFINISHED
from agent_rl_langchain.runs import Run, RunTracker, is_ancestor
from agent_rl_plugin.integration import capture_content, is_recording, log_failure, set_attributes, to_json_text
from agent_rl_plugin.integration import semconv as sc

__all__ = ["AgentRLCallbackHandler"]

HIDDEN_TAG = "langsmith:hidden"
GRAPH_STEP_TAG = "graph:step:"

# Private names this module defined before its helpers moved out (the same objects).
_Run = Run
_is_ancestor = is_ancestor
_langgraph_attributes = attributes.langgraph_attributes
_serialized_name = attributes.serialized_name
_maybe_json = attributes.maybe_json
_EVENT_FIELDS = events.EVENT_FIELDS


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
        self._tracker = RunTracker()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(enable_rl={self.enable_rl}, record_chains={self.record_chains})"

    def _active(self) -> bool:
        return self.enable_rl and is_recording()

    # --- chains ------------------------------------------------------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if not self._active():
                return
            tracker = self._tracker
            tags = tags or []
            known, parent = tracker.parent(parent_run_id)
            if HIDDEN_TAG in tags:
                tracker.skip(run_id, parent_run_id)
                return
            if parent_run_id is not None and any(t.startswith(GRAPH_STEP_TAG) for t in tags):
                if tracker.is_pending(parent_run_id):
                    self._start_pending_agent(parent_run_id)
                    known, parent = tracker.parent(parent_run_id)
                elif parent is not None:
                    self._mark_agent(parent)
            name = str(kwargs.get("name") or _serialized_name(serialized) or "chain")
            if parent is None:
                if self.agent_name and tracker.langchain_parent() is None:
                    name = self.agent_name
                tracker.start(
                    "agent",
                    run_id,
                    parent_run_id,
                    name,
                    f"{sc.OP_INVOKE_AGENT} {name}",
                    attributes.agent_attributes(name, inputs),
                    metadata,
                    inputs,
                )
                return
            if not self.record_chains:
                tracker.skip(run_id, parent_run_id)
                # keep the inputs: it may turn out to be a graph (an agent) when its steps start
                tracker.defer(run_id, (name, inputs, parent_run_id, metadata, time.time_ns()))
                return
            tracker.start("chain", run_id, parent_run_id, name, name, {sc.SPAN_KIND: SPAN_KIND_CHAIN}, metadata, inputs)
        except Exception:
            log_failure("on_chain_start")

    def _start_pending_agent(self, run_id: UUID) -> None:
        """record_chains=False: a chain run not recorded at its start is a graph; record it now
        (with its own start time) as an agent."""
        pending = self._tracker.take_pending(run_id)
        if pending is None:
            return
        name, inputs, parent_run_id, metadata, start_ns = pending
        self._tracker.start(
            "agent",
            run_id,
            parent_run_id,
            name,
            f"{sc.OP_INVOKE_AGENT} {name}",
            attributes.agent_attributes(name, inputs),
            metadata,
            inputs,
            start_time=start_ns,
            enter=False,
        )

    def _mark_agent(self, run: Run) -> None:
        """A chain run turned out to be a LangGraph graph: record it as an agent."""
        if run.is_agent:
            return
        run.kind = "agent"
        try:
            run.span.update_name(f"{sc.OP_INVOKE_AGENT} {run.name}")
        except Exception:
            log_failure("renaming a span")
        set_attributes(run.span, attributes.agent_attributes(run.name, run.inputs))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            pending, ancestor = self._tracker.pop_pending(run_id)
            run = self._tracker.pop(run_id)
            if run is None:
                if pending is not None and ancestor is not None:  # record_chains=False: a node's handoff
                    name, _, _, metadata, _ = pending
                    events.record_handoffs(
                        ancestor, outputs, "node", node=(metadata or {}).get("langgraph_node") or name
                    )
                return
            attrs: dict[str, Any] = {}
            if run.is_agent:
                if capture_content():
                    attrs[sc.ROLLOUT_OUTPUT] = to_json_text(convert.jsonable(outputs))
                if run.root is run and self.final_answer_events:
                    events.record_final_answer(run, outputs)
            events.record_handoffs(run, outputs, "node")
            self._tracker.finish(run, attributes=attrs)
        except Exception:
            log_failure("on_chain_end")

    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            run = self._tracker.pop(run_id)
            if run is None:
                self._tracker.discard_pending(run_id)
                return
            if _is_bubble_up(error):  # LangGraph control flow (interrupt, Command to the parent graph)
                self._tracker.finish(run, attributes={LANGGRAPH_BUBBLE_UP: type(error).__name__})
                return
            self._tracker.finish(run, error=error)
        except Exception:
            log_failure("on_chain_error")

    # --- LLMs --------------------------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        try:
            if not self._active():
                return
            batch = messages[0] if messages else []
            self._llm_start(
                sc.OP_CHAT, serialized, convert.messages_list(batch) or [], run_id, parent_run_id, metadata, kwargs
            )
        except Exception:
            log_failure("on_chat_model_start")

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if not self._active():
                return
            prompt = prompts[0] if prompts else ""
            self._llm_start(
                sc.OP_TEXT_COMPLETION,
                serialized,
                [{"role": "user", "content": prompt}],
                run_id,
                parent_run_id,
                metadata,
                kwargs,
            )
        except Exception:
            log_failure("on_llm_start")

    def _llm_start(
        self,
        operation: str,
        serialized: Any,
        messages: list[Any],
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        model, attrs = attributes.llm_start_attributes(operation, serialized, messages, metadata, kwargs)
        _, parent = self._tracker.parent(parent_run_id)
        if parent is None and parent_run_id is None:
            parent = self._tracker.langchain_parent()
        if parent is not None:
            agent = parent.agent_name()
            if agent:
                attrs[sc.GEN_AI_AGENT_NAME] = agent
        self._tracker.start("llm", run_id, parent_run_id, model, f"{operation} {model}", attrs, metadata)

    def on_llm_end(self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            run = self._tracker.pop(run_id)
            if run is None:
                return
            self._tracker.finish(run, attributes=attributes.llm_result_attributes(response))
        except Exception:
            log_failure("on_llm_end")

    def on_llm_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            run = self._tracker.pop(run_id)
            if run is None:
                return
            response = kwargs.get("response")
            has_generations = response is not None and getattr(response, "generations", None)
            attrs = attributes.llm_result_attributes(response) if has_generations else None
            self._tracker.finish(run, error=error, attributes=attrs)
        except Exception:
            log_failure("on_llm_error")

    # --- tools -------------------------------------------------------------------------------
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if not self._active():
                return
            name, attrs = attributes.tool_start_attributes(serialized, input_str, inputs, kwargs)
            self._tracker.start("tool", run_id, parent_run_id, name, f"{sc.OP_EXECUTE_TOOL} {name}", attrs, metadata)
        except Exception:
            log_failure("on_tool_start")

    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        try:
            run = self._tracker.pop(run_id)
            if run is None:
                return
            attrs, error_text = attributes.tool_end_attributes(output)
            events.record_handoffs(run, output, "tool")
            self._tracker.finish(run, attributes=attrs, error_text=error_text)
        except Exception:
            log_failure("on_tool_end")

    def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            run = self._tracker.pop(run_id)
            if run is None:
                return
            self._tracker.finish(run, error=error)
        except Exception:
            log_failure("on_tool_error")

    # --- retrievers --------------------------------------------------------------------------
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if not self._active():
                return
            name, attrs = attributes.retriever_start_attributes(serialized, query, kwargs)
            self._tracker.start("tool", run_id, parent_run_id, name, f"{sc.OP_EXECUTE_TOOL} {name}", attrs, metadata)
        except Exception:
            log_failure("on_retriever_start")

    def on_retriever_end(
        self, documents: Sequence[Any], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            run = self._tracker.pop(run_id)
            if run is None:
                return
            self._tracker.finish(run, attributes=attributes.retriever_end_attributes(documents))
        except Exception:
            log_failure("on_retriever_end")

    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self.on_tool_error(error, run_id=run_id, parent_run_id=parent_run_id)

    # --- custom events -----------------------------------------------------------------------
    def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if not self._active():
                return
            run = self._tracker.lookup(run_id)
            if run is None:
                return
            events.record(run, str(name), **events.custom_event_fields(run, data))
        except Exception:
            log_failure("on_custom_event")


def _is_bubble_up(error: BaseException) -> bool:
    """LangGraph's ``GraphBubbleUp`` (``GraphInterrupt``, ``ParentCommand``): control flow, not a
    failure (recognised by class name: this module does not import LangGraph)."""
    return any(cls.__name__ == "GraphBubbleUp" for cls in type(error).__mro__)
