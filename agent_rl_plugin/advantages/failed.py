"""The policy for rollouts that did not end ``ok`` (one definition, used by advantages and datasets).

A rollout that raised (outcome ``error``), ran past its time limit (``timeout``: its error type is
``TimeoutError``, as :func:`~agent_rl_plugin.rollouts.run_rollouts` records it) or was
cancelled (``cancelled``: :class:`asyncio.CancelledError`, a closed stream, or
``KeyboardInterrupt``) is kept in the store with its status and error. What advantages and
datasets do with it is :data:`FailedRollouts`:

* ``"exclude"`` (the default): it is left out, as if it had not been selected;
* ``"zero_reward"``: it is kept and its episode reward is taken as 0, whether it has reward rows
  or not (step rewards are kept as recorded);
* ``"keep"``: it is kept with whatever episode reward it has; one without a usable reward is
  still left out, as any unscored rollout.

Every reader reports what the policy did with :func:`failed_report` (a JSON-ready dict:
``{"policy", "failed", "by_outcome", "excluded", "zeroed", "kept", "examples"}``).
This module is pure Python (no store); the SQL that classifies rollouts is in
:mod:`agent_rl_plugin.rl.failed`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal, Sequence, get_args

from agent_rl_plugin.errors import AgentRLError

#: What to do with a rollout that ended in error, timeout or cancellation.
FailedRollouts = Literal["exclude", "zero_reward", "keep"]
#: The values of :data:`FailedRollouts`, in the order the CLI lists them.
FAILED_ROLLOUT_POLICIES: tuple[FailedRollouts, ...] = get_args(FailedRollouts)
#: The policy used when none is given.
DEFAULT_FAILED_ROLLOUTS: FailedRollouts = "exclude"
#: How a rollout ended; every value but ``"ok"`` is a failed rollout.
OUTCOMES = ("ok", "error", "timeout", "cancelled")
#: How many failed rollout ids a report keeps as examples.
MAX_EXAMPLES = 5


class FailedRolloutsError(AgentRLError, ValueError):
    """An unknown failed-rollout policy."""


def check_failed_rollouts(value: Any) -> FailedRollouts:
    """``value`` as a :data:`FailedRollouts` (``None`` gives the default); anything else raises
    :class:`FailedRolloutsError`."""
    if value is None:
        return DEFAULT_FAILED_ROLLOUTS
    if isinstance(value, str) and value in FAILED_ROLLOUT_POLICIES:
        return value
    raise FailedRolloutsError(
        f"unknown failed_rollouts policy {value!r}",
        f"use one of {', '.join(FAILED_ROLLOUT_POLICIES)} (default {DEFAULT_FAILED_ROLLOUTS})",
    )


def failed_report(policy: FailedRollouts, ids: Sequence[str], outcomes: Sequence[str]) -> dict[str, Any]:
    """What ``policy`` did to the failed rollouts ``ids`` (with their ``outcomes``, same order):
    ``failed`` (how many), ``by_outcome`` (``{"error": n, "timeout": n, "cancelled": n}``), the
    count the policy ``excluded``, ``zeroed`` (reward taken as 0) or ``kept`` (own reward:
    one of them without a usable reward is then left out as unscored), and up to
    :data:`MAX_EXAMPLES` example ids."""
    if len(ids) != len(outcomes):
        raise ValueError(f"{len(ids)} rollout ids but {len(outcomes)} outcomes")
    counts = Counter(outcomes)
    n = len(ids)
    return {
        "policy": policy,
        "failed": n,
        "by_outcome": {outcome: counts.get(outcome, 0) for outcome in OUTCOMES[1:]},
        "excluded": n if policy == "exclude" else 0,
        "zeroed": n if policy == "zero_reward" else 0,
        "kept": n if policy == "keep" else 0,
        "examples": [str(i) for i in ids[:MAX_EXAMPLES]],
    }


def describe_failed(report: dict[str, Any]) -> str | None:
    """One line for people (``None`` when no rollout failed), e.g. ``"3 failed rollout(s)
    (1 error, 1 timeout, 1 cancelled) excluded (--failed-rollouts exclude)"``."""
    n = report.get("failed", 0)
    if not n:
        return None
    parts = ", ".join(f"{count} {outcome}" for outcome, count in report.get("by_outcome", {}).items() if count)
    policy = report.get("policy", DEFAULT_FAILED_ROLLOUTS)
    action = {
        "exclude": "excluded",
        "zero_reward": "kept with episode reward 0",
        "keep": "kept with their own reward",
    }.get(policy, policy)
    return f"{n} failed rollout(s) ({parts}) {action} (--failed-rollouts {policy})"


__all__ = [
    "DEFAULT_FAILED_ROLLOUTS",
    "FAILED_ROLLOUT_POLICIES",
    "OUTCOMES",
    "FailedRollouts",
    "FailedRolloutsError",
    "check_failed_rollouts",
    "describe_failed",
    "failed_report",
]
