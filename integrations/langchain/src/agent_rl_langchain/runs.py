"""The LangChain runs a handler records: their spans, their rollouts, the context they make current.

:class:`Run` is one recorded run (its span, the OTel context holding it, its rollout, its
recorded parent and root). :class:`RunTracker` is the per-handler table of them, thread-safe
(one lock), keyed by LangChain's run ids:

* ``start`` opens a run's span under its nearest recorded ancestor (or, for an outermost run,
  under the current OTel span and rollout; an outermost *agent* run outside any rollout opens
  its own, implicit rollout and fires the rollout hooks) and, by default, makes its span and
  rollout current in the calling context (:meth:`RunTracker.enter`);
* ``finish`` sets the final attributes and error, ends the spans of the root's runs that never
  ended (``agent_rl.langchain.unfinished``), fires the rollout end of an implicit rollout, puts
  the calling context back (only where it still holds the values the run set) and ends the span
  -- always, even when recording its attributes failed;
* runs not recorded (hidden, or chains with ``record_chains=False``) are *skipped*: they map to
  their nearest recorded ancestor, so their children hang from it; skipped chains that may turn
  out to be LangGraph graphs are kept *pending* with what is needed to record them later.

Context switching never raises (failures are logged once); ``start`` raises what starting a
span raises, and the handler catches it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Mapping
from uuid import UUID

from opentelemetry import context as otel_context
from opentelemetry import trace

from agent_rl_langchain.attributes import langgraph_attributes
from agent_rl_plugin import integration as rl
from agent_rl_plugin.integration import (
    RolloutInfo,
    end_span,
    log_failure,
    record_error,
    record_error_text,
    set_attributes,
)
from agent_rl_plugin.integration import semconv as sc

__all__ = ["RUN_ID", "UNFINISHED", "Run", "PendingChain", "RunTracker", "is_ancestor"]

RUN_ID = "langchain.run.id"
UNFINISHED = "agent_rl.langchain.unfinished"

# A chain run not recorded at its start (record_chains=False) that may turn out to be a graph:
# (name, inputs, parent_run_id, metadata, start time in ns).
PendingChain = tuple[str, Any, UUID | None, Any, int]


@dataclass(eq=False)
class Run:
    """One recorded LangChain run: its span and what it made current."""

    kind: str  # agent | chain | llm | tool
    name: str
    span: trace.Span
    ctx: otel_context.Context
    rollout: RolloutInfo | None
    parent: Run | None
    root: Run  # the outermost recorded run of this tree (itself for a root)
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
        run: Run | None = self
        while run is not None:
            if run.is_agent:
                return run.name
            run = run.parent
        return None


def is_ancestor(run: Run, descendant: Run | None) -> bool:
    """Whether ``run`` is ``descendant`` or one of its recorded ancestors."""
    while descendant is not None:
        if descendant is run:
            return True
        descendant = descendant.parent
    return False


class RunTracker:
    """The runs one handler has open, skipped or pending (see the module docstring)."""

    def __init__(self) -> None:
        self._runs: dict[UUID, Run] = {}
        self._skipped: dict[UUID, Run | None] = {}  # run not recorded -> its recorded ancestor
        # record_chains=False: chain runs not recorded yet, which may turn out to be graphs
        self._pending: dict[UUID, PendingChain] = {}
        self._attached: dict[int, Run] = {}  # id(context made current by enter) -> run
        self._lock = threading.Lock()

    # --- lookups -----------------------------------------------------------------------------
    def parent(self, parent_run_id: UUID | None) -> tuple[bool, Run | None]:
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

    def lookup(self, run_id: UUID) -> Run | None:
        """The recorded run of this id, or the recorded ancestor of a skipped one."""
        with self._lock:
            return self._runs.get(run_id) or self._skipped.get(run_id)

    def langchain_parent(self) -> Run | None:
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
        return self.lookup(run_id)

    # --- skipped and pending runs ------------------------------------------------------------
    def skip(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        """Do not record this run: its children hang from its parent's nearest recorded run."""
        known, parent = self.parent(parent_run_id)
        with self._lock:
            self._skipped[run_id] = parent if known else None

    def defer(self, run_id: UUID, pending: PendingChain) -> None:
        """Keep what recording a skipped chain run needs, should it turn out to be a graph."""
        with self._lock:
            self._pending[run_id] = pending

    def is_pending(self, run_id: UUID) -> bool:
        return run_id in self._pending

    def take_pending(self, run_id: UUID) -> PendingChain | None:
        """Forget a pending run (pending and skipped) to record it now: what :meth:`defer` kept."""
        with self._lock:
            pending = self._pending.pop(run_id, None)
            self._skipped.pop(run_id, None)
        return pending

    def pop_pending(self, run_id: UUID) -> tuple[PendingChain | None, Run | None]:
        """(pending, ancestor) of an ending run: what :meth:`defer` kept (now forgotten) and the
        recorded ancestor it was skipped to, if any."""
        with self._lock:
            return self._pending.pop(run_id, None), self._skipped.get(run_id)

    def discard_pending(self, run_id: UUID) -> None:
        with self._lock:
            self._pending.pop(run_id, None)

    # --- start -------------------------------------------------------------------------------
    def start(
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
    ) -> Run | None:
        """Record a run: start its span (``attributes`` plus its LangGraph node/step and run id),
        register it, make it current when ``enter`` (see the module docstring)."""
        _, parent = self.parent(parent_run_id)
        if parent_run_id is None:
            parent = self.langchain_parent()
        # A run of ours whose span is current here but that is not an ancestor of this one (it
        # was started in this same context: RunnableSequence.batch starts every input's run
        # before running any, generate() one run per prompt; or its context was copied here, or
        # it never ended): undo it here first, so this run neither nests under it nor inherits
        # its rollout.
        holder = self.holder()
        if holder is not None and not is_ancestor(holder, parent):
            self.restore(holder)
        attributes.update(langgraph_attributes(metadata))
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
        run = Run(
            kind=kind,
            name=name,
            span=span,
            ctx=ctx,
            rollout=rollout,
            parent=parent,
            root=None,  # type: ignore[arg-type]
            node=(metadata or {}).get("langgraph_node"),
            implicit=implicit,
            inputs=inputs,
        )
        run.root = parent.root if parent is not None else run
        with self._lock:
            self._runs[run_id] = run
        if enter:
            self.enter(run)
        if implicit:
            rl.fire_rollout_start(rollout)  # type: ignore[arg-type]
        return run

    # --- the calling context -----------------------------------------------------------------
    def holder(self) -> Run | None:
        """The run of ours whose span :meth:`enter` made current in this context, if any."""
        try:
            current = otel_context.get_current()
        except Exception:
            return None
        with self._lock:
            run = self._attached.get(id(current))
        return run if run is not None and run.attached is current else None

    def enter(self, run: Run) -> None:
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

    def restore(self, run: Run) -> None:
        """In the calling context only: put back what :meth:`enter` replaced, where the values
        are still the ones it set."""
        try:
            if run.attached is not None and otel_context.get_current() is run.attached:
                otel_context.attach(run.previous)  # type: ignore[arg-type]
            if run.set_rollout and rl.current_rollout() is run.rollout:
                rl.set_current_rollout(run.previous_rollout)
        except Exception:
            log_failure("leaving a LangChain run's context")

    def leave(self, run: Run) -> None:
        """The run ended: :meth:`restore` here, and forget its context."""
        self.restore(run)
        if run.attached is not None:
            with self._lock:
                self._attached.pop(id(run.attached), None)

    # --- end ---------------------------------------------------------------------------------
    def pop(self, run_id: UUID) -> Run | None:
        """Forget an ending run: the recorded run of this id (``None`` for a skipped or unknown
        one, which is forgotten too)."""
        with self._lock:
            run = self._runs.pop(run_id, None)
            if run is None:
                self._skipped.pop(run_id, None)
            return run

    def finish(
        self,
        run: Run,
        error: BaseException | None = None,
        attributes: dict[str, Any] | None = None,
        error_text: str | None = None,
    ) -> None:
        """End a run popped by :meth:`pop` (see the module docstring); never raises."""
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
                self.end_leftovers(run)
            if run.implicit and run.rollout is not None:
                rl.fire_rollout_end(run.rollout, rl.rollout_status(error), error)
        except Exception:
            log_failure("finishing a LangChain run")
        finally:
            run.ended = True
            self.leave(run)
            end_span(run.span)

    def end_leftovers(self, root: Run) -> None:
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
