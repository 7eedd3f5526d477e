"""Red-team findings on issue 19's fast paths, each pinned by a test that failed before its fix.

* Redaction: the gates that rule out text before any regular expression runs lower-cased with
  ``str.lower()``, but a case-insensitive pattern also matches ``ſ`` as ``s`` and ``ı``/``İ`` as
  ``i``: ``paſſword=...`` reached the store and the wrapped exporter unmasked. A seeded
  differential test compares the fast answer (:meth:`Redactor.cannot_change`, NUL-joined text)
  and the per-string redaction with every pattern run unconditionally.
* Back-pressure: a signal handler that ends a span while the same thread waits for room in a
  full queue waited for a lock it held itself (the agent hung forever); a child forked while a
  thread waited for room inherited that lock held. ``queue_full_wait_s=0`` drops and counts.
* Lazy CLI: a plugin's plain command named like a built-in group (``train``) replaced it in the
  lazy app while the eager app (Typer adds groups after commands) kept the built-in.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from agent_rl_plugin import plugins, tracing
from agent_rl_plugin.config import DEFAULT_REDACTION_PATTERNS, RLConfig
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.redaction import MIN_LENGTH, Redactor, _replacement
from agent_rl_plugin.span_queue import CountingBatchSpanProcessor
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.transform import with_attribute_transform

REPO = Path(__file__).resolve().parents[1]
SECRET = "hunter2hunter2"
#: Secret names written with letters a case-insensitive pattern matches as ASCII ones.
LOOKALIKES = [
    f"pa\u017f\u017fword={SECRET}",  # long s
    f"my \u017fecret: {SECRET}",
    f"pr\u0131vate_key={SECRET}",  # dotless i
    f"author\u0130zation: basic {SECRET}",  # dotted capital I
    f"aw\u017f \u017fecret key is {'Ab1/' * 10}",
]
_FULL = [(re.compile(p), _replacement(re.compile(p))) for p in DEFAULT_REDACTION_PATTERNS]


def full_redaction(text: str) -> str:
    """Every default pattern, in order, with no gate: the slowest, surest answer."""
    if len(text) < MIN_LENGTH:
        return text
    for regex, replacement in _FULL:
        text = regex.sub(replacement, text)
    return text


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalike_letters_in_a_secret_name_are_masked(text: str) -> None:
    redactor = Redactor(DEFAULT_REDACTION_PATTERNS)
    assert full_redaction(text) != text  # the patterns themselves do match it
    assert redactor.redact(text) == full_redaction(text)
    assert not redactor.cannot_change({"a": "task-1234", "b": text})


def test_lookalike_secrets_reach_neither_the_store_nor_the_wrapped_exporter(plugin_manager, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store = with_attribute_transform(DuckDBSpanExporter(db), RLConfig(db_path=None))
    memory = InMemorySpanExporter()
    wrapped = tracing._copy_only_changed(with_attribute_transform(memory, RLConfig(db_path=None)))  # noqa: SLF001
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(store))
    provider.add_span_processor(SimpleSpanProcessor(wrapped))
    tracer = provider.get_tracer("t")
    for i, text in enumerate(LOOKALIKES):
        with tracer.start_as_current_span("call", attributes={"task": "task-1234", "n": i, "detail": text}) as span:
            span.add_event("note", {"detail": text})
    provider.shutdown()
    exported = repr([span.to_json() for span in memory.get_finished_spans()])
    connection = duckdb.connect(str(db), read_only=True)
    try:
        stored = repr(connection.execute("select * from spans").fetchall())
    finally:
        connection.close()
    for seen in (exported, stored):
        assert "task-1234" in seen and SECRET not in seen and "Ab1/Ab1/" not in seen


FRAGMENTS = [
    "sk-", "Ab3dEf6hIj9kLm2nOp5qRs8t", "password", "pa\u017f\u017fword", "\u017fecret", "pr\u0131vate_key",
    "author\u0130zation", "=", ":", " ", "\n", "\t", '"', "'", "\\", "Bearer ", "bearer", "basic ", "eyJ",
    "abcdefghij", ".", "AKIA", "ABCDEFGHIJKLMNOP", "ghp_", "x" * 30, "github_pat_", "xoxb-", "AIza", "A" * 35,
    "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "https://", "user", "@", "host",
    "aws secret key", "Authorization", "dXNlcjpwYXNz", "token", "api_key", "null", "\x00", "\u212a", "\u0131",
    "secret", "_", "-", "key", "pwd", "[", "0123456789/+", "abcdefghijklmnopqrstuvwxyz0123456789/+ABCD",
]  # fmt: skip


def test_the_joined_fast_answer_agrees_with_the_full_redaction() -> None:
    # Seeded and bounded: attribute dicts built from pieces of secrets, names and separators, so
    # secrets sit at string edges and across value boundaries (the fast path joins with NUL).
    redactor = Redactor(DEFAULT_REDACTION_PATTERNS)
    rng = random.Random(1919)
    for _ in range(4000):
        attributes = {
            f"k{i}": "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 9))) for i in range(rng.randint(1, 4))
        }
        for value in attributes.values():
            assert redactor.redact(value) == full_redaction(value), value
        if redactor.cannot_change(attributes):
            assert all(full_redaction(v) == v for v in attributes.values()), attributes


# --- back-pressure -----------------------------------------------------------------------
_STUCK = """
import os, signal, sys, threading, time
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from agent_rl_plugin.span_queue import CountingBatchSpanProcessor

