"""Spans per second through ``DuckDBSpanExporter.export`` + ``force_flush``, against three ways
of storing the same finished spans, in the same run.

Builds N finished synthetic spans first: traces of ``--per-trace`` spans (an ``invoke_agent``
root and LLM-call-like children with ten attributes, one in ten with an event), then times
only the storing:

* **ours**: the exporter as ``configure()`` sets it up (the built-in normalisers and the
  redaction transform), fed batches of ``--batch`` spans (what the ``BatchSpanProcessor``
  hands over), then one flush that waits for the commit; each sample into a fresh file. The
  clock stops only once every row is in the database file itself: a spool segment that the
  flush did not merge (a background merge held the file at that moment) is merged first;
* **(a) bulk insert**: the same spans already converted to Arrow (outside the clock), inserted
  with the store's own ``insert_batch`` in chunks of 50,000 rows (the writer's batch size):
  what DuckDB itself allows, the store's limit;
* **(b) JSON files**: one file per trace with the SDK's ``ReadableSpan.to_json`` (compact), the
  store of the MassGen RL design (``rl_data/traces/.../trace_*.json``); no fsync;
* **(c) INSERT per span**: the spans converted per batch, then one parameterised ``INSERT``
  per span (autocommit), on a sample (it is ~100x slower).

    python bench/store_ingest.py            # 100k spans
    python bench/store_ingest.py -n 20000
    python -m bench --only ingest [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agent_rl_plugin import semconv as sc  # noqa: E402
from agent_rl_plugin.store import DuckDBSpanExporter  # noqa: E402
from bench.harness import Context, Measure, Row, interleave, ratio  # noqa: E402

WRITER_BATCH_ROWS = 50_000


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def make_spans(n: int, per_trace: int = 20) -> list[ReadableSpan]:
    """``n`` finished spans in traces of ``per_trace`` (a root agent span and LLM-call children
    with ten attributes each, one in ten with an event), in the order they end."""
    provider = TracerProvider()
    collect = _Collect()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("bench")
    messages = '[{"role":"user","content":"What is 17 * 23? Use the calculator tool."}]'
    i = 0
    while i < n:
        rollout = {
            sc.ROLLOUT_ID: f"{i // per_trace:032x}",
            sc.TASK_ID: f"task-{i // 200}",
            sc.GROUP_ID: f"group-{i // 800}",
        }
        children = min(per_trace, n - i) - 1
        with tracer.start_as_current_span(
            "invoke_agent bench",
            attributes={
                **rollout,
                sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                sc.SPAN_KIND: sc.SPAN_KIND_AGENT,
                sc.ROLLOUT_ROOT: True,
                sc.GEN_AI_AGENT_NAME: "bench",
            },
        ):
            for j in range(children):
                attributes: dict[str, Any] = {
                    **rollout,
                    sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                    sc.SPAN_KIND: sc.SPAN_KIND_LLM,
                    sc.GEN_AI_REQUEST_MODEL: "tiny-model",
                    sc.GEN_AI_PROVIDER_NAME: "local",
                    sc.GEN_AI_USAGE_INPUT_TOKENS: 42,
                    sc.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
                    sc.GEN_AI_INPUT_MESSAGES: messages,
                }
                with tracer.start_as_current_span("chat tiny-model", attributes=attributes) as span:
                    if (i + j) % 10 == 0:
                        span.add_event(sc.EVENT_NAME, {sc.EVENT_TYPE: "vote", sc.EVENT_TARGET: "agent_b"})
        i += children + 1
    provider.shutdown()
    return collect.spans


def default_exporter(path: str | os.PathLike[str]) -> DuckDBSpanExporter:
    """The exporter as ``configure(db=path)`` builds it: the store plugin's arguments, the
    normalisers of the plugin manager, the attribute transform (redaction)."""
    from agent_rl_plugin.config import RLConfig
    from agent_rl_plugin.transform import make_attribute_transform

    config = RLConfig(db_path=str(path))
    exporter = DuckDBSpanExporter(
        path, max_attribute_size=config.max_attribute_size, max_pending_spans=max(4 * config.max_queue_size, 100_000)
    )
    exporter.set_attribute_transform(make_attribute_transform(config))
    return exporter


def exporter_rate(spans: list[ReadableSpan], path: Path, batch: int, plain: bool = False) -> tuple[float, dict]:
    """Spans/s of export + flush into a fresh file (opened and migrated before the clock)."""
    exporter = DuckDBSpanExporter(path, normalizers=[]) if plain else default_exporter(path)
    exporter.export(spans[:1])
    exporter.force_flush()
    started = time.perf_counter()
    for k in range(1, len(spans), batch):
        exporter.export(spans[k : k + batch])
    exported = time.perf_counter()
    assert exporter.force_flush(600_000)
    flushed = time.perf_counter()
    merge_rest(path)
    seconds = time.perf_counter() - started
    stats = exporter.stats
    exporter.shutdown()
    # breakdown (info only): export() calls (conversion on this thread), the flush wait, the last merge
    n = len(spans) - 1
    stats["us_per_span_in_export"] = (exported - started) / n * 1e6
    stats["us_per_span_in_flush"] = (flushed - exported) / n * 1e6
    stats["us_per_span_in_merge_rest"] = (started + seconds - flushed) / n * 1e6
    return n / seconds, stats


def merge_rest(path: Path) -> None:
    """Merge the spool segments of ``path`` left after a flush, waiting for the lock (a background
    merge of the exporter may hold it), as the exporter's merger process merges (row groups of
    its size: this process opens the file for nothing else): then every row is in the database
    file."""
    from agent_rl_plugin.store.lease import try_merge
    from agent_rl_plugin.store.merger_process import MERGE_ROW_GROUP_SIZE
    from agent_rl_plugin.store.spool import list_segments

    for _ in range(100):
        if not list_segments(str(path)):
            return
        try_merge(str(path), wait_s=60.0, row_group_size=MERGE_ROW_GROUP_SIZE)
    raise AssertionError(f"spool segments of {path} are still not merged")


def default_converter():
    """A ``SpanConverter`` with the settings of :func:`default_exporter` (no writer)."""
    from agent_rl_plugin.config import RLConfig
    from agent_rl_plugin.store.exporter import collect_normalizers
    from agent_rl_plugin.store.rows import SpanConverter
    from agent_rl_plugin.transform import make_attribute_transform

    config = RLConfig(db_path=None)
    return SpanConverter(
        transform=make_attribute_transform(config),
        normalizers=collect_normalizers(),
        max_attribute_size=config.max_attribute_size,
    )


def convert_all(spans: list[ReadableSpan], batch: int) -> tuple[pa.Table, pa.Table | None]:
    """The spans as the exporter converts them (same normalisers and transform)."""
    converter = default_converter()
    batches = [converter.convert(spans[k : k + batch]) for k in range(0, len(spans), batch)]
    rewards = [b.rewards for b in batches if b.rewards is not None and b.rewards.num_rows]
    return pa.concat_tables([b.spans for b in batches]), (pa.concat_tables(rewards) if rewards else None)


def bulk_rate(table: pa.Table, rewards: pa.Table | None, path: Path) -> float:
    """(a) Spans/s of the store's own insert of already converted rows, in writer-sized chunks."""
    from agent_rl_plugin.store.batch import insert_batch
    from agent_rl_plugin.store.connection import open_write_connection

    connection, _ = open_write_connection(str(path))
    try:
        started = time.perf_counter()
        for k in range(0, table.num_rows, WRITER_BATCH_ROWS):
            insert_batch(connection, table.slice(k, WRITER_BATCH_ROWS), rewards if k == 0 else None)
        seconds = time.perf_counter() - started
    finally:
        connection.close()
    return table.num_rows / seconds


