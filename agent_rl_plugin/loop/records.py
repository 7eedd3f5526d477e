"""Rounds of a training loop in the store (table ``loop_rounds``, migration ``0010``): one row per
finished round, written when the round ends, so a loop that crashed resumes after its last
recorded round (its adapter is on disk, its rollouts, advantages and training run in the store).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent_rl_plugin.store.connection import connect_writer, open_reader

__all__ = ["LoopRound", "read_rounds", "write_round"]

_COLUMNS = (
    "loop_id",
    "round",
    "status",
    "env",
    "method",
    "seed",
    "policy_version",
    "adapter_path",
    "rollout_run_id",
    "advantage_run_id",
    "training_run_id",
    "train_success",
    "heldout_success",
    "seconds",
    "details",
)


@dataclass
class LoopRound:
    """One round (see the ``loop_rounds`` column docs in ``docs/schema.md``)."""

    loop_id: str
    round: int
    status: str
    env: str
    method: str
    seed: int
    policy_version: str
    adapter_path: str | None = None
    rollout_run_id: str | None = None
    advantage_run_id: str | None = None
    training_run_id: str | None = None
    train_success: float | None = None
    heldout_success: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_round(db_path: str | os.PathLike[str], row: LoopRound) -> None:
    """Append ``row`` to ``loop_rounds``."""
    values = [getattr(row, name) for name in _COLUMNS]
    values[_COLUMNS.index("seconds")] = json.dumps(row.seconds, sort_keys=True)
    values[_COLUMNS.index("details")] = json.dumps(row.details, sort_keys=True, default=str)
    connection = connect_writer(db_path)
    try:
        connection.execute(
            f"INSERT INTO loop_rounds ({', '.join(_COLUMNS)}, created_at) VALUES ({', '.join('?' * len(_COLUMNS))}, ?)",
            [*values, datetime.now(UTC).replace(tzinfo=None)],
        )
    finally:
        connection.close()


def read_rounds(db_path: str | os.PathLike[str], loop_id: str | None = None) -> list[LoopRound]:
    """The recorded rounds of ``loop_id`` (every loop when ``None``), by loop then round; for a
    round recorded twice (a resumed loop redoing it) the latest row wins. ``[]`` when the file
    or the table does not exist yet."""
    if not os.path.exists(db_path):
        return []
    connection = open_reader(db_path)
    try:
        exists = connection.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'loop_rounds' AND database_name = current_database()"
        ).fetchone()
        if not exists or not exists[0]:
            return []
        condition, params = ("WHERE loop_id = ?", [loop_id]) if loop_id is not None else ("", [])
        rows = connection.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM loop_rounds {condition} "
            "QUALIFY row_number() OVER (PARTITION BY loop_id, round ORDER BY created_at DESC) = 1 "
            "ORDER BY loop_id, round",
            params,
        ).fetchall()
    finally:
        connection.close()
    result = []
    for values in rows:
        data = dict(zip(_COLUMNS, values))
        data["seconds"] = json.loads(data["seconds"]) if data["seconds"] else {}
        data["details"] = json.loads(data["details"]) if data["details"] else {}
        result.append(LoopRound(**data))
    return result
