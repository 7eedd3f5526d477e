"""kill -9 of an agent that records into a DuckDB file while it writes continuously.

An agent process records rollouts (rollout -> agent -> 2 tools + 1 LLM call, and a reward) in a
loop with the default batching, calls ``arl.flush()`` once and, once it returns, logs
``flushed N``; after every rollout it logs ``finished N``. The test kills it with SIGKILL at 12
moments from 0.3 s to 6 s after that flush (the writer thread is busy: spans are always in
flight), and checks each time:

* the file and its spool open afterwards: the next reader merges the segments the agent left
  (a half-written ``.tmp-`` segment of the dead writer is removed, never read);
* the rows are whole spans: ids well-formed and unique, every row's rollout id set and the same
  for its whole trace, JSON columns valid, times in order; every reward row's rollout has its
  spans (spans and rewards commit in one transaction); a rollout whose root span is stored is
  complete (spans reach the file in the order they finished), so at most one rollout is cut;
* the loss is at most the unflushed part: rows >= the last ``flushed N``; in spans, at most what
  the BatchSpanProcessor can hold plus the writer's queue; in time, typically (the median of the
  12 kills) the spans that finished in the last ``export_delay_ms + linger_s`` (0.5 s + 0.25 s)
  plus one segment write, with slack; each kill under 4 s.
* the kills 5 and 6 s after the only flush find spans written since it, and lose less than
  that: writing happens in the background, not only on flush.

The measurements are printed (``pytest -s``) and summarised in docs/store.md, "Crash safety".
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.store import open_reader
from agent_rl_plugin.store.opening import open_write_connection
from agent_rl_plugin.store.spool import TEMP_PREFIX, list_segments, remove_leftovers, spool_dir

ROOT = Path(__file__).resolve().parents[1]
SPANS_PER_ROLLOUT = 5
FLUSH_EVERY = 100  # rollouts: one flush, early; no second one before the kill
KILL_AFTER_FLUSH_S = (0.3, 0.6, 0.9, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0)

AGENT = textwrap.dedent(
    """
    import os, sys, time
    import agent_rl_plugin as arl

    db, log_path, flush_every = sys.argv[1], sys.argv[2], int(sys.argv[3])
    arl.configure(db=db)  # default batching: what a real agent gets
    log = open(log_path, "w", buffering=1)

    @arl.trace_tool
    def lookup(key):
        return key[::-1] * 20

    @arl.trace_agent(name="worker")
    def agent(i):
        found = lookup(f"a{i}") + lookup(f"b{i}")
        arl.record_llm_call("tiny", [{"role": "user", "content": found}], "answer " * 40,
                            input_tokens=len(found), output_tokens=40)
        return found

    i = 0
    log.write(f"started {time.time_ns()}\\n")
    while True:
        with arl.rollout(task_id=f"t{i}", group_id=f"g{i % 8}"):
            agent(i)
            arl.emit_reward(i % 3 / 2, name="score")
        i += 1
        log.write(f"finished {i * 5} {time.time_ns()}\\n")
        time.sleep(0.001)  # an agent with some work of its own between rollouts (~4,000 spans/s)
        if i == flush_every:
            assert arl.flush(60), "flush timed out"
            log.write(f"flushed {i * 5} {time.time_ns()}\\n")
    """
)


def last(pattern: str, text: str) -> re.Match | None:
    matches = list(re.finditer(pattern, text, re.MULTILINE))
    return matches[-1] if matches else None


def run_and_kill(tmp_path: Path, name: str, flushes_before_kill: int, extra_s: float) -> dict:
    db, log = tmp_path / f"{name}.duckdb", tmp_path / f"{name}.log"
    process = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(db), str(log), str(FLUSH_EVERY)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "AGENT_RL_DB": ""},
    )
    try:
        deadline = time.monotonic() + 120
        while not log.exists() or log.read_text().count("flushed ") < flushes_before_kill:
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the agent did not flush in time"
            time.sleep(0.02)
        time.sleep(extra_s)  # somewhere between two flushes: the pipeline holds spans
        assert process.poll() is None
        killed_at_ns = time.time_ns()
        process.send_signal(signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    text = log.read_text()
    flushed_match = last(r"^flushed (\d+) (\d+)$", text)
    flushed, flushed_ns = int(flushed_match.group(1)), int(flushed_match.group(2))
    finished_match = last(r"^finished (\d+) (\d+)$", text)
    finished = int(finished_match.group(1))
    started_ns = int(last(r"^started (\d+)$", text).group(1))
    return {"db": db, "flushed": flushed, "flushed_ns": flushed_ns, "finished": finished, "killed_at_ns": killed_at_ns,
            "rate": finished / ((int(finished_match.group(2)) - started_ns) / 1e9)}


def check_database(run: dict) -> dict:
    db: Path = run["db"]
    # The next reader merges what the dead agent left in the spool; its merger process, if it had
    # started one, may still hold the file for the lease in progress (then ends: see
    # merger_process), and the reader after that merges.
    deadline = time.monotonic() + 30
    open_reader(db).close()
    while list_segments(db) and time.monotonic() < deadline:
        time.sleep(0.2)
        open_reader(db).close()
    assert not list_segments(db)
    # A segment the kill cut short is a .tmp- file: never read; removed once old.
    half_written = [os.path.join(spool_dir(db), f) for f in os.listdir(spool_dir(db)) if f.startswith(TEMP_PREFIX)]
    for path in half_written:
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    assert remove_leftovers(db) == len(half_written)
    assert db.exists()
    connection = duckdb.connect(str(db), read_only=True)
    try:
        q = lambda sql: connection.execute(sql).fetchall()  # noqa: E731
        ((rows, distinct),) = q("select count(*), count(distinct (trace_id, span_id)) from spans")
        ((malformed,),) = q(
            r"""select count(*) from spans where not regexp_full_match(trace_id, '[0-9a-f]{32}')
                or not regexp_full_match(span_id, '[0-9a-f]{16}')
                or (parent_span_id is not null and not regexp_full_match(parent_span_id, '[0-9a-f]{16}'))
                or rollout_id is null or not regexp_full_match(task_id, 't[0-9]+')
                or name is null or start_unix_nano is null or end_unix_nano < start_unix_nano
                or attributes is null or not json_valid(attributes) or not json_valid(events)
                or json_extract_string(attributes, '$."agent_rl.rollout.id"') is distinct from rollout_id"""
        )
        ((mixed_traces,),) = q(
            "select count(*) from (select trace_id from spans group by 1 "
            "having count(distinct rollout_id) <> 1 or count(distinct task_id) <> 1)"
        )
        per_rollout = q(
            "select rollout_id, count(*), bool_or(is_rollout_root) from spans group by 1"
        )
        ((orphan_rewards,),) = q(
            "select count(*) from rewards r where not exists (select 1 from spans s where s.rollout_id = r.rollout_id)"
        )
        ((rewards,),) = q("select count(*) from rewards")
        ((newest_ns,),) = q("select max(end_unix_nano) from spans")
    finally:
        connection.close()
    assert rows == distinct, "a span was written twice"
    assert malformed == 0 and mixed_traces == 0 and orphan_rewards == 0
    complete = [n for _, n, has_root in per_rollout if has_root]
    cut = [n for _, n, has_root in per_rollout if not has_root]
    assert all(n == SPANS_PER_ROLLOUT for n in complete)
    assert len(cut) <= 1 and all(n < SPANS_PER_ROLLOUT for n in cut)  # only the one at the cut
    assert rewards == len(complete)  # each stored rollout's reward is there with it

    # Read-write: migrations run, a checkpoint folds the WAL into the file, nothing changes.
    writer, applied = open_write_connection(db)
    try:
        assert applied == []
        writer.execute("checkpoint")
        assert writer.execute("select count(*) from spans").fetchone()[0] == rows
    finally:
        writer.close()
    again = duckdb.connect(str(db), read_only=True)
    try:
        assert again.execute("select count(*) from spans").fetchone()[0] == rows
    finally:
        again.close()
    return {"rows": rows, "newest_ns": newest_ns}


@pytest.mark.slow
def test_kill_9_leaves_readable_whole_spans_and_loses_at_most_the_last_moment(tmp_path):
    config = RLConfig()
    # The hard bound in spans: the BatchSpanProcessor's queue plus the writer's queue (the
    # store plugin sizes it max(4 * max_queue_size, 100_000)).
    span_bound = config.max_queue_size + max(4 * config.max_queue_size, 100_000)
    # In time: export_delay_ms (0.5 s) + linger_s (0.25 s) + one segment write while the writer
    # keeps up (an agent recording flat out, ~17,000 spans/s here, outruns the export thread it
    # shares the GIL with, and the backlog grows: see docs/store.md); on a loaded 2-core machine
    # it can fall behind for a moment, so the bound is on the median of the kills, and each
    # single kill gets a looser one.
    typical_bound_s = config.export_delay_ms / 1000 + 0.25 + 0.75
    single_bound_s = 4.0
    measured = []
    for k, extra_s in enumerate(KILL_AFTER_FLUSH_S):
        run = run_and_kill(tmp_path, f"killed{k}", flushes_before_kill=1, extra_s=extra_s)
        stored = check_database(run)
        rows = stored["rows"]
        # Every flushed span survived; nothing beyond what had finished (the rollout being
        # recorded at the kill may have exported its first spans) was invented.
        assert run["flushed"] <= rows <= run["finished"] + SPANS_PER_ROLLOUT - 1
        lost_spans = max(run["finished"] - rows, 0)
        # The recording time lost: from the newest stored span, or from the flush's return when
        # nothing after it was stored (the agent recorded nothing while flush() blocked it).
        lost_s = (run["killed_at_ns"] - max(stored["newest_ns"], run["flushed_ns"])) / 1e9
        measured.append({"kill_after_flush_s": extra_s, "finished": run["finished"], "flushed": run["flushed"],
                         "rows": rows, "lost_spans": lost_spans, "lost_s": round(lost_s, 3),
                         "spans_per_s": round(run["rate"])})
        assert lost_spans <= span_bound, measured[-1]
        assert lost_s < single_bound_s, measured[-1]
        if extra_s >= 5:
            # Written in the background since the only flush: a writer that wrote only on
            # flush() would have lost every span since then (at least extra_s seconds).
            assert rows > run["flushed"] and lost_s < extra_s - 1.0, measured[-1]
    print("\nkill -9 measurements:", json.dumps(measured, indent=1))
    lost = sorted(m["lost_s"] for m in measured)
    print("lost s: median", statistics.median(lost), "max", lost[-1], "; max spans",
          max(m["lost_spans"] for m in measured))
    assert statistics.median(lost) < typical_bound_s, lost
