"""Rows of the ``rewards`` table written by ``agent-rl score``: hashing, building, writing.

* :func:`input_hash`: sha256 of what a reward scored: the rollouts' content hashes (one rollout,
  or a batch-mode group in order), the reward's name and version and its
  :meth:`~agent_rl_plugin.rewards.base.RewardPlugin.fingerprint`. A row with the same
  ``(rollout_id, name, input_hash)`` and no error means "already done".
* :func:`done_keys`: those keys, read from the store for the rollouts about to be scored.
* :class:`Outcome`: what a worker reports for one rollout (plain data, cheap to pickle).
* :func:`outcome_rows`: an outcome as rows: the episode row (``step_index`` NULL) and one row per
  :class:`~agent_rl_plugin.rewards.result.StepOutput`; or one error row (``value`` NULL).
* Secrets in a row's ``reason``, ``label``, ``error`` and ``metrics`` are masked with the
  redactor of the ``AGENT_RL_*`` config (:func:`agent_rl_plugin.redaction.redactor_for`), as
  recorded spans are: a reward that quotes a rollout's content stores no key.
* :class:`RowWriter`: appends rows in batches, one transaction per batch, through
  :func:`~agent_rl_plugin.store.connect_writer`, the file held for that batch only.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Iterable, Sequence

import duckdb
import pyarrow as pa

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.store.transaction import arrow_transaction

COLUMNS: tuple[str, ...] = (
    "reward_id",
    "rollout_id",
    "step_index",
    "name",
    "value",
    "label",
    "reason",
    "metrics",
    "plugin",
    "plugin_version",
    "source",
    "input_hash",
    "created_at",
    "error",
    "trace_id",
    "span_id",
)
_SCHEMA = pa.schema(
    [
        ("reward_id", pa.string()),
        ("rollout_id", pa.string()),
        ("step_index", pa.int32()),
        ("name", pa.string()),
        ("value", pa.float64()),
        ("label", pa.string()),
        ("reason", pa.string()),
        ("metrics", pa.string()),
        ("plugin", pa.string()),
        ("plugin_version", pa.string()),
        ("source", pa.string()),
        ("input_hash", pa.string()),
        ("created_at", pa.timestamp("us")),
        ("error", pa.string()),
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
    ]
)
MAX_ERROR_CHARS = 2_000


def input_hash(content_hashes: Sequence[str], reward: RewardPlugin) -> str:
    """The ``input_hash`` of a reward over one rollout (or, in batch mode, a whole group)."""
    text = json.dumps([list(content_hashes), reward.name, str(reward.version), reward.fingerprint()])
    return hashlib.sha256(text.encode()).hexdigest()


def json_default(value: Any) -> Any:
    """``json.dumps`` fallback: numpy scalars and arrays as numbers and lists, others as text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def dumps(value: Any) -> str:
    return json.dumps(value, default=json_default, ensure_ascii=False, allow_nan=False)


@dataclass
class StepRow:
    step_index: int
    value: float
    reason: str | None
    metrics: str  # JSON text


@dataclass
class Outcome:
    """A reward's verdict on one rollout, as plain data.

    ``status`` is ``"ok"`` (``score`` may be None when only steps were scored), ``"na"`` (not
    applicable: no row) or ``"error"`` (``error`` says why; ``metrics`` may hold a traceback).
    """

    status: str
    score: float | None = None
    reason: str | None = None
    metrics: str = "{}"
    label: str | None = None
    steps: list[StepRow] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def failed(cls, message: str, traceback_text: str | None = None) -> Outcome:
        metrics = dumps({"traceback": traceback_text}) if traceback_text else "{}"
        return cls("error", error=message[:MAX_ERROR_CHARS], metrics=metrics)


@dataclass
class RowContext:
    """What every row of one reward over one rollout shares."""

    rollout_id: str
    name: str
    plugin: str
    plugin_version: str
    source: str
    input_hash: str


_REDACTED_COLUMNS = ("reason", "label", "error", "metrics")


_REDACTION_VARIABLES = ("AGENT_RL_REDACT", "AGENT_RL_REDACTION_PATTERNS", "AGENT_RL_REDACT_PATTERNS")
_redactor_cache: list[Any] = []  # [(variables' values, redactor)]