gate = threading.Event()

class Stuck(SpanExporter):
    def export(self, spans):
        gate.wait(20)
        return SpanExportResult.SUCCESS

proc = CountingBatchSpanProcessor(
    Stuck(), max_queue_size=4, max_export_batch_size=1, schedule_delay_millis=1, queue_full_wait_s=WAIT
)
provider = TracerProvider()
provider.add_span_processor(proc)
tracer = provider.get_tracer("t")

def end_one(name):
    with tracer.start_as_current_span(name):
        pass

for _ in range(5):  # one in the stuck export, four in the queue: full
    end_one("fill")
time.sleep(0.05)
"""


def _run(script: str) -> str:
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, cwd=str(REPO))
    except subprocess.TimeoutExpired:
        pytest.fail("the agent hung: a span end never returned")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_a_signal_handler_ending_a_span_while_the_queue_is_full_does_not_hang() -> None:
    script = _STUCK.replace("WAIT", "0.5") + textwrap.dedent(
        """
        signal.signal(signal.SIGALRM, lambda *_: end_one("in the handler"))
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # fires while the next span waits for room
        end_one("waits")
        print("returned", proc.dropped)
        sys.stdout.flush()
        os._exit(0)
        """
    )
    assert _run(script).split() == ["returned", "2"]  # both spans dropped and counted, no hang


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_child_forked_while_a_span_waits_for_room_can_still_end_spans() -> None:
    script = _STUCK.replace("WAIT", "3") + textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running
        waiter = threading.Thread(target=end_one, args=("waits in the parent",))
        waiter.start()
        time.sleep(0.3)  # it now waits for room, holding the processor's lock
        pid = os.fork()
        if pid == 0:
            end_one("child")
            os._exit(0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print("child", os.waitstatus_to_exitcode(status))
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            print("child hung")
        sys.stdout.flush()
        os._exit(0)
        """
    )
    assert _run(script).strip() == "child 0"


def test_no_wait_drops_at_once_and_counts_every_span() -> None:
    gate = threading.Event()
    exported: list[Any] = []

    class Stuck(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            gate.wait(10)
            exported.extend(spans)
            return SpanExportResult.SUCCESS

    proc = CountingBatchSpanProcessor(
        Stuck(), max_queue_size=4, max_export_batch_size=1, schedule_delay_millis=1, queue_full_wait_s=0
    )
    provider = TracerProvider()
    provider.add_span_processor(proc)
    tracer = provider.get_tracer("t")
    started = time.monotonic()
    for _ in range(50):
        with tracer.start_as_current_span("s"):
            pass
    assert time.monotonic() - started < 2  # never waited
    assert proc.dropped > 0 and proc.waited == 0
    gate.set()
    provider.shutdown()
    assert len(exported) + proc.dropped == 50  # every span exported or counted


# --- lazy command line ---------------------------------------------------------------------
class _Shadow:
    @hookimpl
    def agent_rl_register_commands(self, cli: Any) -> None:
        @cli.command("train")
        def fake_train() -> None:
            """SHADOW train."""
            print("SHADOW TRAIN RAN")


def test_a_plugin_command_named_like_a_builtin_group_acts_as_in_the_eager_app(plugin_manager) -> None:
    from agent_rl_plugin.cli.main import build_app

    runner = CliRunner()
    answers: list[list[Any]] = []
    for lazy in (False, True):
        pm = plugins.new_plugin_manager(load_entry_points=False)  # the eager app adds the built-ins to its own
        pm.register(_Shadow(), name="shadow")
        plugins.set_plugin_manager(pm)
        app = build_app(lazy=lazy)
        outputs = [runner.invoke(app, args, prog_name="agent-rl") for args in (["train", "--help"], ["train"])]
        answers.append([(r.exit_code, "SHADOW" in r.output, "kto" in r.output) for r in outputs])
        listing = runner.invoke(app, ["--help"], prog_name="agent-rl").output
        answers[-1].append(sorted(re.findall(r"^│ (\w[\w-]*) ", listing, re.M)))
    assert answers[0] == answers[1]
    assert answers[1][0] == (0, False, True)  # the built-in group, as the eager app has it
