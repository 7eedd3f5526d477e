"""Spool segments: how spans reach a database that no recording process holds.

Examples of the guarantees in :mod:`agent_rl_plugin.store.spool`,
:mod:`agent_rl_plugin.store.compaction` and :mod:`agent_rl_plugin.store.reading`.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.store import open_reader
from agent_rl_plugin.store.compaction import merge_segments
from agent_rl_plugin.store.lease import try_merge, write_lease
from agent_rl_plugin.store.opening import open_write_connection
from agent_rl_plugin.store.rows import SpanConverter
from agent_rl_plugin.store.spool import (
    TEMP_PREFIX, list_segments, remove_leftovers, spool_dir, write_segment,
)


class Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list = []

    def export(self, spans):  # type: ignore[no-untyped-def]
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def recorded(n: int, rollout: str = "r1", reward: float | None = None, name: str = "step"):
    """``n`` finished spans of one rollout (the first with a reward event), converted to rows."""
    keep = Keep()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("t")
    for i in range(n):
        with tracer.start_as_current_span(f"{name} {i}", attributes={sc.ROLLOUT_ID: rollout, "i": i}) as span:
            if reward is not None and i == 0:
                span.add_event(sc.EVENT_EVALUATION_RESULT,
                               {sc.GEN_AI_EVALUATION_NAME: "score", sc.GEN_AI_EVALUATION_SCORE_VALUE: reward})
    return SpanConverter().convert(keep.spans)


def count(db: Path, sql: str = "select count(*) from spans") -> int:
    connection = duckdb.connect(str(db), read_only=True)
    try:
        return connection.execute(sql).fetchone()[0]
    finally:
        connection.close()


def test_a_segment_is_private_atomic_and_sorted(tmp_path):
    db = tmp_path / "s.duckdb"
    first = write_segment(db, recorded(3).spans)
    batch = recorded(2, reward=1.0)
    second = write_segment(db, batch.spans, batch.rewards)
    assert [s.name for s in list_segments(db)] == [first.name, second.name]  # write order
    assert first.rewards_path is None and second.rewards_path is not None
    assert stat.S_IMODE(os.stat(spool_dir(db)).st_mode) == 0o700
    for path in (first.spans_path, second.spans_path, second.rewards_path):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [f for f in os.listdir(spool_dir(db)) if f.startswith(TEMP_PREFIX)]
    assert not db.exists()  # writing segments never touches the database


def test_merging_inserts_each_segment_once_even_after_a_crash_before_the_delete(tmp_path):
    db = tmp_path / "s.duckdb"
    batch = recorded(4, reward=0.5)
    segment = write_segment(db, batch.spans, batch.rewards)
    saved = tmp_path / "saved"
    saved.mkdir()
    for path in (segment.spans_path, segment.rewards_path):
        shutil.copy(path, saved)
    result = try_merge(db)
    assert result is not None and result.segments == 1
    assert count(db) == 4 and count(db, "select count(*) from rewards") == 1
    assert not list_segments(db)
    # A merge that committed and then died before deleting its files: they are back.
    for name in os.listdir(saved):
        shutil.copy(saved / name, spool_dir(db))
    assert [s.name for s in list_segments(db)] == [segment.name]
    result = try_merge(db)
    assert result is not None and result.segments == 0  # known to the ledger: not inserted again
    assert count(db) == 4 and count(db, "select count(*) from rewards") == 1
    assert not list_segments(db)  # and deleted this time


def test_rows_keep_their_columns_and_ingest_time_from_the_segment(tmp_path):
    db = tmp_path / "s.duckdb"
    before = time.time()
    write_segment(db, recorded(2, rollout="abc").spans)
    try_merge(db)
    connection = duckdb.connect(str(db), read_only=True)
    try:
        rows = connection.execute(
            "select rollout_id, duration_ms >= 0, epoch(ingested_at) from spans order by name"
        ).fetchall()
    finally:
        connection.close()
    assert [r[:2] for r in rows] == [("abc", True), ("abc", True)]
    assert all(before - 1 <= r[2] <= time.time() + 1 for r in rows)


def test_a_bad_row_loses_only_itself(tmp_path, caplog):
    db = tmp_path / "s.duckdb"
    spans = recorded(9).spans
    attributes = spans.column("attributes").to_pylist()
    attributes[4] = "{not json"
    spans = spans.set_column(spans.schema.get_field_index("attributes"), "attributes", [attributes])
    write_segment(db, spans)
    write_segment(db, recorded(3, rollout="r2").spans)
    result = try_merge(db)
    assert result is not None and result.dropped_rows == 1 and result.segments == 2
    assert count(db) == 11
    assert any("could not be stored" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")


def test_leftovers_are_removed_by_age_never_by_process_id(tmp_path):
    """A half-written file of a writer that died is removed once it is old; a fresh one is
    kept whatever its process id says: in another PID namespace (containers sharing a volume)
    a live writer's PID looks dead, and deleting its file would lose its batch."""
    db = tmp_path / "s.duckdb"
    folder = Path(spool_dir(db))
    write_segment(db, recorded(1).spans)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    fresh = folder / f"{TEMP_PREFIX}0001-{dead_pid}-00000001.spans.parquet"
    fresh.write_bytes(b"being written in another container")
    orphan = folder / f"0002-{dead_pid}-00000002.rewards.parquet"  # its spans file comes next
    orphan.write_bytes(b"orphan for now")
    assert remove_leftovers(db) == 0
    old = time.time() - 11 * 60
    for path in (fresh, orphan):
        os.utime(path, (old, old))
    assert remove_leftovers(db) == 2
    assert sorted(os.listdir(folder)) == [os.path.basename(list_segments(db)[0].spans_path)]


