"""Coordination events from MassGen's own ``CoordinationTracker``.

MassGen's orchestrator tells its ``coordination_tracker`` everything that happens (answers,
votes, restarts, the final presenter and answer); every such fact goes through the tracker's
``_add_event``. :func:`observe_tracker` wraps that method on the tracker *instance*: after the
tracker has done its work, the event is re-recorded with :func:`agent_rl_plugin.record_event`
on the current span (the orchestrator's), with the field names the core rewards read:

==========================  =======================  ============================================
MassGen event               ``event_type``           fields
==========================  =======================  ============================================
``new_answer``              ``new_answer``           agent_id, round, content (the answer), label
``vote_cast``               ``vote``                 agent_id (voter), target (voted-for agent),
                                                     reason, round, voted_for_label, available
``restart_triggered``       ``restart``              agent_id (whose answer caused it), affected
``restart_completed``       ``restart_completed``    agent_id, round (the agent's new round)
``final_agent_selected``    ``final_agent_selected`` agent_id, vote_summary
``final_round_start``       ``final_round_start``    agent_id, final_round
``final_answer``            ``final_answer``         agent_id (who gave it), content, label
others (errors, timeouts,   their MassGen name       agent_id, round, details
vote_ignored, broadcasts,
checkpoints...)
==========================  =======================  ============================================

Bookkeeping events (session start/end, iteration start/end, status changes, context received)
are not recorded. ``round`` is MassGen's per-agent round (0 for the first answers, +1 after each
restart); final-presentation events carry ``final_round`` in their data instead, so counting
rounds from events counts coordination rounds only.
"""

from __future__ import annotations

import logging
from typing import Any

from agent_rl_plugin.integration import record_event

from agent_rl_massgen.runs import current_run

logger = logging.getLogger(__name__)

__all__ = ["observe_tracker", "unobserve_tracker", "SKIPPED_EVENTS"]

SKIPPED_EVENTS = frozenset(
    {"session_start", "session_end", "iteration_start", "iteration_end", "status_change", "context_received"}
)
_MARK = "__agent_rl_massgen_observed__"
_FINAL_EVENTS = frozenset({"final_answer", "final_agent_selected", "final_round_start"})


def _event_name(event: Any) -> str:
    kind = getattr(event, "event_type", None)
    return str(getattr(kind, "value", kind))


def _latest_answer(tracker: Any, agent_id: str | None) -> Any:
    answers = (getattr(tracker, "answers_by_agent", None) or {}).get(agent_id) or []
    return answers[-1] if answers else None


def fields_for(tracker: Any, event: Any) -> tuple[str, dict[str, Any]] | None:
    """(event type, record_event keyword arguments) for one tracker event, or ``None`` to skip."""
    name = _event_name(event)
    if name in SKIPPED_EVENTS:
        return None
    context = dict(getattr(event, "context", None) or {})
    agent_id = getattr(event, "agent_id", None)
    round_ = context.pop("round", None)
    context.pop("iteration", None)
    fields: dict[str, Any] = {"agent_id": agent_id}
    if name not in _FINAL_EVENTS:
        fields["round"] = round_
    if name == "new_answer":
        answer = _latest_answer(tracker, agent_id)
        fields["content"] = getattr(answer, "content", None)
        fields["label"] = context.get("label")
        return "new_answer", fields
    if name == "vote_cast":
        fields["target"] = context.get("voted_for")
        fields["reason"] = context.get("reason")
        fields["voted_for_label"] = context.get("voted_for_label")
        fields["available_answers"] = context.get("available_answers")
        return "vote", fields
    if name == "restart_triggered":
        fields["affected_agents"] = context.get("affected_agents")
        return "restart", fields
    if name == "restart_completed":
        fields["round"] = context.get("agent_round", round_)
        return "restart_completed", fields
    if name == "final_answer":
        final = (getattr(tracker, "final_answers", None) or {}).get(agent_id)
        fields["content"] = getattr(final, "content", None)
        fields["label"] = context.get("label")
        fields["final_round"] = round_
        return "final_answer", fields
    if name == "final_agent_selected":
        fields["vote_summary"] = context.get("vote_summary")
        fields["final_round"] = round_
        return "final_agent_selected", fields
    if name == "final_round_start":
        fields["final_round"] = context.get("final_round", round_)
        return "final_round_start", fields
    details = getattr(event, "details", None)
    if details:
        fields["details"] = details
    if context:
        fields["context"] = context
    return name, fields


def _record(tracker: Any, event: Any) -> None:
    found = fields_for(tracker, event)
    if found is None:
        return
    event_type, fields = found
    fields = {k: v for k, v in fields.items() if v is not None}
    record_event(event_type, **fields)
    run = current_run()
    if run is not None:
        run.add_event(event_type, fields)


def observe_tracker(tracker: Any) -> bool:
    """Re-record ``tracker``'s events (once per tracker). Returns whether newly observed."""
    try:
        current = tracker.__dict__.get("_add_event")
        if current is not None and getattr(current, _MARK, False):
            return False
        original = tracker._add_event
    except Exception:
        return False

    def _add_event(*args: Any, **kwargs: Any) -> Any:
        events = getattr(tracker, "events", None)
        before = len(events) if isinstance(events, list) else None
        result = original(*args, **kwargs)
        try:
            if before is not None and len(events) > before:
                for event in events[before:]:
                    _record(tracker, event)
        except Exception:
            logger.warning("agent-rl-massgen: could not record a coordination event", exc_info=True)
        return result

    setattr(_add_event, _MARK, True)
    _add_event.__wrapped__ = original  # type: ignore[attr-defined]
    try:
        tracker.__dict__["_add_event"] = _add_event
    except Exception:
        return False
    return True


def unobserve_tracker(tracker: Any) -> None:
    """Undo :func:`observe_tracker`."""
    try:
        current = tracker.__dict__.get("_add_event")
        if current is not None and getattr(current, _MARK, False):
            del tracker.__dict__["_add_event"]
    except Exception:
        pass
