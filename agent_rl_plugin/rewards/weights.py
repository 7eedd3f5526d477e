"""The weights of the combined episode reward: recorded by scoring, explained per rollout.

One rule (``docs/scoring.md``): a rollout's episode reward is ``sum(w * v) / sum(w)`` over the
reward names it has, ``v`` the value that counts for the name (the ``episode_rewards`` view) and
``w`` the name's weight in the ``reward_weights`` table, 1.0 when the name has none (emitted
rewards, names never scored by a plugin). That is ``rollouts.total_reward``; datasets,
advantages and the report read the same weights unless given reward names or weights of their
own.

* :func:`record_weights`: what :func:`~agent_rl_plugin.rewards.runner.score` calls with the
  weight of every reward it ran (the class default, ``[rewards.NAME] weight`` or ``-r NAME=W``);
  a name keeps one row, replaced when its weight changes.
* :func:`stored_weights`: those weights, by name.
* :func:`explain`: one rollout's components, the weight each counts with, its contribution and
  the sum, which is ``rollouts.total_reward`` (the same SQL computes both).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Mapping

import duckdb

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.store.views import COMBINED_REWARD

#: What ``reward_weights.set_by`` says for weights recorded by scoring.
SET_BY_SCORE = "agent-rl score"


class ExplainError(AgentRLError, LookupError):
    """The rollout to explain cannot be found, or a prefix matches several; ``hint`` says what to do."""


#: The largest weight accepted: weights are relative (the sum divides), and larger ones overflow
#: ``sum(weight * value)`` to infinity (``1e308`` made every total 0 or NaN).
MAX_WEIGHT = 1e6


def check_weights(weights: Mapping[str, Any]) -> dict[str, float]:
    """``weights`` as ``{name: float}``; ``ValueError`` for a weight that is not a finite number
    from 0 to :data:`MAX_WEIGHT`. A negative weight is refused: the combined reward divides by
    the sum of weights, so with mixed signs it leaves the range of the values (weights 1 and
    -0.99 multiply it by 100) or inverts it, and a sum of 0 makes every total NULL. Weight 0
    keeps a reward shown but not counted."""
    out: dict[str, float] = {}
    for name, weight in weights.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise ValueError(f"weight of reward {name!r} must be a finite number, got {weight!r}")
        if not 0 <= weight <= MAX_WEIGHT:
            raise ValueError(f"weight of reward {name!r} must be from 0 to {MAX_WEIGHT:g}, got {weight!r}")
        out[str(name)] = float(weight)
    return out


def stored_weights(connection: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """``{name: weight}`` recorded in ``reward_weights`` (empty for a store without the table)."""
    try:
        rows = connection.execute("SELECT name, weight FROM reward_weights ORDER BY name").fetchall()
    except duckdb.CatalogException:  # a read-only snapshot of a store older than the table
        return {}
    return {str(name): float(weight) for name, weight in rows}


def record_weights(db_path: str, weights: Mapping[str, float], set_by: str = SET_BY_SCORE) -> dict[str, float]:
    """Record ``weights`` in ``reward_weights`` of ``db_path`` (a row per name, replaced when the
    weight changes); returns the names whose weight changed (or was new) with their weight. The
    write lock is taken only when something changes."""
    from agent_rl_plugin.store import connect_writer, open_reader
    from agent_rl_plugin.store.transaction import arrow_transaction

    wanted = check_weights(weights)
    if not wanted:
        return {}
    reader = open_reader(db_path)
    try:
        current = stored_weights(reader)
    finally:
        reader.close()
    changed = {name: w for name, w in wanted.items() if current.get(name) != w}
    if not changed:
        return {}
    connection = connect_writer(db_path, what="agent-rl score (recording reward weights)")
    try:
        with arrow_transaction(connection, {}):  # one transaction: all the weights or none
            connection.executemany(
                "INSERT OR REPLACE INTO reward_weights (name, weight, set_by, updated_at) "
                "VALUES (?, ?, ?, timezone('UTC', now()))",
                [[name, weight, set_by] for name, weight in changed.items()],
            )
    finally:
        connection.close()
    return changed


@dataclass
class Component:
    """One reward name of a rollout in its combined episode reward."""

    name: str
    value: float
    weight: float
    #: "recorded" (reward_weights) or "default" (no row: 1.0)
    weight_from: str
    #: weight * value / sum of the rollout's weights (None when the weights sum to 0)
    contribution: float | None
    source: str | None
    plugin: str | None
    created_at: datetime | None
    n_recorded: int


@dataclass
class Explanation:
    """Why a rollout has the episode reward it has (see :func:`explain`)."""

    rollout_id: str
    components: list[Component]
    weight_sum: float
    #: rollouts.total_reward: sum(weight * value) / sum(weight); None without a usable component
    total_reward: float | None
    #: reward rows of the rollout not in the sum: error rows and step rows, by name
    not_counted: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for component in out["components"]:
            created = component["created_at"]
            component["created_at"] = created.isoformat() if created is not None else None
        return out


def resolve_rollout(connection: duckdb.DuckDBPyConnection, rollout: str) -> str:
    """The rollout id that ``rollout`` (an id, or a prefix matching exactly one rollout) names;
    :class:`ExplainError` when none or several match."""
    if not rollout:
        raise ExplainError("no rollout given", "pass a rollout id or a prefix of one (agent-rl traces list)")
    exact = connection.execute("SELECT rollout_id FROM rollouts WHERE rollout_id = ?", [rollout]).fetchall()
    if exact:
        return str(exact[0][0])
    found = connection.execute(
        "SELECT rollout_id FROM rollouts WHERE starts_with(rollout_id, ?) ORDER BY rollout_id LIMIT 6", [rollout]
    ).fetchall()
    if not found:
        raise ExplainError(f"no rollout id starts with {rollout!r}", "list the rollouts with: agent-rl traces list")
    if len(found) > 1:
        shown = ", ".join(str(r[0]) for r in found[:5]) + (", ..." if len(found) > 5 else "")
        raise ExplainError(f"{rollout!r} matches several rollouts ({shown})", "give more characters of the id")
    return str(found[0][0])


def explain(connection: duckdb.DuckDBPyConnection, rollout: str) -> Explanation:
    """Each episode reward component of ``rollout`` (an id or a unique prefix): its value, the
    weight it counts with (recorded, or the default 1.0), its contribution ``w * v / sum(w)``,
    and the total: ``rollouts.total_reward``, read from the view itself so it is the number
    every reader uses. Raises :class:`ExplainError` for an unknown or ambiguous rollout."""
    rollout_id = resolve_rollout(connection, rollout)
    rows = connection.execute(
        """SELECT e.name, e.value, e.weight, w.name IS NOT NULL AS recorded, e.source, e.plugin,
                  e.created_at, e.n_recorded
           FROM episode_rewards e LEFT JOIN reward_weights w ON w.name = e.name
           WHERE e.rollout_id = ? ORDER BY e.name""",
        [rollout_id],
    ).fetchall()
    weight_sum = float(sum(r[2] for r in rows))
    total = connection.execute("SELECT total_reward FROM rollouts WHERE rollout_id = ?", [rollout_id]).fetchone()
    components = [
        Component(
            name=str(name),
            value=float(value),
            weight=float(weight),
            weight_from="recorded" if recorded else "default",
            contribution=(float(weight) * float(value) / weight_sum) if weight_sum else None,
            source=source,
            plugin=plugin,
            created_at=created_at,
            n_recorded=int(n_recorded),
        )
        for name, value, weight, recorded, source, plugin, created_at, n_recorded in rows
    ]
    skipped = connection.execute(
        """SELECT name, count(*) FILTER (WHERE error IS NOT NULL) AS errors,
                  count(*) FILTER (WHERE step_index IS NOT NULL AND error IS NULL) AS steps
           FROM rewards WHERE rollout_id = ? AND (error IS NOT NULL OR step_index IS NOT NULL)
           GROUP BY name ORDER BY name""",
        [rollout_id],
    ).fetchall()
    return Explanation(
        rollout_id=rollout_id,
        components=components,
        weight_sum=weight_sum,
        total_reward=None if total is None or total[0] is None else float(total[0]),
        not_counted={str(n): {"error_rows": int(e), "step_rows": int(s)} for n, e, s in skipped},
    )


def combined_reward(connection: duckdb.DuckDBPyConnection, rollout_id: str) -> float | None:
    """The combined episode reward of one rollout computed from ``episode_rewards`` with
    :data:`~agent_rl_plugin.store.views.COMBINED_REWARD` (equal to ``rollouts.total_reward``)."""
    row = connection.execute(
        f"SELECT {COMBINED_REWARD} FROM episode_rewards e WHERE e.rollout_id = ?", [rollout_id]
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


__all__ = [
    "MAX_WEIGHT",
    "SET_BY_SCORE",
    "Component",
    "ExplainError",
    "Explanation",
    "check_weights",
    "combined_reward",
    "explain",
    "record_weights",
    "resolve_rollout",
]
