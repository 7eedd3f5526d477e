"""What sharing a file between processes costs: spool segment writes, merges, reader opens.

Recording agents never hold the database: each batch becomes a spool segment (Parquet, fsynced,
renamed), merged into the database in short leases (see docs/store.md, "Many processes, one
file"). Measured in the same run, on the same converted rows (built outside the clock):

* **ours**: writing a segment of 1,000 spans (``write_segment``: two fsyncs and a rename), per
  span; also for 100 and 10,000 spans;
* **baseline**: the store's own bulk insert of the same rows into a database this process holds
  (``insert_batch``, one transaction), per span: what holding the file would cost instead;
* **merge**: 100 segments of 1,000 spans merged into a database (open, one transaction, close,
  delete), and per span;
* **reader**: ``open_reader`` + ``count(*)`` on that database with 0 and with 100 unmerged
  segments shown through the overlay (the file held read-only by another process, so they
  cannot be merged).

    python -m bench --only spool [--quick]
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench.harness import Context, Measure, Row, interleave, ratio
from bench.store_ingest import convert_all, make_spans

HOLD = textwrap.dedent(
    """
    import sys, duckdb
    c = duckdb.connect(sys.argv[1], read_only=True)
    print("ready", flush=True)
    sys.stdin.readline()
    """
)


def run(ctx: Context) -> Row:
    from agent_rl_plugin.store import open_reader
    from agent_rl_plugin.store.batch import insert_batch
    from agent_rl_plugin.store.lease import try_merge
    from agent_rl_plugin.store.opening import open_write_connection
    from agent_rl_plugin.store.spool import list_segments, write_segment

    segments = ctx.size(100, 20)
    per_segment = 1_000
    repeats = ctx.size(7, 3)
    row = Row(id="spool", sizes={"segments": segments, "spans_per_segment": per_segment})
    ctx.log(f"spool: converting {segments * per_segment:,} spans")
    table, _ = convert_all(make_spans(segments * per_segment), 512)
    chunk = table.slice(0, per_segment)
    work = ctx.folder("spool")
    counter = iter(range(10**6))

    def segment_write(n: int) -> float:
        db = work / f"w{next(counter)}.duckdb"
        started = time.perf_counter()
        write_segment(db, table.slice(0, n))
        return (time.perf_counter() - started) * 1e6 / n

    def held_insert() -> float:
        db = work / f"h{next(counter)}.duckdb"
        connection, _ = open_write_connection(db)
        try:
            insert_batch(connection, table.slice(0, per_segment))  # warm: the first insert builds the table
            started = time.perf_counter()
            insert_batch(connection, chunk)
            return (time.perf_counter() - started) * 1e6 / per_segment
        finally:
            connection.close()

    samples = interleave({"ours": lambda: segment_write(per_segment), "held": held_insert}, repeats=repeats)
    small = [segment_write(100) for _ in range(repeats)]
    large = [segment_write(10_000) for _ in range(max(1, repeats // 2))] if table.num_rows >= 10_000 else []

    ctx.log(f"spool: merging {segments} segments of {per_segment:,} spans")
    db = work / "merge.duckdb"
    for k in range(segments):
        write_segment(db, table.slice(k * per_segment, per_segment))
    started = time.perf_counter()
    result = try_merge(db)
    merge_s = time.perf_counter() - started
    merged = result.segments if result else 0
    left = len(list_segments(db))

    def reader_open() -> float:
        started = time.perf_counter()
        connection = open_reader(db)
        try:
            connection.execute("select count(*) from spans").fetchone()
        finally:
            connection.close()
        return (time.perf_counter() - started) * 1000

    plain_open = [reader_open() for _ in range(repeats)]
    for k in range(segments):
        write_segment(db, table.slice(k * per_segment, per_segment))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        counted = []

        def overlay_open() -> float:
            started = time.perf_counter()
            connection = open_reader(db, wait_s=5)
            try:
                counted.append(connection.execute("select count(*) from spans").fetchone()[0])
            finally:
                connection.close()
            return (time.perf_counter() - started) * 1000

        overlay = [overlay_open() for _ in range(repeats)]
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)

    row.value = Measure("segment write, 1,000 spans", "us/span", samples["ours"])
    row.baselines.append(Measure("insert into a held database, 1,000 spans", "us/span", samples["held"]))
    row.ratios["segment write / held insert"] = ratio(row.value.median, row.baselines[0].median)
    row.target("segment write us/span", row.value.median, "<=", 10.0)
    row.target(f"merge of {segments} segments, s", merge_s, "<=", 2.0)
    row.check(f"all {segments} segments merged, none left", merged == segments and left == 0,
              f"{merged} merged, {left} left")
    expected = 2 * segments * per_segment
    row.check("the overlay shows merged and unmerged rows", all(c == expected for c in counted), f"{counted[:3]}")
    row.info.update(
        segment_write_100_us_per_span=Measure("", "", small).median,
        segment_write_100_ms=Measure("", "", small).median * 100 / 1000,
        segment_write_1000_ms=row.value.median * per_segment / 1000,
        segment_write_10000_us_per_span=Measure("", "", large).median if large else None,
        merge_s=merge_s,
        merge_us_per_span=merge_s * 1e6 / (segments * per_segment),
        reader_open_ms=Measure("", "", plain_open).median,
        reader_open_with_overlay_ms=Measure("", "", overlay).median,
    )
    row.notes.append(
        f"merge of {segments}x{per_segment:,} spans: {merge_s:.2f} s; reader open + count: "
        f"{row.info['reader_open_ms']:.0f} ms, with {segments} unmerged segments {row.info['reader_open_with_overlay_ms']:.0f} ms"
    )
    return row
