"""Checks a span must pass on its way into the store, from this process or any sender.

Contract:

* :func:`check_ids` raises :class:`InvalidSpan` for an all-zero trace or span id (OpenTelemetry
  calls such ids invalid; a sender that produces them is broken or forging rows). The span is
  not stored and is counted as dropped.
* :func:`fix_times` keeps a span whose end is before its start (a clock step, a forged
  duration), ending it at its start, so no row has a negative duration, and records the
  difference in the attribute ``agent_rl.span.end_before_start_ns``.
* :func:`cap_attributes` bounds the encoded attributes of one span to ``budget`` characters
  (each value is already cut at ``max_attribute_size``; this caps how many there are): the
  store's own keys (``agent_rl.*``, ``gen_ai.*``) are kept first, then the others in order
  while they fit; ``agent_rl.attributes.dropped`` says how many were left out.
"""

from __future__ import annotations

from typing import Any, Callable

from agent_rl_plugin.errors import AgentRLError

#: Default for the encoded attributes of one span (characters): 32 values at the default
#: ``max_attribute_size`` of 32,768.
MAX_SPAN_ATTRIBUTES_SIZE = 1_048_576
END_BEFORE_START = "agent_rl.span.end_before_start_ns"
DROPPED_ATTRIBUTES = "agent_rl.attributes.dropped"
_OWN_PREFIXES = ("agent_rl.", "gen_ai.")


class InvalidSpan(AgentRLError, ValueError):
    """A span that cannot be stored as it is; the message says why."""


def check_ids(trace_id: int, span_id: int) -> None:
    """Raise :class:`InvalidSpan` for an all-zero trace or span id."""
    if not trace_id:
        raise InvalidSpan("a span with the all-zero (invalid) trace id was refused")
    if not span_id:
        raise InvalidSpan("a span with the all-zero (invalid) span id was refused")


def fix_times(attrs: dict[str, Any], start: int | None, end: int | None) -> int | None:
    """The end to store: ``end``, or ``start`` when it is earlier (noted in ``attrs``)."""
    if start is not None and end is not None and end < start:
        attrs[END_BEFORE_START] = start - end
        return start
    return end


def cap_attributes(attrs: dict[str, Any], budget: int, encode: Callable[[dict[str, Any]], str]) -> str:
    """The JSON of ``attrs`` within ``budget`` characters (see the module contract)."""
    own = [k for k in attrs if isinstance(k, str) and k.startswith(_OWN_PREFIXES)]
    others = [k for k in attrs if k not in set(own)]
    kept: dict[str, Any] = {}
    used = 2
    dropped = 0
    for key in own + others:
        size = len(encode({key: attrs[key]})) - 1  # the pair and its comma
        if used + size + 40 > budget:  # room for the dropped count
            dropped += 1
            continue
        kept[key] = attrs[key]
        used += size
    if dropped:
        kept[DROPPED_ATTRIBUTES] = dropped
    return encode(kept)
