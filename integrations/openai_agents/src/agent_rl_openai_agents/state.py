"""What :class:`~agent_rl_openai_agents.processor.RLTracingProcessor` keeps per SDK trace and span.

:class:`TraceState`: one SDK trace in flight -- the OTel span standing for it (a rollout root,
or a ``workflow`` span inside a caller's rollout), the rollout attributes every span of it
carries, and what the trace's end records (the run's input, final output, error).
:class:`SpanState`: one SDK span in flight -- its kind, its parent (the SDK's tree), its OTel
span once opened, and what later spans need from it (an agent's first input and last output,
the tool calls of a turn's LLM output not yet matched to a tool execution...). Plain data: no
locking here (the processor holds its lock while it reads and writes its tables), no SDK import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_rl_plugin.integration import RolloutInfo

__all__ = ["TraceState", "SpanState"]


@dataclass
class TraceState:
    trace_id: str
    attrs: dict[str, str]
    span: Any  # our span for the trace (rollout root, or workflow span in a caller's rollout)
    info: RolloutInfo | None  # set when the trace is its own rollout
    outer: Any = None  # the caller's rollout span when the trace joined one
    first_input: Any = None
    final_output: str | None = None
    error: tuple[str, str | None] | None = None  # (kind, detail) of what ended the run


@dataclass
class SpanState:
    span_id: str
    kind: str
    trace: TraceState
    parent: SpanState | None
    start_ns: int
    otel: Any = None
    name: str | None = None  # agent name (agent spans)
    had_llm: bool = False  # turn spans: an LLM call was recorded inside
    first_child_ns: int | None = None
    pending_calls: list[dict[str, Any]] = field(default_factory=list)  # tool calls not yet run
    first_input: Any = None  # agent spans
    output: str | None = None  # agent spans: last LLM text without tool calls
    skipped: bool = False
    paused: Any = None  # LLM spans: the pause_client_capture() token while the call runs

    def ancestor(self, *kinds: str) -> SpanState | None:
        """The nearest ancestor (not this span) of one of ``kinds``."""
        node = self.parent
        while node is not None:
            if node.kind in kinds:
                return node
            node = node.parent
        return None

    def otel_parent(self) -> Any:
        """The OTel span to open this one under: the nearest ancestor's, else the trace's."""
        node = self.parent
        while node is not None:
            if node.otel is not None:
                return node.otel
            node = node.parent
        return self.trace.span
