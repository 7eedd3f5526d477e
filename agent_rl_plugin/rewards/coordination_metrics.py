"""Coordination metrics of a multi-agent run: rounds, last-round votes, consensus, a summary.

The definitions shared by the ``coordination`` reward
(:mod:`agent_rl_plugin.rewards.builtin.coordination`) and the report's coordination section.
An *event* is any object with ``event_type``, ``round`` (``None`` when not recorded),
``agent_id``, ``target`` and ``index`` (its position in the rollout): a
:class:`~agent_rl_plugin.rewards.rollout.Step` of kind ``event``, or a plain namespace built
from the ``events`` view. Events are given in rollout order.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeVar

from agent_rl_plugin import semconv as sc


class CoordinationEvent(Protocol):
    """What the metrics read from an event (read-only: a ``Step`` computes them)."""

    @property
    def event_type(self) -> str | None: ...
    @property
    def round(self) -> int | None: ...
    @property
    def agent_id(self) -> str | None: ...
    @property
    def target(self) -> str | None: ...
    @property
    def index(self) -> int: ...


E = TypeVar("E", bound=CoordinationEvent)


def count_rounds(events: Sequence[CoordinationEvent]) -> int:
    """max(event round) + 1 when any event carries a round, else restarts + 1."""
    rounds = [s.round for s in events if s.round is not None]
    if rounds:
        return max(rounds) + 1
    return sum(1 for s in events if s.event_type == sc.EVENT_TYPE_RESTART) + 1


def last_round_votes(events: Sequence[E]) -> list[E]:
    """Votes of the last voting round, one per agent (its latest vote).

    The last round is the highest round among votes that carry one; when no vote has a round,
    it is the votes after the last restart event (all votes when there was no restart).
    """
    votes = [s for s in events if s.event_type == sc.EVENT_TYPE_VOTE]
    with_round = [s.round for s in votes if s.round is not None]
    if with_round:
        last = max(with_round)
        votes = [s for s in votes if s.round == last]
    else:
        restarts = [s.index for s in events if s.event_type == sc.EVENT_TYPE_RESTART]
        if restarts:
            votes = [s for s in votes if s.index > max(restarts)]
    latest: dict[Any, E] = {}
    for position, vote in enumerate(votes):
        latest[vote.agent_id if vote.agent_id else ("anonymous", position)] = vote
    return list(latest.values())


def consensus(events: Sequence[CoordinationEvent]) -> tuple[bool, dict[str, Any]]:
    """Consensus: a final_answer event exists, and strictly more than half of the last round's
    votes name (``target``) the agent that gave it (the final_answer's ``agent_id``, else its
    ``target``). No votes means no consensus. Returns the verdict and its facts."""
    finals = [s for s in events if s.event_type == sc.EVENT_TYPE_FINAL_ANSWER]
    votes = last_round_votes(events)
    facts: dict[str, Any] = {"has_final_answer": bool(finals), "last_round_votes": len(votes)}
    if not finals:
        return False, facts
    winner = finals[-1].agent_id or finals[-1].target
    in_favour = sum(1 for v in votes if winner and v.target == winner)
    facts.update(winner=winner, votes_for_winner=in_favour)
    return bool(votes) and in_favour * 2 > len(votes), facts


def coordination_summary(events: Sequence[CoordinationEvent]) -> dict[str, Any]:
    """One rollout's coordination in numbers: ``rounds``, ``votes``, ``answers``, ``restarts``,
    ``agents`` (distinct agent ids), ``consensus`` (bool), ``winner`` and ``votes_for_winner``
    (``None`` without a final answer)."""
    verdict, facts = consensus(events)
    return {
        "rounds": count_rounds(events),
        "votes": sum(1 for e in events if e.event_type == sc.EVENT_TYPE_VOTE),
        "answers": sum(1 for e in events if e.event_type == sc.EVENT_TYPE_NEW_ANSWER),
        "restarts": sum(1 for e in events if e.event_type == sc.EVENT_TYPE_RESTART),
        "agents": len({e.agent_id for e in events if e.agent_id}),
        "consensus": verdict,
        "winner": facts.get("winner"),
        "votes_for_winner": facts.get("votes_for_winner"),
    }


__all__ = ["CoordinationEvent", "consensus", "coordination_summary", "count_rounds", "last_round_votes"]
