"""The store stands on its own below the receiver (issue 15).

* A process that reads a database an ``agent-rl serve`` holds gets a snapshot through
  ``open_reader()`` without ever importing :mod:`agent_rl_plugin.receiver`: the announcement
  file and the snapshot request belong to the store layer.
* An announcement left by a receiver that died is ignored.
* At exit, the exporter's own handler closes the exporters nobody attached, and leaves those
  ``configure()`` attached (it told them through ``set_upstream_flush``) to ``configure()``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from test_receiver import PB, make_spans, post

from agent_rl_plugin.receiver import Receiver
from agent_rl_plugin.store import exporter as exporter_module
from agent_rl_plugin.store.announcements import find_receiver, info_path, write_info
from agent_rl_plugin.store.exporter import DuckDBSpanExporter

ROOT = Path(__file__).resolve().parent.parent

READER = """
import json, sys
from agent_rl_plugin.store import open_reader

connection = open_reader(sys.argv[1])
spans = connection.execute("select count(*) from spans").fetchone()[0]
connection.close()
loaded = sorted(name for name in sys.modules if name.startswith("agent_rl_plugin.receiver"))
print(json.dumps({"spans": spans, "receiver_modules": loaded}))
"""


def test_a_reader_that_never_imports_the_receiver_reads_a_served_file(plugin_manager, tmp_path):
    token = "a-token-of-this-test"
    with Receiver(tmp_path / "served.duckdb", port=0, token=token, linger_s=0.01) as receiver:
        body = encode_spans(make_spans(2, "a")).SerializeToString()
        status, _, answer = post(receiver.url + "/v1/traces", body, {**PB, "Authorization": f"Bearer {token}"})
        assert status == 200, answer
        receiver.sink.flush()

        reader = subprocess.run(
            [sys.executable, "-c", READER, str(receiver.db)], capture_output=True, text=True, timeout=120, cwd=ROOT,
        )

    assert reader.returncode == 0, reader.stderr[-2000:]
    assert json.loads(reader.stdout) == {"spans": 4, "receiver_modules": []}


def test_an_announcement_of_a_dead_receiver_is_ignored(tmp_path):
    db = str(tmp_path / "gone.duckdb")
    write_info(db, "127.0.0.1", 4318, None)
    assert find_receiver(db)["pid"] == os.getpid()

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    announcement = json.loads(Path(info_path(db)).read_text())
    Path(info_path(db)).write_text(json.dumps({**announcement, "pid": int(dead.stdout)}))
    assert find_receiver(db) is None


def test_exit_closes_unattached_exporters_and_leaves_attached_ones_to_configure(tmp_path):
    mine = DuckDBSpanExporter(tmp_path / "mine.duckdb", normalizers=[])
    attached = DuckDBSpanExporter(tmp_path / "attached.duckdb", normalizers=[])
    attached.set_upstream_flush(lambda timeout_millis: True)  # what configure() does on attach
    try:
        exporter_module._shutdown_at_exit()
        assert mine._shutdown
        assert not attached._shutdown
    finally:
        attached.shutdown()
        mine.shutdown()
