"""Many processes, one store: 4 agent processes export through the real OTLP/HTTP exporter to
one ``agent-rl serve`` process; every span lands exactly once with its parent; ``agent-rl query``
reads while the receiver holds the file; SIGTERM writes everything acknowledged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin.cli.main import main
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.receiver import fetch_stats, find_receiver
from agent_rl_plugin.receiver.workers import default_decode_workers
from agent_rl_plugin.store import StoreLockedError, open_reader

ROOT = Path(__file__).resolve().parents[1]

#: ``agent-rl`` with the receiver's commands registered (until they are in DEFAULT_PLUGINS).
CLI = textwrap.dedent(
    """
    import sys
    from agent_rl_plugin import plugins
    from agent_rl_plugin.cli import ingest, serve
    pm = plugins.get_plugin_manager()
    for name, module in (("cli_serve", serve), ("cli_ingest", ingest)):
        if not pm.is_registered(module):
            pm.register(module, name=name)
    from agent_rl_plugin.cli.main import main
    main(sys.argv[1:])
    """
)

#: One agent process: ROLLOUTS rollouts of a decorated agent with tools and a reward, exported
#: only over OTLP (no local file); the ids of every span it finished go to OUT as JSON lines.
AGENT = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor
    import agent_rl_plugin as arl

    endpoint, out, worker, rollouts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    arl.configure(otlp_endpoint=endpoint, db=None, export_delay_ms=20, export_batch_size=64,
                  service_name=f"worker-{worker}")
    seen = open(out, "w")

    class Ids(SpanProcessor):
        def on_end(self, span):
            ctx, parent = span.context, span.parent
            seen.write(json.dumps([f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}",
                                   None if parent is None else f"{parent.span_id:016x}"]) + "\\n")

    trace.get_tracer_provider().add_span_processor(Ids())

    @arl.trace_tool
    def lookup(key):
        return key[::-1]

    @arl.trace_agent(name="worker")
    def agent(i):
        return lookup(str(i)) + lookup(str(i * 2))

    for i in range(rollouts):
        with arl.rollout(task_id=f"w{worker}-t{i}", group_id=f"w{worker}"):
            agent(i)
            arl.emit_reward(1.0, name="done")
    assert arl.flush(60), "spans not acknowledged"
    arl.shutdown()
    seen.close()
    print("done", flush=True)
    """
)


