"""Writing loaded spans into the store without duplicates; loading the Parquet of ``agent-rl
export parquet``. The OTLP/JSON side (decoding, then writing here) and the entry point
:func:`~agent_rl_plugin.receiver.ingest.ingest_paths` are in :mod:`agent_rl_plugin.receiver.ingest`.

Contract:

* :func:`find_files` lists the files to load: each path itself, or the files under a directory
  (recursively, sorted) ending in ``.parquet`` or one of :data:`JSON_SUFFIXES`.
* **Idempotent by (trace_id, span_id)**: :func:`insert_new_spans` and :func:`ingest_parquet`
  skip a span already in ``spans`` (or seen earlier in the same batch) and count it as a
  duplicate; rewards carried by ``gen_ai.evaluation.result`` events are added with their spans
  (their ids are derived from trace, span and event position, so they are never doubled).
* :func:`ingest_parquet` loads one Parquet file (or ``date=.../service=...`` part): the ``spans``
  columns present in the file are inserted as they are (``ingested_at`` is set anew); emitted
  rewards are rebuilt from the events. An unreadable file is one error entry (line ``None``) in
  the :class:`IngestReport`.
* Each batch is one transaction.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, Iterable

import duckdb
import pyarrow as pa

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store.batch import INSERT_REWARDS_SQL, REWARDS_VIEW, insert_batch
from agent_rl_plugin.store.opening import sql_string
from agent_rl_plugin.store.rows import SPAN_SCHEMA, SpanBatch, rewards_to_table
from agent_rl_plugin.store.span_parts import reward_row

JSON_SUFFIXES = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz")
Progress = Callable[[int], None]


@dataclass
class IngestReport:
    """What :func:`~agent_rl_plugin.receiver.ingest.ingest_paths` did; :meth:`as_dict` is the
    ``--json`` summary."""

    files: int = 0
    spans_read: int = 0
    inserted: int = 0
    duplicates: int = 0
    rewards_inserted: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The counts and errors as plain JSON-ready values."""
        return {
            "files": self.files,
            "spans_read": self.spans_read,
            "inserted": self.inserted,
            "skipped_duplicates": self.duplicates,
            "rewards_inserted": self.rewards_inserted,
            "errors": self.errors,
        }


