"""SIGTERM to an instrumented agent mid-run: every span it finished is written before it dies.

The agent processes below record finished rollouts whose spans are still in the
``BatchSpanProcessor``'s queue (a 10-minute export delay and batches larger than what they
record), print ``ready`` and hang. The test sends SIGTERM. With ``flush_on_sigterm`` (the
default) the handler installed by ``configure()`` exports and commits them, then lets the signal
take its course: the process still dies of SIGTERM (return code -15), a handler of the user's
still runs (after the flush), ``SIG_IGN`` still ignores it. The control run with
``flush_on_sigterm=False`` shows the spans really were only in memory: it loses them all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.receiver import Receiver
from conftest import MemoryExporterPlugin

ROOT = Path(__file__).resolve().parents[1]
ROLLOUTS = 12
SPANS_PER_ROLLOUT = 5  # rollout, agent, tool, LLM call, and a reward span of its own: see AGENT

#: argv: db ("" for none), otlp endpoint ("" for none), mode, flush_on_sigterm (1/0).
#: Modes: "default" (SIG_DFL before configure), "user" (a handler of the user's, installed
#: before configure, prints what was committed when it ran and exits 7 without atexit),
#: "ignore" (SIG_IGN before configure: after the signal it waits until the spans are written,
#: prints "written N" and exits 0 without atexit).
AGENT = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor
    import agent_rl_plugin as arl
    from agent_rl_plugin import tracing

    db, endpoint, mode, flush_on_sigterm = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"

    def written():
        exporter = tracing.STATE.exporters.get("duckdb")
        return None if exporter is None else exporter.stats["spans_written"]

    if mode == "user":
        def on_term(signum, frame):
            print(json.dumps({"user_handler": signum, "written_then": written()}), flush=True)
            os._exit(7)  # no atexit: whatever is in the database was put there by the SIGTERM flush
        signal.signal(signal.SIGTERM, on_term)
    elif mode == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    # Spans stay in the BatchSpanProcessor's queue: nothing is exported for 10 minutes, and a
    # batch (which would wake the exporter early) is larger than everything recorded here.
    arl.configure(db=db or None, otlp_endpoint=endpoint or None, export_delay_ms=600_000,
                  export_batch_size=100_000, max_queue_size=100_000, flush_on_sigterm=flush_on_sigterm)

    finished = []

    class Ids(SpanProcessor):
        def on_end(self, span):
            finished.append([f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"])

    trace.get_tracer_provider().add_span_processor(Ids())

    @arl.trace_tool
    def lookup(key):
        return key[::-1]

    @arl.trace_agent(name="worker")
    def agent(i):
        found = lookup(f"k{i}")
        arl.record_llm_call("tiny", [{"role": "user", "content": found}], "ok", input_tokens=3, output_tokens=1)
        return found

    for i in range(int(os.environ["ROLLOUTS"])):
        with arl.rollout(task_id=f"t{i}", group_id="g"):
            agent(i)
        arl.emit_reward(1.0, name="late", rollout_id=f"r-{i}")  # a span of its own, outside the rollout

    print("ready " + json.dumps({"finished": finished, "written": written(), "pid": os.getpid()}), flush=True)
    if mode == "ignore":
        while written() is None or written() < len(finished):
            time.sleep(0.02)
        print(f"written {written()}", flush=True)
        os._exit(0)
    while True:  # mid-run: hang until killed
        time.sleep(0.5)
    """
)


def start_agent(db: str, endpoint: str, mode: str, flush_on_sigterm: bool = True) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen(
        [sys.executable, "-c", AGENT, db, endpoint, mode, "1" if flush_on_sigterm else "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "ROLLOUTS": str(ROLLOUTS), "AGENT_RL_DB": ""},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("ready "):
        process.kill()
        raise AssertionError(f"agent did not get ready: {line!r} {process.communicate()[1][-3000:]}")
    ready = json.loads(line[len("ready "):])
    assert len(ready["finished"]) == ROLLOUTS * SPANS_PER_ROLLOUT
    assert ready["written"] in (None, 0)  # still queued in the agent's memory
    return process, ready


def stored_ids(db: Path) -> set[tuple[str, str]]:
    if not db.exists():
        return set()
    connection = duckdb.connect(str(db), read_only=True)
    try:
        rows = connection.execute("select trace_id, span_id from spans").fetchall()
        assert connection.execute("select count(*) from rollouts").fetchone()[0] >= ROLLOUTS
    finally:
        connection.close()
    assert len(rows) == len(set(rows))
    return {tuple(row) for row in rows}


def terminate(process: subprocess.Popen) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=60)


# --- the property, in a subprocess ------------------------------------------------------------
def test_sigterm_flushes_finished_spans_into_the_database_and_still_dies_of_sigterm(tmp_path):
    db = tmp_path / "agent.duckdb"
    process, ready = start_agent(str(db), "", "default")
    _, err = terminate(process)
    assert process.returncode == -signal.SIGTERM, err[-3000:]
    assert stored_ids(db) == {tuple(ids) for ids in ready["finished"]}
    assert "Traceback" not in err


def test_sigterm_flushes_over_otlp_to_a_receiver(tmp_path):
    db = tmp_path / "served.duckdb"
    with Receiver(db, port=0, token="", announce=False) as receiver:
        process, ready = start_agent("", receiver.url, "default")
        _, err = terminate(process)
        assert process.returncode == -signal.SIGTERM, err[-3000:]
        accepted = receiver.stats_snapshot()["spans_accepted"]
    # Leaving the block stopped the receiver: everything it acknowledged is written.
    assert accepted == len(ready["finished"])
    assert stored_ids(db) == {tuple(ids) for ids in ready["finished"]}


def test_control_without_the_handler_the_queued_spans_are_lost(tmp_path):
    """Shows the spans above were only in memory: switched off, SIGTERM loses every one."""
    db = tmp_path / "lost.duckdb"
    process, _ = start_agent(str(db), "", "default", flush_on_sigterm=False)
    terminate(process)
    assert process.returncode == -signal.SIGTERM
    assert stored_ids(db) == set()


def test_a_users_sigterm_handler_still_runs_after_the_flush(tmp_path):
    db = tmp_path / "user.duckdb"
    process, ready = start_agent(str(db), "", "user")
    out, err = terminate(process)
    assert process.returncode == 7, err[-3000:]  # the user's handler decided how to exit
    report = json.loads(out.strip().splitlines()[-1])
    assert report == {"user_handler": signal.SIGTERM, "written_then": len(ready["finished"])}
    assert stored_ids(db) == {tuple(ids) for ids in ready["finished"]}


def test_an_ignored_sigterm_is_flushed_and_still_ignored(tmp_path):
    db = tmp_path / "ignored.duckdb"
    process, ready = start_agent(str(db), "", "ignore")
    out, err = terminate(process)
    assert process.returncode == 0, err[-3000:]  # survived the signal, then exited on its own
    assert out.strip().splitlines()[-1] == f"written {len(ready['finished'])}"
    assert stored_ids(db) == {tuple(ids) for ids in ready["finished"]}


# --- installation rules, in this process ------------------------------------------------------
@pytest.fixture
def restore_sigterm():
    original = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, original)


