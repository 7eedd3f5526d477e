"""agent-rl events recorded from LangChain runs: handoffs, final answers, custom events.

Every event goes through :func:`record`: ``arl.record_event`` with the run's span current and
its rollout the current rollout (both put back afterwards), so the event lands on that span, in
that rollout, whatever the calling context holds. The functions here raise what
``record_event`` or the conversions raise; the handler's callbacks catch it.

* :func:`record_handoffs`: one ``handoff`` event per target of every LangGraph
  ``Command(goto=...)`` in a node's or a tool's output, each ``Command`` once per root run;
* :func:`record_final_answer`: a ``final_answer`` event when an outermost run's output holds
  ``messages`` ending with an AI message without tool calls (its text);
* :func:`custom_event_fields`: the event columns of a ``dispatch_custom_event(name, data)``.
"""

from __future__ import annotations

from typing import Any, Mapping

from opentelemetry import context as otel_context

from agent_rl_langchain import convert
from agent_rl_langchain.runs import Run
from agent_rl_plugin import integration as rl
from agent_rl_plugin.integration import capture_content, record_event
from agent_rl_plugin.integration import semconv as sc

__all__ = ["EVENT_HANDOFF", "EVENT_FIELDS", "record", "record_handoffs", "record_final_answer", "custom_event_fields"]

EVENT_HANDOFF = "handoff"
EVENT_FIELDS = ("round", "agent_id", "target", "reason", "content")  # data keys that become event columns


def record(run: Run, event_type: str, **fields: Any) -> None:
    """``arl.record_event`` on the run's span, in its rollout."""
    token = otel_context.attach(run.ctx)
    rollout_token = rl.set_current_rollout(run.rollout)
    try:
        record_event(event_type, **fields)
    finally:
        rl.reset_current_rollout(rollout_token)
        otel_context.detach(token)


def record_handoffs(run: Run, output: Any, via: str, node: str | None = None) -> None:
    """A ``handoff`` event per ``Command(goto=...)`` in a node's or a tool's output, on
    ``run``'s span. ``via``: ``"node"`` or ``"tool"``. ``node``: the node that returned it when
    ``run`` is its recorded ancestor (``record_chains=False``). A ``Command`` already recorded
    under the same root run is skipped."""
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
            record(run, EVENT_HANDOFF, agent_id=source, target=target, **data)


def record_final_answer(run: Run, outputs: Any) -> None:
    """A ``final_answer`` event (``agent_id`` = the run's name) when ``outputs["messages"]``
    ends with an AI message that has text and no tool calls; nothing otherwise."""
    messages = outputs.get("messages") if isinstance(outputs, Mapping) else None
    if not isinstance(messages, (list, tuple)) or not messages:
        return
    last = messages[-1]
    if getattr(last, "type", None) not in ("ai", "AIMessageChunk") or getattr(last, "tool_calls", None):
        return
    text = convert.text_of(last)
    if text:
        record(run, sc.EVENT_TYPE_FINAL_ANSWER, agent_id=run.name, content=text)


def custom_event_fields(run: Run, data: Any) -> dict[str, Any]:
    """The keyword fields of a custom event dispatched under ``run``: a mapping's
    :data:`EVENT_FIELDS` keys as columns (``agent_id`` defaulting to the nearest agent run's
    name), its other keys (JSON-able) as data; any other non-``None`` data as ``value``."""
    fields: dict[str, Any] = {}
    if isinstance(data, Mapping):
        extra = {}
        for key, value in data.items():
            if key in EVENT_FIELDS:
                fields[key] = value
            else:
                extra[str(key)] = convert.jsonable(value)
        if "agent_id" not in fields and run.agent_name():
            fields["agent_id"] = run.agent_name()
        fields.update(extra)
    elif data is not None:
        fields["value"] = convert.jsonable(data)
    return fields
