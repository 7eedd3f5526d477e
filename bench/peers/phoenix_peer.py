"""Row ``peers_phoenix``: ``agent-rl serve``'s receiver against Arize Phoenix's OTLP receiver
(``phoenix serve`` with its default SQLite store), in the same run.

The load is the same for both (:mod:`bench.peers.otlp_load`): 4 processes of the bench's
interpreter export with the OTel SDK's ``OTLPSpanExporter`` (http/protobuf, batches of 512);
the clock runs from the start signal until the receiver's store holds every span sent
(Phoenix acknowledges requests before it writes them, so its SQLite file is polled until all
rows are there; ours is counted through the writer's connection after a flush). Rounds
alternate between the two servers, both started once before the first round (their start-up
is not timed). Phoenix runs in its own environment with telemetry off and no network.

    python -m bench --only peers_phoenix [--quick]
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from bench.harness import Context, Measure, Row, median, ratio
from bench.peers.common import PeerRunError, free_port, peer_env, share
from bench.peers.envs import offline_env
from bench.peers.otlp_load import LoadResult, otlp_round


class PhoenixServer:
    """``phoenix serve`` in a subprocess of the peer environment, on free ports, its working
    directory (and so its SQLite file) in ``folder``."""

    def __init__(self, python: Path, folder: Path) -> None:
        self.python, self.folder = python, folder
        self.port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = folder / "phoenix.db"
        self.log_path = folder / "phoenix.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 300) -> PhoenixServer:
        env = offline_env(
            {
                "PHOENIX_WORKING_DIR": str(self.folder),
                "PHOENIX_PORT": str(self.port),
                "PHOENIX_GRPC_PORT": str(self.grpc_port),
                "PHOENIX_HOST": "127.0.0.1",
            }
        )
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(self.python), "-m", "phoenix.server.main", "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.folder),
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PeerRunError(
                    f"phoenix serve exited with status {self.proc.returncode}: {self.log_tail()}",
                    hint=f"see {self.log_path}",
                )
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as response:
                    if response.status == 200 and self.count() is not None:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise PeerRunError(
            f"phoenix serve did not answer within {timeout_s:.0f} s: {self.log_tail()}", hint=f"see {self.log_path}"
        )

    def count(self) -> int | None:
        """Spans in Phoenix's SQLite store (None before its tables exist)."""
        if not self.db.exists():
            return None
        connection = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        try:
            return int(connection.execute("select count(*) from spans").fetchone()[0])
        except sqlite3.Error:
            return None
        finally:
            connection.close()

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def run_peers_phoenix(ctx: Context) -> Row:
    processes = 4
    n = ctx.size(1_000, 250)
    rounds = ctx.size(2, 1)
    deadline_s = ctx.size(900, 300)
    row = Row(
        id="peers_phoenix",
        sizes={
            "processes": processes,
            "spans_per_process_per_round": n,
            "rounds": rounds,
            "batch": 512,
            "deadline_s": deadline_s,
        },
    )
    env = peer_env("phoenix", ctx, row)
    if row.skipped:
        return row
    assert env.python is not None
    from agent_rl_plugin.receiver import Receiver

    folder = ctx.folder("peers_phoenix")
    (folder / "phoenix").mkdir(exist_ok=True)
    receiver = Receiver(str(folder / "served.duckdb"), port=0, token="", announce=False).start()
    phoenix = PhoenixServer(env.python, folder / "phoenix")
    results: dict[str, list[LoadResult]] = {"ours": [], "phoenix": []}
    try:
        try:
            phoenix.start()
        except PeerRunError as exc:
            row.skipped = f"phoenix could not run offline here: {exc}"
            return row

        def ours_count() -> int:
            cursor = receiver.sink.cursor()
            try:
                found = cursor.execute("select count(*) from spans").fetchone()
                return int(found[0]) if found else 0
            finally:
                cursor.close()

        sides: dict[str, tuple[str, Callable[[], int], Any]] = {
            "ours": (receiver.url, ours_count, receiver.sink.flush),
            "phoenix": (phoenix.url, lambda: phoenix.count() or 0, None),
        }
        order = list(sides)
        for url, count, wait in sides.values():  # warm-up, not timed: first connections, tables, caches
            otlp_round(url, count, 1, 100, deadline_s=deadline_s, poll_s=0.2, wait=wait)
        for r in range(rounds):
            for name in order[r % 2 :] + order[: r % 2]:
                url, count, wait = sides[name]
                result = otlp_round(url, count, processes, n, deadline_s=deadline_s, poll_s=0.2, wait=wait)
                results[name].append(result)
                ctx.log(
                    f"peers_phoenix: round {r + 1}/{rounds} {name}: {result.rate:,.0f} spans/s until stored "
                    f"({result.ack_rate:,.0f}/s acknowledged), {share(result.stored, result.sent)}"
                )
    finally:
        phoenix.stop()
        stats = receiver.stop()
    ours, peer = results["ours"], results["phoenix"]
    row.value = Measure(
        "agent-rl serve, until committed",
        "spans/s",
        [x.rate for x in ours],
        note=share(sum(x.stored for x in ours), sum(x.sent for x in ours)),
    )
    sent, stored = sum(x.sent for x in peer), sum(x.stored for x in peer)
    row.baselines.append(
        Measure(f"Phoenix {env.version}, until queryable: {share(stored, sent)}", "spans/s", [x.rate for x in peer])
    )
    row.baselines.append(Measure(f"Phoenix {env.version}, acknowledged", "spans/s", [x.ack_rate for x in peer]))
    row.ratios["ours / Phoenix (until stored)"] = ratio(row.value.median, row.baselines[0].median)
    row.info.update(
        peer_version=env.version,
        ours_acknowledged_spans_per_s=median([x.ack_rate for x in ours]),
        phoenix_sent=sent,
        phoenix_stored=stored,
        phoenix_export_failures=sum(x.failed for x in peer),
        phoenix_stored_per_s_within_deadline=[x.stored / (x.stored_s or deadline_s) for x in peer],
        ours_sent=sum(x.sent for x in ours),
        ours_stored=sum(x.stored for x in ours),
        receiver_dropped=stats["spans_dropped"],
    )
    if stored < sent:
        row.notes.append(f"Phoenix held {stored:,} of {sent:,} spans after {deadline_s} s per round")
    ours_sent = sum(x.sent for x in ours)
    row.check(
        f"ours: zero loss, every span sent is one row ({ours_sent:,})",
        all(x.stored == x.sent and x.failed == 0 for x in ours) and stats["spans_dropped"] == 0,
        "; ".join(f"{x.stored} of {x.sent}, {x.failed} failed" for x in ours),
    )
    return row
