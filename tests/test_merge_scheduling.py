"""When a recording process merges its spool, and when it leaves the file to others.

Examples of the scheduling in :mod:`agent_rl_plugin.store.spool_writer` (a burst is merged while
it is recorded; a backlog is merged lease after lease; a pause between merges only while someone
waits for the file), of the waiting notes of :mod:`agent_rl_plugin.store.holders` written by
:func:`agent_rl_plugin.store.lease.with_wait`, and of the merger process giving the file to a
waiting reader between its leases.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_rl_plugin.store import holders, spool_writer
from agent_rl_plugin.store.lease import open_read_only
from agent_rl_plugin.store.merger_process import LeaseLimits, MergerProcess
from agent_rl_plugin.store.spool import list_segments, spool_dir, write_segment
from agent_rl_plugin.store.spool_writer import SpoolWriter
from agent_rl_plugin.store.writer import ExportStats
from tests.test_store_spool import count, recorded


def settles(condition, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def slow_interval_writer(db: Path) -> SpoolWriter:
    """A writer of this process (the suite merges in-process) whose interval never comes in a test."""
    return SpoolWriter(str(db), stats=ExportStats(), report=lambda kind, exc: None, merge_interval_s=600.0)


def test_a_burst_is_merged_while_it_is_recorded_not_at_the_next_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(spool_writer, "PROMPT_MERGE_ROWS", 5)
    db = tmp_path / "runs.duckdb"
    writer = slow_interval_writer(db)
    try:
        assert writer.submit(recorded(6))
        assert settles(lambda: writer.merges >= 1 and not list_segments(db))
    finally:
        writer.close()
    assert count(db) == 6


def test_a_trickle_waits_for_the_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(spool_writer, "PROMPT_MERGE_ROWS", 5)
    db = tmp_path / "runs.duckdb"
    writer = slow_interval_writer(db)
    try:
        assert writer.submit(recorded(3))
        assert settles(lambda: len(list_segments(db)) == 1)
        time.sleep(1.0)
        assert writer.merges == 0 and len(list_segments(db)) == 1
    finally:
        writer.close()  # the close merges
    assert count(db) == 3


def test_a_backlog_is_merged_lease_after_lease_without_waiting_for_the_interval(tmp_path, monkeypatch):
    one_segment = spool_writer.LeaseLimits(max_leases=1, max_segments=1, max_rows=1, merge_threads=1)
    monkeypatch.setattr(spool_writer, "IN_PROCESS_LIMITS", one_segment)
    monkeypatch.setattr(spool_writer, "PROMPT_MERGE_ROWS", 1)
    db = tmp_path / "runs.duckdb"
    for i in range(3):  # left by an earlier run, say
        write_segment(db, recorded(2, rollout=f"old{i}").spans)
    writer = slow_interval_writer(db)
    try:
        assert writer.submit(recorded(1))
        assert settles(lambda: writer.merges >= 4 and not list_segments(db))
    finally:
        writer.close()
    assert count(db) == 7


def test_the_merger_pauses_between_merges_only_while_someone_waits(tmp_path, monkeypatch):
    monkeypatch.setattr(spool_writer, "PROMPT_MERGE_ROWS", 1)
    monkeypatch.setattr(spool_writer, "MERGE_GAP_S", 600.0)
    monkeypatch.setattr(spool_writer, "someone_waiting", lambda path: True)
    db = tmp_path / "runs.duckdb"
    writer = slow_interval_writer(db)
    try:
        assert writer.submit(recorded(2))
        assert settles(lambda: len(list_segments(db)) == 1)
        time.sleep(1.0)
        assert writer.merges == 0  # someone waits: the file is theirs for MERGE_GAP_S
        monkeypatch.setattr(spool_writer, "someone_waiting", lambda path: False)
        assert writer.submit(recorded(2, rollout="r2"))
        time.sleep(1.0)
        assert writer.merges == 0  # the pause already begun runs its course
    finally:
        started = time.monotonic()
        writer.close()  # and closing does not wait for it
        assert time.monotonic() - started < 30
    assert count(db) == 4


def test_a_waiting_reader_leaves_a_note_while_it_waits_and_none_after(tmp_path):
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(1).spans)  # a recording process's spool: waiting notes are read there
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
         "time.sleep(float(sys.argv[2]))", str(db), "2.0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        opened: list = []
        reader = threading.Thread(target=lambda: opened.append(open_read_only(db, wait_s=30.0)))
        reader.start()
        assert settles(lambda: holders.someone_waiting(db), timeout_s=5.0)
        reader.join(30)
        assert opened and not holders.someone_waiting(db)
        opened[0].close()
    finally:
        holder.wait(30)
    assert not [name for name in os.listdir(Path(spool_dir(db)) / "holders") if name.endswith(holders.WAIT_SUFFIX)]


def test_a_reader_of_a_store_without_a_spool_creates_no_folder(tmp_path):
    db = tmp_path / "runs.duckdb"
    with holders.waiting(db):
        assert not holders.someone_waiting(db)  # nothing recorded here: nobody to tell
    assert not Path(spool_dir(db)).exists()


def test_the_note_of_a_reader_that_died_is_ignored(tmp_path):
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(1).spans)
    notes = Path(spool_dir(db)) / "holders"
    notes.mkdir(exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (notes / f"{int(dead.stdout)}.1{holders.WAIT_SUFFIX}").touch()
    assert not holders.someone_waiting(db)
    with holders.waiting(db):
        assert holders.someone_waiting(db)
    assert not holders.someone_waiting(db)


@pytest.mark.skipif(not MergerProcess.supported(), reason="merger children need POSIX pipes")
def test_the_merger_process_hands_the_file_to_a_waiting_reader_between_leases(tmp_path):
    db = tmp_path / "runs.duckdb"
    for i in range(3):
        write_segment(db, recorded(2, rollout=f"r{i}").spans)
    one_per_lease = LeaseLimits(max_leases=8, max_segments=1, max_rows=1, merge_threads=1)
    merger = MergerProcess(str(db))
    try:
        with holders.waiting(db):  # as a reader's with_wait does while the file is held
            outcome = merger.merge(wait_s=5.0, limits=one_per_lease)
        assert outcome is not None and len(outcome.results) == 1  # then it stopped for the reader
        assert len(list_segments(db)) == 2
        outcome = merger.merge(wait_s=5.0, limits=one_per_lease)  # nobody waits: lease after lease
        assert outcome is not None and len(outcome.results) == 2
    finally:
        merger.close()
    assert count(db) == 6 and list_segments(db) == []