def start_serve(db: Path, *extra: str) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen(
        # --no-token: these tests are about many writers, not auth (tests/test_security_receiver.py)
        [sys.executable, "-c", CLI, "serve", "--db", str(db), "--port", "0", "--no-token", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "AGENT_RL_SERVE_TOKEN": ""},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = find_receiver(db)
        if info is not None and info["pid"] == process.pid:
            return process, info
        if process.poll() is not None:
            raise AssertionError(f"agent-rl serve exited: {process.communicate()}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError("agent-rl serve did not start")


@pytest.fixture
def served(tmp_path: Path, request):
    db = tmp_path / "shared.duckdb"
    process, info = start_serve(db, "--max-queue", str(request.param))
    yield db, process, info
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.mark.parametrize("served", [200_000, 200], indirect=True, ids=["roomy-queue", "tiny-queue-503s"])
def test_four_agent_processes_one_receiver_every_span_once(served, tmp_path, capsys, plugin_manager):
    """With a tiny queue the exporters get 503s and retry: still every span exactly once."""
    db, serve_process, info = served
    rollouts = 100
    agents = [
        subprocess.Popen(
            [sys.executable, "-c", AGENT, info["url"], str(tmp_path / f"ids-{k}.jsonl"), str(k), str(rollouts)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "AGENT_RL_DB": ""},
        )
        for k in range(4)
    ]
    for process in agents:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0 and out.strip() == "done", err[-2000:]
    sent = [json.loads(line) for k in range(4) for line in (tmp_path / f"ids-{k}.jsonl").read_text().splitlines()]
    assert len(sent) == 4 * rollouts * 4  # rollout + agent + 2 tools per rollout
    assert len({(t, s) for t, s, _ in sent}) == len(sent)

    # The receiver holds the file: a direct open fails, but queries go through the receiver,
    # and open_reader() gets a consistent snapshot copy from it.
    with pytest.raises(StoreLockedError):
        open_reader(db, snapshot=False, wait_s=0.2)
    started = time.monotonic()
    snapshot = open_reader(db)  # no lock wait: the announced receiver holds the file for good
    assert time.monotonic() - started < 3.0
    try:
        assert snapshot.execute("select count(*) from spans").fetchone()[0] == len(sent)
        assert snapshot.execute("select count(*) from rollouts").fetchone()[0] == 4 * rollouts
    finally:
        snapshot.close()
    assert list(Path(str(db) + ".snapshots").glob("*.duckdb")) == []  # unlinked once open
    columns, result = run_query(str(db), "select count(*) as n, count(distinct (trace_id, span_id)) as d from spans")
    assert columns == ["n", "d"] and result == [(len(sent), len(sent))]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["query", "--db", str(db), "--json", "select service_name, count(*) as n from spans group by 1 order by 1"]
        )
    assert (exit_info.value.code or 0) == 0
    assert json.loads(capsys.readouterr().out) == [{"service_name": f"worker-{k}", "n": rollouts * 4} for k in range(4)]

    stats = fetch_stats(info["host"], info["port"])
    assert stats["spans_accepted"] == len(sent) and stats["spans_dropped"] == 0
    # agent-rl serve decodes in worker processes by default (one per CPU, at most 4).
    assert stats["decode_workers"] == default_decode_workers() and stats["decode_worker_restarts"] == 0
    if stats["queue_limit"] == 200:
        # Back-pressure happened: batches were held until the queue had room (first come, first
        # served) or refused with 503 and retried; either way nothing was lost.
        assert stats["batches_delayed"] + stats["batches_rejected"] > 0

    serve_process.send_signal(signal.SIGTERM)
    _, err = serve_process.communicate(timeout=60)
    assert serve_process.returncode == 0, err
    workers = default_decode_workers()
    assert (f"agent-rl serve: {workers} decode worker processes" in err) == (workers > 0), err
    assert not Path(str(db) + ".serve.json").exists()

    connection = duckdb.connect(str(db), read_only=True)
    try:
        stored = connection.execute("select trace_id, span_id, parent_span_id from spans").fetchall()
        orphans = connection.execute(
            "select count(*) from spans c where parent_span_id is not null and not exists "
            "(select 1 from spans p where p.trace_id = c.trace_id and p.span_id = c.parent_span_id)"
        ).fetchone()[0]
        rollout_count = connection.execute("select count(*) from rollouts").fetchone()[0]
        rewards = connection.execute("select count(*) from rewards").fetchone()[0]
    finally:
        connection.close()
    assert sorted(map(tuple, stored)) == sorted(map(tuple, sent))  # exactly once each, parents as sent
    assert orphans == 0
    assert rollout_count == 4 * rollouts and rewards == 4 * rollouts


def test_sigterm_writes_everything_acknowledged(tmp_path):
    """A slow writer holds a backlog when SIGTERM arrives: the process writes it all before exiting."""
    db = tmp_path / "term.duckdb"
    process, info = start_serve(db)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult
    from test_receiver import make_spans

    exporter = OTLPSpanExporter(endpoint=info["url"] + "/v1/traces")
    acknowledged = 0
    for i in range(30):
        spans = make_spans(20, f"b{i}")
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        acknowledged += len(spans)
    process.send_signal(signal.SIGTERM)  # right away: batches may still be queued
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"{acknowledged} spans written" in err
    connection = duckdb.connect(str(db), read_only=True)
    try:
        assert connection.execute("select count(*) from spans").fetchone()[0] == acknowledged
    finally:
        connection.close()


RECEIVER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from agent_rl_plugin.receiver import Receiver
    receiver = Receiver(sys.argv[1], port=0, token="", max_pending_spans=int(sys.argv[2]),
                        write_delay_s=float(sys.argv[3]), linger_s=0.0).start()
    while True:
        time.sleep(1)
    """
)


def test_kill_9_loses_at_most_the_queue_and_leaves_a_readable_file(tmp_path):
    """The bound documented in docs/scaling.md: acknowledged minus committed <= the queue bound."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult
    from test_receiver import make_spans

    db = tmp_path / "killed.duckdb"
    queue_bound = 200
    process = subprocess.Popen(
        [sys.executable, "-c", RECEIVER_SCRIPT, str(db), str(queue_bound), "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while (info := find_receiver(db)) is None or info["pid"] != process.pid:
            assert time.monotonic() < deadline and process.poll() is None, "receiver did not start"
            time.sleep(0.05)
        exporter = OTLPSpanExporter(endpoint=info["url"] + "/v1/traces", timeout=30)
        acknowledged = 0
        for i in range(25):
            spans = make_spans(10, f"k{i}")  # 20 spans per request
            assert exporter.export(spans) is SpanExportResult.SUCCESS
            acknowledged += len(spans)
        backlog = fetch_stats(info["host"], info["port"])["queue_depth"]
    finally:
        process.kill()
        process.wait()
    connection = duckdb.connect(str(db), read_only=True)  # the WAL replays: the file opens
    try:
        written = connection.execute("select count(*) from spans").fetchone()[0]
        duplicates = connection.execute("select count(*) - count(distinct (trace_id, span_id)) from spans").fetchone()[
            0
        ]
    finally:
        connection.close()
    assert duplicates == 0
    assert 0 <= acknowledged - written <= queue_bound
    assert backlog <= queue_bound


def test_serve_on_a_file_another_process_writes_fails_clearly(tmp_path):
    db = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, duckdb; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.readline()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        result = subprocess.run(
            [sys.executable, "-c", CLI, "serve", "--db", str(db), "--port", "0"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert result.returncode == 1
    assert f"database {db} is locked" in result.stderr and f"PID {holder.pid}" in result.stderr
    assert "Traceback" not in result.stderr and "fix: stop that process" in result.stderr
    assert result.stderr.count("is locked") == 1
    assert not Path(str(db) + ".serve.json").exists()