def _redactor() -> Any:
    """The redactor the ``AGENT_RL_*`` redaction variables ask for (``None`` when redaction is
    off); rebuilt only when those variables change."""
    import os

    from agent_rl_plugin.config import RLConfig
    from agent_rl_plugin.redaction import redactor_for

    key = tuple(os.environ.get(name) for name in _REDACTION_VARIABLES)
    if _redactor_cache and _redactor_cache[0][0] == key:
        return _redactor_cache[0][1]
    try:
        config = RLConfig.from_env({n: v for n, v in zip(_REDACTION_VARIABLES, key) if v is not None})
    except Exception:  # unreadable variables: the defaults (redaction on)
        config = RLConfig()
    redactor = redactor_for(config)
    _redactor_cache[:] = [(key, redactor)]
    return redactor


def _row(ctx: RowContext, now: datetime, **values: Any) -> dict[str, Any]:
    row = {
        "reward_id": str(uuid.uuid4()),
        "rollout_id": ctx.rollout_id,
        "step_index": None,
        "name": ctx.name,
        "value": None,
        "label": None,
        "reason": None,
        "metrics": "{}",
        "plugin": ctx.plugin,
        "plugin_version": ctx.plugin_version,
        "source": ctx.source,
        "input_hash": ctx.input_hash,
        "created_at": now,
        "error": None,
        "trace_id": None,
        "span_id": None,
    }
    row.update(values)
    redactor = _redactor()
    if redactor is not None:
        for column in _REDACTED_COLUMNS:
            if isinstance(row[column], str):
                row[column] = redactor.redact(row[column])
    return row


def outcome_rows(ctx: RowContext, outcome: Outcome, step_span_ids: Sequence[str | None] = ()) -> list[dict[str, Any]]:
    """The rows to write for ``outcome`` (none when not applicable)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    if outcome.status == "na":
        return []
    if outcome.status == "error":
        return [_row(ctx, now, error=outcome.error or "error", metrics=outcome.metrics)]
    rows = [_row(ctx, now, value=outcome.score, reason=outcome.reason, metrics=outcome.metrics, label=outcome.label)]
    for step in outcome.steps:
        span_id = step_span_ids[step.step_index] if step.step_index < len(step_span_ids) else None
        rows.append(
            _row(
                ctx,
                now,
                step_index=step.step_index,
                value=step.value,
                reason=step.reason,
                metrics=step.metrics,
                span_id=span_id,
            )
        )
    return rows


def done_keys(
    connection: duckdb.DuckDBPyConnection, rollout_ids: Sequence[str], names: Sequence[str]
) -> set[tuple[str, str, str]]:
    """``(rollout_id, name, input_hash)`` of the episode rows without error of these rollouts."""
    if not rollout_ids or not names:
        return set()
    connection.register("_arl_score_ids", pa.table({"rollout_id": pa.array(list(rollout_ids), pa.string())}))
    try:
        rows = connection.execute(
            "SELECT DISTINCT rollout_id, name, input_hash FROM rewards "
            "WHERE error IS NULL AND step_index IS NULL AND input_hash IS NOT NULL "
            "AND list_contains(?, name) AND rollout_id IN (SELECT rollout_id FROM _arl_score_ids)",
            [list(names)],
        ).fetchall()
    finally:
        connection.unregister("_arl_score_ids")
    return {(r[0], r[1], r[2]) for r in rows}


class RowWriter:
    """Buffers rows and appends them to ``rewards`` in batches of ``batch_size``.

    Each batch is one transaction in a short write lease (the file is opened for the batch and
    closed after it), so a run that writes nothing never takes the write lock, and a long run
    lets other processes in between its batches. Use as a context manager (flushes at the end).
    """

    def __init__(self, db_path: str, batch_size: int = 500) -> None:
        self.db_path = db_path
        self.batch_size = max(1, batch_size)
        self.pending: list[dict[str, Any]] = []
        self.written = 0

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        self.pending.extend(rows)
        if len(self.pending) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        from agent_rl_plugin.store import connect_writer

        table = pa.Table.from_pylist(self.pending, schema=_SCHEMA)
        # A short lease per batch: other processes (agents merging spans, readers) get the file
        # between batches, however long scoring takes.
        connection = connect_writer(self.db_path, what="agent-rl score (writing rewards)")
        try:
            columns = ", ".join(COLUMNS)
            with arrow_transaction(connection, {"_arl_new_rewards": table}):
                connection.execute(f"INSERT INTO rewards ({columns}) SELECT {columns} FROM _arl_new_rewards")
        finally:
            connection.close()
        self.written += len(self.pending)
        self.pending = []

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