def find_files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The files to ingest: each path itself, or the matching files under a directory (sorted)."""
    found: list[str] = []
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            for folder, _, names in sorted(os.walk(path)):
                for name in sorted(names):
                    if name.endswith(".parquet") or name.endswith(JSON_SUFFIXES):
                        found.append(os.path.join(folder, name))
        else:
            found.append(path)
    return found


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# --- inserting without duplicates ---------------------------------------------------------
_NEW_SPANS_SQL = """SELECT * FROM _agent_rl_ingest AS b
WHERE NOT EXISTS (SELECT 1 FROM spans AS s WHERE s.trace_id = b.trace_id AND s.span_id = b.span_id)
QUALIFY row_number() OVER (PARTITION BY b.trace_id, b.span_id) = 1"""


def insert_new_spans(connection: duckdb.DuckDBPyConnection, batch: SpanBatch) -> tuple[int, int, int]:
    """Insert the spans of ``batch`` not yet in the table (and their rewards) in one transaction;
    returns (inserted, duplicates, rewards inserted)."""
    n = batch.num_spans
    if n == 0:
        return 0, 0, 0
    connection.register("_agent_rl_ingest", batch.spans)
    try:
        new = connection.sql(_NEW_SPANS_SQL).to_arrow_table().select(SPAN_SCHEMA.names).cast(SPAN_SCHEMA)
    finally:
        connection.unregister("_agent_rl_ingest")
    rewards = _new_rewards(connection, batch.rewards, new)
    insert_batch(connection, new, rewards)
    return new.num_rows, n - new.num_rows, 0 if rewards is None else rewards.num_rows


def _new_rewards(connection: duckdb.DuckDBPyConnection, rewards: pa.Table | None, spans: pa.Table) -> pa.Table | None:
    if rewards is None or rewards.num_rows == 0 or spans.num_rows == 0:
        return None
    keys = set(zip(spans["trace_id"].to_pylist(), spans["span_id"].to_pylist()))
    mask = [(t, s) in keys for t, s in zip(rewards["trace_id"].to_pylist(), rewards["span_id"].to_pylist())]
    rewards = rewards.filter(pa.array(mask))
    if rewards.num_rows == 0:
        return None
    connection.register("_agent_rl_ingest_rewards", rewards)
    try:
        kept = connection.sql(
            "SELECT * FROM _agent_rl_ingest_rewards AS r "
            "WHERE NOT EXISTS (SELECT 1 FROM rewards AS x WHERE x.reward_id = r.reward_id) "
            "QUALIFY row_number() OVER (PARTITION BY r.reward_id) = 1"
        ).to_arrow_table()
    finally:
        connection.unregister("_agent_rl_ingest_rewards")
    return kept.cast(rewards.schema) if kept.num_rows else None


# --- Parquet ------------------------------------------------------------------------------
def _spans_columns(connection: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in connection.execute("DESCRIBE spans").fetchall()]


def ingest_parquet(connection: duckdb.DuckDBPyConnection, path: str, report: IngestReport) -> None:
    """Insert the new spans of the Parquet file ``path`` (and the rewards of their evaluation
    events) in one transaction on ``connection``, counting into ``report`` (see the module
    contract); a file DuckDB cannot read is an error entry, not an exception."""
    source = f"read_parquet({sql_string(path)}, hive_partitioning = false)"
    try:
        available = {row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    except duckdb.Error as exc:
        report.errors.append({"file": path, "line": None, "error": f"not a readable Parquet file: {_first_line(exc)}"})
        return
    if not {"trace_id", "span_id", "name"} <= available:
        message = "not a spans export (no trace_id/span_id/name columns)"
        report.errors.append({"file": path, "line": None, "error": message})
        return
    columns = _spans_columns(connection)
    select = ", ".join(
        "?::TIMESTAMP"
        if c == "ingested_at"
        else f'"{c}"'
        if c in available
        else "false"
        if c == "is_rollout_root"
        else "NULL"
        for c in columns
    )
    names = ", ".join(f'"{c}"' for c in columns)
    connection.execute("BEGIN TRANSACTION")
    try:
        row = connection.execute(f"SELECT count(*) FROM {source}").fetchone()
        assert row is not None  # count(*) returns one row
        total = row[0]
        connection.execute(
            f"CREATE OR REPLACE TEMP TABLE _agent_rl_ingest_new AS SELECT {select} FROM {source} AS b "
            "WHERE NOT EXISTS (SELECT 1 FROM spans AS s WHERE s.trace_id = b.trace_id AND s.span_id = b.span_id) "
            "QUALIFY row_number() OVER (PARTITION BY b.trace_id, b.span_id) = 1",
            [_now()],
        )
        row = connection.execute(f"INSERT INTO spans ({names}) SELECT * FROM _agent_rl_ingest_new").fetchone()
        assert row is not None  # an INSERT returns one row: its count
        inserted = row[0]
        rewards = _rewards_from_events(connection)
        n_rewards = 0
        if rewards is not None:
            kept = _new_rewards(
                connection,
                rewards,
                connection.sql("SELECT trace_id, span_id FROM _agent_rl_ingest_new").to_arrow_table(),
            )
            if kept is not None:
                insert_rewards_only(connection, kept)
                n_rewards = kept.num_rows
        connection.execute("DROP TABLE _agent_rl_ingest_new")
        connection.execute("COMMIT")
    except BaseException as exc:
        try:
            connection.execute("ROLLBACK")
        except duckdb.Error:
            pass
        if isinstance(exc, duckdb.Error):
            report.errors.append({"file": path, "line": None, "error": _first_line(exc)})
            return
        raise
    report.spans_read += int(total)
    report.inserted += int(inserted)
    report.duplicates += int(total) - int(inserted)
    report.rewards_inserted += n_rewards


def insert_rewards_only(connection: duckdb.DuckDBPyConnection, rewards: pa.Table) -> None:
    """Insert reward rows (:data:`~agent_rl_plugin.store.rows.REWARD_SCHEMA`) inside the caller's
    transaction."""
    connection.register(REWARDS_VIEW, rewards)
    try:
        connection.execute(INSERT_REWARDS_SQL, [_now()])
    finally:
        connection.unregister(REWARDS_VIEW)


def _rewards_from_events(connection: duckdb.DuckDBPyConnection) -> pa.Table | None:
    """Reward rows for the evaluation events of the spans in ``_agent_rl_ingest_new`` (the same
    rows the exporter derives from a live span)."""
    rows = connection.execute(
        "SELECT trace_id, span_id, rollout_id, events FROM _agent_rl_ingest_new WHERE events LIKE ?",
        [f"%{sc.EVENT_EVALUATION_RESULT}%"],
    ).fetchall()
    rewards: list[dict[str, Any]] = []
    for trace_id, span_id, rollout_id, events_text in rows:
        try:
            events = json.loads(events_text or "[]")
        except ValueError:
            continue
        for position, event in enumerate(events if isinstance(events, list) else []):
            if isinstance(event, dict) and event.get("name") == sc.EVENT_EVALUATION_RESULT:
                raw = event.get("attributes")
                attrs = raw if isinstance(raw, dict) else {}
                rewards.append(
                    reward_row(attrs, event.get("time"), trace_id, span_id, position, rollout_id or trace_id)
                )
    return rewards_to_table(rewards)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