def test_an_unreadable_segment_is_quarantined_and_the_rest_merged(tmp_path, caplog):
    db = tmp_path / "s.duckdb"
    write_segment(db, recorded(3).spans)
    bad = write_segment(db, recorded(2, rollout="bad").spans)
    write_segment(db, recorded(4, rollout="r3").spans)
    Path(bad.spans_path).write_bytes(Path(bad.spans_path).read_bytes()[:300])  # truncated
    connection = open_reader(db)  # neither the reader ...
    try:
        assert connection.execute("select count(*) from spans").fetchone()[0] == 7
    finally:
        connection.close()
    assert count(db) == 7 and not list_segments(db)  # ... nor the merge is stopped by it
    assert os.listdir(os.path.join(spool_dir(db), "quarantine")) == [os.path.basename(bad.spans_path)]
    assert any("cannot be read" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")


def test_a_backlog_is_merged_in_bounded_leases(tmp_path):
    db = tmp_path / "s.duckdb"
    for _ in range(300):
        write_segment(db, recorded(1).spans)
    first = try_merge(db, max_segments=256)
    assert first is not None and first.segments == 256 and len(list_segments(db)) == 44
    assert try_merge(db, max_segments=256).segments == 44 and count(db) == 300


def test_links_and_folders_in_the_spool_are_not_segments(tmp_path):
    db = tmp_path / "s.duckdb"
    real = write_segment(db, recorded(1).spans)
    outside = tmp_path / "outside.parquet"
    shutil.copy(real.spans_path, outside)
    os.symlink(outside, os.path.join(spool_dir(db), "0000-1-00000009.spans.parquet"))
    os.mkdir(os.path.join(spool_dir(db), "0000-1-00000010.spans.parquet"))
    assert [s.name for s in list_segments(db)] == [real.name]


HOLD_READ_ONLY = textwrap.dedent(
    """
    import sys, duckdb
    connection = duckdb.connect(sys.argv[1], read_only=True)
    print("ready", flush=True)
    sys.stdin.readline()
    connection.close()
    """
)


def test_a_reader_sees_segments_that_cannot_be_merged_yet(tmp_path):
    db = tmp_path / "s.duckdb"
    with write_lease(db, what="test"):
        pass
    write_segment(db, recorded(2, rollout="old").spans)
    try_merge(db)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_READ_ONLY, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        batch = recorded(3, rollout="new", reward=1.0)
        write_segment(db, batch.spans, batch.rewards)
        assert try_merge(db, wait_s=0.1) is None  # another process reads the file: no merge now
        connection = open_reader(db, wait_s=1)
        try:
            assert connection.execute("select count(*) from spans").fetchone()[0] == 5
            assert connection.execute("select rollout_id, count(*) from spans group by 1 order by 1").fetchall() == [
                ("new", 3), ("old", 2)]
            assert connection.execute("select count(*) from rewards").fetchone()[0] == 1
            # The stored views read through the overlay too.
            assert connection.execute("select count(*) from steps").fetchone()[0] >= 0
            assert connection.execute("select count(distinct rollout_id) from spans").fetchone()[0] == 2
        finally:
            connection.close()
        assert count(db) == 2  # still only in the spool
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
    connection = open_reader(db)  # now it can merge
    connection.close()
    assert count(db) == 5 and not list_segments(db)


def test_merge_through_a_held_connection(tmp_path):
    """The receiver holds its file: it merges segments through its own connection."""
    db = tmp_path / "s.duckdb"
    write_segment(db, recorded(2).spans)
    connection, _ = open_write_connection(db)
    try:
        assert merge_segments(connection, db).segments == 1
        assert connection.execute("select count(*) from spans").fetchone()[0] == 2
    finally:
        connection.close()


# ("?" is left out: DuckDB itself cannot commit to a database whose path holds one.)
@pytest.mark.parametrize("weird", ["brackets [x]", "star*and{a,b}", "quote's"])
def test_paths_with_glob_and_quote_characters(tmp_path, weird):
    db = tmp_path / weird / "s.duckdb"
    write_segment(db, recorded(2).spans)
    try_merge(db)
    assert count(db) == 2
    write_segment(db, recorded(1).spans)
    reader = subprocess.Popen([sys.executable, "-c", HOLD_READ_ONLY, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        connection = open_reader(db, wait_s=1)  # overlay with that path quoted in SQL
        try:
            assert connection.execute("select count(*) from spans").fetchone()[0] == 3
        finally:
            connection.close()
    finally:
        assert reader.stdin is not None
        reader.stdin.close()
        reader.wait(timeout=20)


def test_a_shutting_down_interpreter_is_not_a_data_error():
    """duckdb 2.0.1 refuses Python scans after its exit hook: retrying row by row would fail
    every row the same way (and log twice), so it is not treated as bad data."""
    from agent_rl_plugin.store.batch import is_data_error

    refused = duckdb.InvalidInputException(
        "Invalid Input Error: this query cannot run Python code: the Python interpreter is shutting down")
    assert not is_data_error(refused)
    assert is_data_error(duckdb.InvalidInputException("Invalid Input Error: Malformed JSON"))


def test_a_replayed_span_is_kept_once(tmp_path):
    """The same spans sent twice (a retried export, a replayed request) are stored once, with
    their rewards once, whether they arrive in one segment, two, or through a held connection."""
    from agent_rl_plugin.store.batch import insert_batch

    db = tmp_path / "s.duckdb"
    batch = recorded(4, reward=1.0)
    write_segment(db, batch.spans, batch.rewards)
    write_segment(db, batch.spans, batch.rewards)
    result = try_merge(db)
    assert result is not None and (result.spans, result.duplicates) == (4, 4)
    doubled = recorded(3, rollout="r2")
    write_segment(db, __import__("pyarrow").concat_tables([doubled.spans, doubled.spans]))
    assert try_merge(db).duplicates == 3
    connection, _ = open_write_connection(db)
    try:
        assert insert_batch(connection, batch.spans, batch.rewards) == 0  # the receiver's path
        assert connection.execute("select count(*), count(distinct (trace_id, span_id)) from spans").fetchone() == (7, 7)
        assert connection.execute("select count(*) from rewards").fetchone()[0] == 1
    finally:
        connection.close()


def test_the_database_file_is_private(tmp_path):
    """The database holds prompts and outputs: created 0600, like the spool and the snapshots."""
    db = tmp_path / "private.duckdb"
    write_segment(db, recorded(2).spans)
    try_merge(db)
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    with write_lease(db, what="test") as connection:
        connection.execute("select 1")
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    assert not os.path.exists(str(db) + ".wal") or stat.S_IMODE(os.stat(str(db) + ".wal").st_mode) == 0o600


def test_a_spool_folder_others_can_write_is_refused(tmp_path):
    """Whatever lands in the spool is merged into the database: a folder another user prepared
    (say in a shared /tmp) or made world-writable is never used or read."""
    from agent_rl_plugin.store.spool import SpoolNotPrivate

    db = tmp_path / "s.duckdb"
    os.makedirs(spool_dir(db))
    os.chmod(spool_dir(db), 0o777)
    with pytest.raises(SpoolNotPrivate, match="not private"):
        write_segment(db, recorded(1).spans)
    with pytest.raises(SpoolNotPrivate):
        list_segments(db)
    with write_lease(db, what="test"):  # the database itself stays readable, without the spool
        pass
    connection = open_reader(db)
    try:
        assert connection.execute("select count(*) from spans").fetchone()[0] == 0
    finally:
        connection.close()
    os.chmod(spool_dir(db), 0o700)
    write_segment(db, recorded(1).spans)
    assert len(list_segments(db)) == 1


def test_an_agent_reading_its_own_store_sees_every_span_it_finished(plugin_manager, tmp_path):
    """No flush() needed: open_reader() in the recording process flushes the span queue in
    front of the exporter too, not only the writer behind it."""
    import agent_rl_plugin as arl

    db = tmp_path / "self.duckdb"
    arl.configure(db=str(db), export_delay_ms=60_000)  # nothing would leave the queue by itself

    @arl.trace_agent
    def agent(i):
        return i

    for round_ in range(1, 4):
        for i in range(50):
            agent(i)
        connection = open_reader(db)
        try:
            assert connection.execute("select count(*) from spans").fetchone()[0] == 50 * round_
        finally:
            connection.close()


def test_flush_does_not_wait_for_a_file_another_process_reads(plugin_manager, tmp_path):
    """The segments are on disk and readers show them, so flush() returns at once; the merge
    happens once the other process lets go."""
    import agent_rl_plugin as arl

    db = tmp_path / "busy.duckdb"
    with write_lease(db, what="test"):
        pass
    arl.configure(db=str(db))

    @arl.trace_agent
    def agent(i):
        return i

    holder = subprocess.Popen([sys.executable, "-c", HOLD_READ_ONLY, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        took = []
        for i in range(5):
            agent(i)
            started = time.monotonic()
            assert arl.flush()
            took.append(time.monotonic() - started)
        assert max(took) < 0.5, took
        assert len(list_segments(db)) >= 1
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
    assert arl.flush()
    assert count(db) == 5


def test_reading_a_store_this_process_records_into_before_any_span(plugin_manager, tmp_path):
    """Recording is configured but nothing was recorded yet (say, with enable_rl=False): the
    store reads as empty, it is not an error."""
    import agent_rl_plugin as arl

    db = tmp_path / "empty.duckdb"
    arl.configure(db=str(db))
    connection = open_reader(db)
    try:
        assert connection.execute("select count(*) from spans").fetchone()[0] == 0
    finally:
        connection.close()


def test_an_interrupted_background_merge_is_deferred_not_reported_and_loses_nothing(tmp_path, monkeypatch):
    import agent_rl_plugin.store.lease as lease
    import agent_rl_plugin.store.spool_writer as spool_writer

    monkeypatch.setenv("AGENT_RL_MERGER", "thread")  # this process merges (the merger process: its own tests)

    db = tmp_path / "s.duckdb"
    for _ in range(3):
        write_segment(db, recorded(2).spans)
    from agent_rl_plugin.store.writer import ExportStats

    reported = []
    writer = spool_writer.SpoolWriter(str(db), stats=ExportStats(), report=lambda kind, exc: reported.append((kind, exc)))
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(lease, "try_merge", interrupted)
    writer._merge(0.0)
    assert calls and writer.merges_interrupted == 1 and reported == []
    assert len(list_segments(db)) == 3  # still in the spool, waiting
    monkeypatch.setattr(lease, "try_merge", try_merge)
    writer._merge(0.0)  # the next merge takes them
    assert list_segments(db) == [] and count(db) == 6
    monkeypatch.setattr(lease, "try_merge", lambda *a, **k: (_ for _ in ()).throw(OSError("disk")))
    writer._merge(0.0)
    assert [kind for kind, _ in reported] == ["merge"]  # any other failure is still reported
