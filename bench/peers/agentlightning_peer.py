"""Row ``peers_agentlightning``: Agent Lightning 0.3.0 (the newest that installs on Python 3.11;
1.x needs 3.12) for both comparisons, in the same run.

* decorator + store: ``@trace_agent`` + DuckDB against ``@agl.operation`` inside
  ``OtelTracer.trace_context`` of one rollout of an ``InMemoryLightningStore`` (0.3.0 has no
  file store: its SQLite store is an empty module, MongoDB needs a server), fresh interpreters,
  rounds interleaved (``bench/peers/decorator_worker.py``);
* receiver: ``agent-rl serve``'s receiver against ``LightningStoreServer``'s OTLP/HTTP endpoint
  (``bench/peers/agl_server.py``), the same 4 exporting processes
  (:mod:`bench.peers.otlp_load`; their spans carry the rollout and attempt ids as resource
  attributes, which Agent Lightning needs and ours ignores), clock until the store's statistics
  count every span.

    python -m bench --only peers_agentlightning [--quick]
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from typing import Any

from bench.harness import Context, Measure, Row, median, ratio
from bench.peers.common import HERE, PYTHON, PeerRunError, free_port, guarded, ours_env, peer_env, share
from bench.peers.envs import PeerEnv, offline_env
from bench.peers.mlflow_peer import _sample
from bench.peers.otlp_load import LoadResult, otlp_round


def _decorator(ctx: Context, row: Row, env: PeerEnv) -> dict[str, list[dict[str, Any]]]:
    calls, rounds = ctx.size(2000, 300), ctx.size(3, 2)
    folder = ctx.folder("peers_agl_decorator")
    sides = {"ours": (PYTHON, ours_env()), "agentlightning": (str(env.python), offline_env())}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for r in range(rounds):
        for name in list(sides)[r % 2 :] + list(sides)[: r % 2]:
            python, side_env = sides[name]
            db = str(folder / f"{name}-{r}.duckdb")
            if name == "ours":
                out = _sample(python, name, calls, db, side_env, 600)
            else:
                out = guarded(row, "agentlightning decorator", _sample, python, name, calls, db, side_env, 900)
            if out is not None:
                results[name].append(out)
                ctx.log(
                    f"peers_agentlightning: round {r + 1}/{rounds} {name}: "
                    f"{out['loop_s'] / calls * 1e6:,.0f} us/call, {share(out['spans'], out['sent'])}"
                )
    row.sizes.update(calls=calls, rounds=rounds)
    return results


class AglServer:
    """``agl_server.py`` in a subprocess of the peer environment (stops when its stdin closes)."""

    def __init__(self, env: PeerEnv) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(env.python), str(HERE / "agl_server.py"), "--port", str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=offline_env(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("{"):
            self.stop()
            tail = " | ".join((self.proc.stderr.read() if self.proc.stderr else "").strip().splitlines()[-8:])
            raise PeerRunError(
                f"Agent Lightning's store server did not start: {tail}",
                hint="run bench/peers/agl_server.py with the peer environment's python",
            )
        self.info = json.loads(line)
        self.url = self.info["url"]
        self.resource = (
            f"agentlightning.rollout_id={self.info['rollout_id']},agentlightning.attempt_id={self.info['attempt_id']}"
        )

    def count(self) -> int:
        with urllib.request.urlopen(self.url + "/v1/agl/statistics", timeout=60) as response:
            return int(json.loads(response.read())["total_spans"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(30)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait(30)


def _receiver(ctx: Context, row: Row, env: PeerEnv) -> dict[str, list[LoadResult]]:
    from agent_rl_plugin.receiver import Receiver

    processes, n, rounds = 4, ctx.size(2_500, 500), ctx.size(2, 1)
    deadline_s = ctx.size(900, 300)
    row.sizes.update(receiver_processes=processes, receiver_spans_per_process=n, receiver_rounds=rounds)
    results: dict[str, list[LoadResult]] = {"ours": [], "agentlightning": []}
    receiver = Receiver(
        str(ctx.folder("peers_agl_receiver") / "served.duckdb"), port=0, token="", announce=False
    ).start()
    try:
        server = AglServer(env)
    except PeerRunError as exc:
        row.notes.append(f"receiver: {exc}")
        receiver.stop()
        return results

    def ours_count() -> int:
        cursor = receiver.sink.cursor()
        try:
            found = cursor.execute("select count(*) from spans").fetchone()
            return int(found[0]) if found else 0
        finally:
            cursor.close()

    try:
        otlp_round(receiver.url, ours_count, 1, 100, wait=receiver.sink.flush, resource=server.resource)  # warm-ups,
        otlp_round(server.url, server.count, 1, 100, poll_s=0.2, resource=server.resource)  # not timed
        for r in range(rounds):
            for name in ["ours", "agentlightning"] if r % 2 == 0 else ["agentlightning", "ours"]:
                if name == "ours":
                    result = otlp_round(
                        receiver.url,
                        ours_count,
                        processes,
                        n,
                        deadline_s=deadline_s,
                        wait=receiver.sink.flush,
                        resource=server.resource,
                    )
                else:
                    result = otlp_round(
                        server.url,
                        server.count,
                        processes,
                        n,
                        deadline_s=deadline_s,
                        poll_s=0.2,
                        resource=server.resource,
                    )
                results[name].append(result)
                ctx.log(
                    f"peers_agentlightning: receiver round {r + 1}/{rounds} {name}: {result.rate:,.0f} spans/s "
                    f"until stored, {share(result.stored, result.sent)}"
                )
    finally:
        server.stop()
        stats = receiver.stop()
    row.info["receiver_dropped"] = stats["spans_dropped"]
    return results


def run_peers_agentlightning(ctx: Context) -> Row:
    row = Row(id="peers_agentlightning")
    env = peer_env("agentlightning", ctx, row)
    if row.skipped:
        return row
    version = env.version
    dec = _decorator(ctx, row, env)
    rec = _receiver(ctx, row, env)
    ours, peer = dec["ours"], dec["agentlightning"]
    row.value = Measure(
        "@trace_agent + DuckDB, per call",
        "us",
        [o["loop_s"] / o["calls"] * 1e6 for o in ours],
        note=share(sum(o["spans"] for o in ours), sum(o["sent"] for o in ours)),
    )
    peer_sent, peer_spans = sum(o["sent"] for o in peer), sum(o["spans"] or 0 for o in peer)
    row.baselines.append(
        Measure(
            f"Agent Lightning {version} @agl.operation + in-memory store: "
            f"{share(peer_spans, peer_sent) if peer else 'failed'}",
            "us",
            [o["loop_s"] / o["calls"] * 1e6 for o in peer],
        )
    )
    row.ratios["Agent Lightning / ours (per call)"] = ratio(row.baselines[0].median, row.value.median)
    rec_ours, rec_peer = rec["ours"], rec["agentlightning"]
    row.baselines.append(
        Measure(
            "receiver: agent-rl serve, until committed",
            "spans/s",
            [x.rate for x in rec_ours],
            note=share(sum(x.stored for x in rec_ours), sum(x.sent for x in rec_ours)),
        )
    )
    sent, stored = sum(x.sent for x in rec_peer), sum(x.stored for x in rec_peer)
    row.baselines.append(
        Measure(
            f"receiver: Agent Lightning {version} store server, until stored: "
            f"{share(stored, sent) if rec_peer else 'failed'}",
            "spans/s",
            [x.rate for x in rec_peer],
        )
    )
    row.ratios["receiver: ours / Agent Lightning"] = ratio(row.baselines[1].median, row.baselines[2].median)
    row.info.update(
        peer_version=version,
        peer_setting=peer[0]["setting"] if peer else None,
        agl_decorator_sent=peer_sent,
        agl_decorator_spans=peer_spans,
        agl_receiver_sent=sent,
        agl_receiver_stored=stored,
        agl_receiver_failed=sum(x.failed for x in rec_peer),
        agl_receiver_acknowledged_spans_per_s=median([x.ack_rate for x in rec_peer]),
        ours_until_stored_us=median([o["stored_s"] / o["calls"] * 1e6 for o in ours]),
    )
    row.check(
        f"ours (decorator): every call stored ({sum(o['sent'] for o in ours):,})",
        all(o["persisted"] == o["sent"] and o["spans"] == o["sent"] for o in ours),
        "; ".join(f"{o['spans']} of {o['sent']}" for o in ours),
    )
    if rec_ours:
        row.check(
            f"ours (receiver): zero loss ({sum(x.sent for x in rec_ours):,})",
            all(x.stored == x.sent and x.failed == 0 for x in rec_ours) and row.info["receiver_dropped"] == 0,
            "; ".join(f"{x.stored} of {x.sent}, {x.failed} failed" for x in rec_ours),
        )
    return row