def json_files_rate(spans: list[ReadableSpan], folder: Path) -> float:
    """(b) Spans/s of one JSON file per trace with the SDK's ``to_json``."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    traces: dict[int, list[str]] = {}
    for span in spans:
        traces.setdefault(span.context.trace_id, []).append(span.to_json(indent=None))
    for trace_id, texts in traces.items():
        with open(folder / f"trace_{trace_id:032x}.json", "w", encoding="utf-8") as handle:
            handle.write('{"trace_id": "%032x", "spans": [' % trace_id + ",".join(texts) + "]}")
    return len(spans) / (time.perf_counter() - started)


_PER_ROW_COLUMNS = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "status_code",
    "status_message",
    "attributes",
    "events",
    "links",
    "resource",
    "scope_name",
    "scope_version",
    "service_name",
]
PER_ROW_SQL = (
    "INSERT INTO spans (" + ", ".join(_PER_ROW_COLUMNS) + ", start_time, end_time, duration_ms, rollout_id, task_id, "
    "group_id, is_rollout_root, operation, span_kind, start_unix_nano, end_unix_nano, ingested_at) VALUES ("
    + ", ".join("?" for _ in _PER_ROW_COLUMNS)
    + ", make_timestamp(?::BIGINT // 1000), make_timestamp(?::BIGINT // 1000), ?, ?, ?, ?, ?, ?, ?, ?, ?, "
    "current_timestamp)"
)


def per_insert_rate(spans: list[ReadableSpan], path: Path, batch: int) -> float:
    """(c) Spans/s converting each batch, then one INSERT per span (autocommit)."""
    from agent_rl_plugin.store.connection import open_write_connection

    converter = default_converter()
    connection, _ = open_write_connection(str(path))
    try:
        started = time.perf_counter()
        for k in range(0, len(spans), batch):
            for r in converter.convert(spans[k : k + batch]).spans.to_pylist():
                attrs = json.loads(r["attributes"])
                start, end = r["start_unix_nano"], r["end_unix_nano"]
                connection.execute(
                    PER_ROW_SQL,
                    [r[c] for c in _PER_ROW_COLUMNS]
                    + [
                        start,
                        end,
                        (end - start) / 1e6,
                        attrs.get(sc.ROLLOUT_ID) or r["trace_id"],
                        attrs.get(sc.TASK_ID),
                        attrs.get(sc.GROUP_ID),
                        bool(attrs.get(sc.ROLLOUT_ROOT)),
                        attrs.get(sc.GEN_AI_OPERATION_NAME),
                        attrs.get(sc.SPAN_KIND),
                        start,
                        end,
                    ],
                )
        seconds = time.perf_counter() - started
    finally:
        connection.close()
    return len(spans) / seconds


def table_digest(path: Path, exclude_span: str | None = None) -> tuple[int, int, int]:
    """(rows, distinct span ids, a hash of every row's ids, attributes and events) of ``spans``,
    leaving out the span ``exclude_span`` (hex id) from the hash."""
    connection = duckdb.connect(str(path), read_only=True)
    try:
        row = connection.execute(
            "SELECT count(*), count(DISTINCT (trace_id, span_id)), "
            "coalesce(sum(hash(trace_id, span_id, attributes, events)) FILTER (WHERE span_id <> ?), 0) FROM spans",
            [exclude_span or ""],
        ).fetchone()
        assert row is not None  # an aggregate returns one row
        return int(row[0]), int(row[1]), int(row[2])
    finally:
        connection.close()


def run(ctx: Context) -> Row:
    n = ctx.size(100_000, 10_000)
    per_row_n = ctx.size(2_000, 300)
    repeats = ctx.size(5, 3)
    repeats_json = ctx.size(3, 3)
    batch = 512
    row = Row(
        id="ingest", sizes={"spans": n, "spans_per_trace": 20, "batch": batch, "insert_per_span_sample": per_row_n}
    )
    ctx.log(f"ingest: building {n:,} finished spans")
    spans = make_spans(n + 1)
    converted, rewards = convert_all(spans[1:], batch)
    work = ctx.folder("ingest")
    counter = iter(range(10**6))
    digests: dict[str, Any] = {}

    def ours() -> float:
        path = work / f"ours-{next(counter)}.duckdb"
        rate, stats = exporter_rate(spans, path, batch)
        digests.setdefault("dropped", 0)
        digests["dropped"] += stats["spans_dropped"]
        digests["ours"] = table_digest(path, exclude_span=f"{spans[0].context.span_id:016x}")
        for key in ("us_per_span_in_export", "us_per_span_in_flush", "us_per_span_in_merge_rest"):
            digests.setdefault(key, []).append(stats[key])
        path.unlink()
        return rate

    def plain() -> float:
        path = work / f"plain-{next(counter)}.duckdb"
        rate, _ = exporter_rate(spans, path, batch, plain=True)
        path.unlink()
        return rate

    def bulk() -> float:
        path = work / f"bulk-{next(counter)}.duckdb"
        from agent_rl_plugin.store import ensure_schema

        ensure_schema(str(path))
        rate = bulk_rate(converted, rewards, path)
        digests["bulk"] = table_digest(path)
        path.unlink()
        return rate

    def files() -> float:
        rate = json_files_rate(spans[1:], work / "json")
        digests["files"] = sum(len(json.loads(p.read_text())["spans"]) for p in (work / "json").iterdir())
        return rate

    ctx.log(
        f"ingest: ours x{repeats}, bulk insert x{repeats}, JSON files x{repeats_json}, "
        f"INSERT per span x1 on {per_row_n:,} spans; interleaved"
    )
    samples = interleave({"ours": ours, "bulk": bulk, "files": files}, repeats=repeats_json)
    more = interleave({"ours": ours, "bulk": bulk}, repeats=max(0, repeats - repeats_json))
    for key in more:
        samples[key] += more[key]
    samples["plain"] = interleave({"plain": plain}, repeats=ctx.size(3, 1))["plain"]
    per_row_path = work / "per-row.duckdb"
    from agent_rl_plugin.store import ensure_schema

    ensure_schema(str(per_row_path))
    samples["per_row"] = [per_insert_rate(spans[1 : per_row_n + 1], per_row_path, batch)]
    per_row_count = table_digest(per_row_path)[0]

    row.value = Measure("our exporter (default plugins)", "spans/s", samples["ours"])
    row.baselines += [
        Measure("(a) bulk insert of converted rows", "spans/s", samples["bulk"]),
        Measure("(b) JSON file per trace (to_json)", "spans/s", samples["files"]),
        Measure("(c) INSERT per span", "spans/s", samples["per_row"], note=f"on {per_row_n:,} spans"),
    ]
    ours_rate = row.value.median
    row.ratios["ours / (a) bulk (share of the limit)"] = ratio(ours_rate, row.baselines[0].median)
    row.ratios["ours / (b) JSON files"] = ratio(ours_rate, row.baselines[1].median)
    row.ratios["ours / (c) INSERT per span"] = ratio(ours_rate, row.baselines[2].median)
    row.target("spans/s", ours_rate, ">=", 150_000)
    row.target("ours / (a) bulk (share of the limit)", row.ratios["ours / (a) bulk (share of the limit)"], ">=", 0.85)
    row.target("ours / (b) JSON files", row.ratios["ours / (b) JSON files"], ">=", 3)
    row.target("ours / (c) INSERT per span", row.ratios["ours / (c) INSERT per span"], ">=", 50)
    rows_ours, distinct, digest = digests["ours"]
    row.check(
        f"every span is one row ({n:,}), none dropped",
        rows_ours - 1 == n and distinct == rows_ours and digests["dropped"] == 0,
        f"{rows_ours} rows ({n} timed + 1 before the clock), {distinct} distinct, {digests['dropped']} dropped",
    )
    bulk_rows, _, bulk_digest = digests["bulk"]
    # ours holds one extra span (the one exported before the clock to open the file)
    row.check(
        "ours and (a) hold the same rows (ids, attributes, events)",
        bulk_rows == n and bulk_digest == digest,
        f"{bulk_rows} bulk rows, digests {digest} / {bulk_digest}",
    )
    row.check("(b) files hold every span", digests["files"] == n, f"{digests['files']} spans in files")
    row.check("(c) every span is one row", per_row_count == per_row_n, f"{per_row_count} rows")
    row.info.update(
        plain_exporter_spans_per_s=Measure("plain", "", samples["plain"]).median,
        us_per_span_ours=1e6 / ours_rate,
        us_per_span_bulk=1e6 / row.baselines[0].median,
        us_per_span_json_files=1e6 / row.baselines[1].median,
        us_per_span_insert_per_span=1e6 / row.baselines[2].median,
        **{
            f"ours_{key}": Measure(key, "us", digests[key]).median
            for key in ("us_per_span_in_export", "us_per_span_in_flush", "us_per_span_in_merge_rest")
        },
    )
    row.notes.append(
        f"plain exporter (no normalisers, no redaction): {row.info['plain_exporter_spans_per_s']:,.0f} spans/s"
    )
    return row


def spans_from_arguments(description: str | None) -> tuple[argparse.Namespace, list[ReadableSpan]]:
    """The command line of this module and of ``bench/ingest_timeline.py`` (``-n``, ``--batch``)
    and the ``n + 1`` spans it asks for (one is stored before the clock)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=100_000, help="number of spans (default 100000)")
    parser.add_argument("--batch", type=int, default=512, help="spans per export() call (default 512)")
    args = parser.parse_args()
    return args, make_spans(args.n + 1)


def main() -> None:
    args, spans = spans_from_arguments(__doc__)
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-bench-"))
    try:
        rate, stats = exporter_rate(spans, folder / "bench.duckdb", args.batch)
        print(
            f"our exporter: {rate:,.0f} spans/s (export + flush; dropped {stats['spans_dropped']}), "
            f"{os.cpu_count()} CPUs"
        )
        table, rewards = convert_all(spans[1:], args.batch)
        from agent_rl_plugin.store import ensure_schema

        ensure_schema(str(folder / "bulk.duckdb"))
        print(f"(a) bulk insert of converted rows: {bulk_rate(table, rewards, folder / 'bulk.duckdb'):,.0f} spans/s")
        print(f"(b) JSON file per trace: {json_files_rate(spans[1:], folder / 'json'):,.0f} spans/s")
        ensure_schema(str(folder / "row.duckdb"))
        print(f"(c) INSERT per span: {per_insert_rate(spans[1:2001], folder / 'row.duckdb', args.batch):,.0f} spans/s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
