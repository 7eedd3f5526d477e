"""Loading spans from files: OTLP/JSON lines and the Parquet of ``agent-rl export parquet``.

Contract:

* :func:`ingest_paths` loads every file named (directories are searched recursively for
  ``*.parquet``, ``*.json``, ``*.jsonl``, ``*.ndjson`` and those with ``.gz``) into the database
  and returns an :class:`~agent_rl_plugin.store.ingest.IngestReport`.
* **Idempotent by (trace_id, span_id)**: a span already in ``spans`` (or seen earlier in the
  same batch) is skipped and counted in ``duplicates``; ingesting the same files twice adds
  nothing. Rewards carried by ``gen_ai.evaluation.result`` events are added with their spans
  (their ids are derived from trace, span and event position, so they are never doubled).
* OTLP/JSON lines (what the OpenTelemetry Collector's ``file`` exporter writes): one
  ``ExportTraceServiceRequest`` per line, hex ids. Spans go through the same decoding as
  ``agent-rl serve`` (:func:`agent_rl_plugin.receiver.decode.fields_from_request`) and the
  store's own row conversion.
  A line that does not decode is reported in ``errors`` (file, 1-based line number, message)
  and skipped; the rest lands.
* Parquet (files or ``date=.../service=...`` folders) is loaded by the store
  (:func:`~agent_rl_plugin.store.ingest.ingest_parquet`): the ``spans`` columns present in the
  file are inserted as they are (``ingested_at`` is set anew); emitted rewards are rebuilt from
  the events. An unreadable file is one error entry (line ``None``).
* Each batch is one transaction. ``progress(n_bytes)`` is called as input is consumed.
"""

from __future__ import annotations

import gzip
import io
import os
from typing import Any, Iterable, Iterator

import duckdb

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.receiver.decode import DecodeError, fields_from_request, request_from_json
from agent_rl_plugin.store.connection import connect_writer
from agent_rl_plugin.store.exporter import collect_normalizers
from agent_rl_plugin.store.ingest import (
    JSON_SUFFIXES,
    IngestReport,
    Progress,
    find_files,
    ingest_parquet,
    insert_new_spans,
)
from agent_rl_plugin.store.rows import SpanConverter
from agent_rl_plugin.transform import make_attribute_transform

__all__ = ["JSON_SUFFIXES", "IngestReport", "find_files", "ingest_paths"]


# --- OTLP/JSON lines ----------------------------------------------------------------------
def _open_text(path: str) -> tuple[io.TextIOBase, Any]:
    raw = open(path, "rb")
    stream = gzip.open(raw, "rt", encoding="utf-8") if path.endswith(".gz") else io.TextIOWrapper(raw, encoding="utf-8")
    return stream, raw


def _json_lines(path: str, report: IngestReport, progress: Progress | None) -> Iterator[tuple[int, Any]]:
    """(line number, span field tuples) per decodable line; errors go to ``report``."""
    stream, raw = _open_text(path)
    position = 0
    with stream, raw:
        number = 0
        while True:
            try:
                line = stream.readline()
            except (UnicodeDecodeError, OSError, EOFError) as exc:
                report.errors.append({"file": path, "line": number + 1, "error": f"unreadable: {exc}"})
                break
            if not line:
                break
            number += 1
            if progress is not None:
                now = raw.tell()
                progress(now - position)
                position = now
            if not line.strip():
                continue
            try:
                fields, invalid = fields_from_request(request_from_json(line))
            except DecodeError as exc:
                report.errors.append({"file": path, "line": number, "error": str(exc)})
                continue
            except Exception as exc:  # never let one line stop the file
                report.errors.append({"file": path, "line": number, "error": f"{type(exc).__name__}: {exc}"})
                continue
            if invalid:
                report.spans_read += invalid
                message = f"{invalid} spans with invalid ids skipped"
                report.errors.append({"file": path, "line": number, "error": message})
            yield number, fields


def _ingest_json(
    connection: duckdb.DuckDBPyConnection,
    path: str,
    converter: SpanConverter,
    report: IngestReport,
    progress: Progress | None,
    batch_spans: int,
) -> None:
    pending: list[Any] = []

    def write() -> None:
        batch = converter.convert_fields(pending)
        if batch.failed:
            report.errors.append({"file": path, "line": None, "error": f"{batch.failed} spans could not be converted"})
        inserted, duplicates, rewards = insert_new_spans(connection, batch)
        report.inserted += inserted
        report.duplicates += duplicates
        report.rewards_inserted += rewards
        pending.clear()

    for _, fields in _json_lines(path, report, progress):
        report.spans_read += len(fields)
        pending.extend(fields)
        if len(pending) >= batch_spans:
            write()
    if pending:
        write()


# --- entry point --------------------------------------------------------------------------
def ingest_paths(
    db: str | os.PathLike[str],
    paths: Iterable[str | os.PathLike[str]],
    *,
    progress: Progress | None = None,
    batch_spans: int = 20_000,
    normalizers: Any = None,
    max_attribute_size: int | None = 32_768,
    transform: Any = None,
) -> IngestReport:
    """Load ``paths`` into ``db`` (see the module contract). OTLP/JSON spans go through
    ``transform`` (default: the ``AGENT_RL_*`` config's, so secrets are redacted as when
    recorded); Parquet exports of a store are copied as they are (redacted when recorded)."""
    files = find_files(paths)
    report = IngestReport()
    if normalizers is None:
        normalizers = collect_normalizers()
    if transform is None:
        transform = make_attribute_transform(RLConfig.from_env())
    converter = SpanConverter(transform=transform, normalizers=normalizers, max_attribute_size=max_attribute_size)
    connection = connect_writer(db)
    try:
        for path in files:
            if not os.path.isfile(path):
                report.errors.append({"file": path, "line": None, "error": "no such file"})
                continue
            report.files += 1
            if path.endswith(".parquet"):
                ingest_parquet(connection, path, report)
                if progress is not None:
                    progress(os.path.getsize(path))
            else:
                _ingest_json(connection, path, converter, report, progress, batch_spans)
    finally:
        connection.close()
    return report
