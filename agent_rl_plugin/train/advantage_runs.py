"""Which stored ``agent-rl advantages compute`` run a GiGPO training run reuses:
:func:`latest_matching_run`.

Contract: a stored run matches a training selection when

* its method is ``gigpo``;
* it was computed over the same selection: the same ``where`` condition (``None`` for every
  rollout; surrounding whitespace ignored), and neither explicit rollout ids nor a rollouts run
  (a training ``sql`` selection never matches: ``advantages compute`` takes no query);
* it combined the same rewards: the same reward names (``None``: every reward), and where the
  run stored weights, the same weights;
* it is not stale: it covers at least one selected rollout and no selected rollout started
  after it was written.

Of the matching runs the newest is used. The parameters of the computation (omega, gamma,
mode...) are the stored run's: reusing it is the point.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping


@dataclass(frozen=True)
class StoredAdvantageRun:
    """One stored advantages run: its id, when it was written, how many rows, its parameters."""

    run_id: str
    created_at: datetime
    n_rows: int
    parameters: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``"<run_id> (gigpo, <n> rows, computed <time>)"``."""
        return f"{self.run_id} (gigpo, {self.n_rows} rows, computed {self.created_at:%Y-%m-%d %H:%M:%S})"


def _same_where(stored: Any, wanted: str | None) -> bool:
    def clean(value: Any) -> str | None:
        text = str(value).strip() if value is not None else ""
        return text or None

    return clean(stored) == clean(wanted)


def _same_rewards(parameters: Mapping[str, Any], weights: Mapping[str, float] | None) -> bool:
    names = sorted(weights) if weights else None
    if (parameters.get("rewards") or None) != names:
        return False
    stored = parameters.get("weights") or None
    if stored is None or not weights:
        return True
    return {str(k): float(v) for k, v in stored.items()} == {str(k): float(v) for k, v in weights.items()}


def latest_matching_run(
    db: str, *, where: str | None = None, sql: str | None = None, weights: Mapping[str, float] | None = None
) -> StoredAdvantageRun | None:
    """The newest stored GiGPO advantages run that matches this selection (see the module
    contract), or ``None`` (none stored, none matching, or the store has no advantages table)."""
    if sql:
        return None
    from agent_rl_plugin.data.sql import open_store, select_rollouts

    with open_store(db) as connection:
        try:
            runs = connection.execute(
                "SELECT run_id, any_value(parameters), max(created_at), count(*) FROM advantages "
                "WHERE method = 'gigpo' GROUP BY run_id ORDER BY max(created_at) DESC"
            ).fetchall()
        except Exception:  # duckdb.CatalogException: no advantages table yet
            return None
        candidates = []
        for run_id, raw, created_at, n_rows in runs:
            parameters = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
            if parameters.get("rollout_ids") is not None or parameters.get("rollout_run_id") is not None:
                continue
            if _same_where(parameters.get("where"), where) and _same_rewards(parameters, weights):
                candidates.append(StoredAdvantageRun(str(run_id), created_at, int(n_rows), parameters))
        if not candidates:
            return None
        selected = select_rollouts(connection, where, None)
        ids = [str(v) for v in selected.column("rollout_id").to_pylist()]
        if not ids:
            return None
        newest = connection.execute(
            "SELECT max(start_time) FROM rollouts WHERE rollout_id IN (SELECT unnest(?))", [ids]
        ).fetchone()
        newest_start = newest[0] if newest else None
        for run in candidates:
            if newest_start is not None and _naive(newest_start) > _naive(run.created_at):
                continue  # rollouts recorded after the computation: stale
            covered = connection.execute(
                "SELECT count(DISTINCT rollout_id) FROM advantages WHERE run_id = ? AND rollout_id IN (SELECT unnest(?))",
                [run.run_id, ids],
            ).fetchone()
            if covered and covered[0]:
                return run
    return None


def _naive(value: datetime) -> datetime:
    from datetime import UTC

    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo is not None else value


__all__ = ["StoredAdvantageRun", "latest_matching_run"]