def test_installed_once_chained_and_restored_by_shutdown(plugin_manager, restore_sigterm):
    calls: list[int] = []

    def users(signum, frame):  # noqa: ANN001 - a signal handler
        calls.append(signum)

    signal.signal(signal.SIGTERM, users)
    exporter = InMemorySpanExporter()
    plugin_manager.register(MemoryExporterPlugin(exporter), name="memory-exporter")
    arl.configure(db=None, export_delay_ms=600_000, export_batch_size=10_000)
    assert signal.getsignal(signal.SIGTERM) is tracing._on_sigterm
    arl.configure(db=None, export_delay_ms=600_000, export_batch_size=10_000)  # same settings
    arl.configure(db=None, export_delay_ms=600_000, export_batch_size=20_000)  # new exporters
    assert signal.getsignal(signal.SIGTERM) is tracing._on_sigterm
    assert tracing.STATE.sigterm_previous is users  # never wrapped ourselves

    @arl.trace_agent
    def agent(x):  # noqa: ANN001
        return x + 1

    assert agent(1) == 2
    assert exporter.get_finished_spans() == ()  # still queued
    signal.raise_signal(signal.SIGTERM)
    assert calls == [signal.SIGTERM]  # the user's handler ran ...
    assert len(exporter.get_finished_spans()) == 1  # ... after the span was exported

    arl.shutdown()
    assert signal.getsignal(signal.SIGTERM) is users


def test_switched_off_or_disabled_installs_nothing(plugin_manager, restore_sigterm, monkeypatch):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    monkeypatch.setenv("AGENT_RL_FLUSH_ON_SIGTERM", "0")
    assert RLConfig.from_env().flush_on_sigterm is False
    arl.configure(db=None)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    monkeypatch.delenv("AGENT_RL_FLUSH_ON_SIGTERM")
    arl.configure(db=None)
    assert signal.getsignal(signal.SIGTERM) is tracing._on_sigterm
    arl.configure(db=None, flush_on_sigterm=False)  # switched off again: the previous one is back
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    arl.configure(db=None)
    arl.configure(db=None, enable_rl=False)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_configure_from_another_thread_skips_silently(plugin_manager, restore_sigterm):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    errors: list[BaseException] = []

    def configure() -> None:
        try:
            arl.configure(db=None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=configure)
    thread.start()
    thread.join()
    assert errors == []
    assert tracing.STATE.config is not None  # configured ...
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # ... without touching signals
    arl.shutdown()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_handler_set_after_ours_is_left_in_place_by_shutdown(plugin_manager, restore_sigterm):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    arl.configure(db=None)

    def later(signum, frame):  # noqa: ANN001
        pass

    signal.signal(signal.SIGTERM, later)
    arl.shutdown()
    assert signal.getsignal(signal.SIGTERM) is later


def test_a_flush_that_cannot_finish_is_bounded(plugin_manager, restore_sigterm, monkeypatch):
    """An exporter that hangs cannot keep SIGTERM from acting: the handler gives up after the bound."""
    release = threading.Event()

    class Stuck(SpanExporter):
        def export(self, spans):  # noqa: ANN001
            release.wait(30)
            return SpanExportResult.SUCCESS

    calls: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    plugin_manager.register(MemoryExporterPlugin(Stuck()), name="stuck-exporter")
    monkeypatch.setattr(tracing, "SIGTERM_FLUSH_TIMEOUT_S", 0.5)
    arl.configure(db=None, export_delay_ms=600_000, export_batch_size=10_000)

    @arl.trace_agent
    def agent(x):  # noqa: ANN001
        return x

    try:
        assert agent(3) == 3
        started = time.monotonic()
        signal.raise_signal(signal.SIGTERM)
        assert time.monotonic() - started < 5
        assert calls == [signal.SIGTERM]
    finally:
        release.set()
