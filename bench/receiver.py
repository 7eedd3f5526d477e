"""Sustained spans/s from 4 processes through OTLP/HTTP into ``agent-rl serve``'s receiver,
against the same spans through the in-process ``DuckDBSpanExporter``, in the same run.

Each worker process first builds its spans for every round (traces of LLM-call-like spans
with ten attributes, one in ten with an event, as in ``bench/store_ingest.py``), says it is
ready, then per round waits for the start signal and sends that round's spans in requests of
``--batch`` spans (what a ``BatchSpanProcessor`` hands an exporter). Two kinds of sender:

* **replay** (the row's value: what the receiver itself takes): each worker encodes its
  requests with the OTel SDK's own encoder before the clock starts (``encode_spans(...)``, the
  bytes ``OTLPSpanExporter`` posts), then posts them on one keep-alive connection, retrying a
  429/503 (or a dropped connection) with a growing wait, as the SDK does. On a 2-core machine the senders' encoding
  would otherwise take the receiver's CPU: in a deployment the agents run on other hosts.
* **sdk** (a baseline, ``--senders sdk`` alone): ``OTLPSpanExporter.export`` itself, encoding on
  the clock on the same cores as the receiver.

A round's clock runs from the start signal until every span is committed by the receiver.
Between receiver rounds, the in-process baseline exports the same number of spans in this
process (export + flush, a fresh file each time). At the end the served file is counted: zero
loss means every span sent is exactly one row. ``info`` breaks the cost of a span down
(:func:`breakdown`): the receiver's decode, convert and commit CPU time, and the senders' own
CPU time (the SDK's encoding), which bounds the SDK senders' rate on few cores.

    python bench/receiver.py                 # 4 processes x 20000 spans x 3 rounds, both senders
    python bench/receiver.py -n 5000 --rounds 2 --senders replay
    python -m bench --only receiver [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import Context, Measure, Row, median, ratio  # noqa: E402
from bench.store_ingest import make_spans  # noqa: E402


def _worker(url: str, n: int, rounds: int, batch: int, ready: Any, starts: list, done: Any) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    per_round = [make_spans(n) for _ in range(rounds)]
    exporter = OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=60)
    ready.put(os.getpid())
    for r in range(rounds):
        starts[r].wait()
        spans, failed = per_round[r], 0
        started, cpu = time.perf_counter(), time.process_time()
        for k in range(0, len(spans), batch):
            if exporter.export(spans[k : k + batch]) is not SpanExportResult.SUCCESS:
                failed += len(spans[k : k + batch])
        done.put((r, len(spans), failed, time.perf_counter() - started, time.process_time() - cpu))
    exporter.shutdown()
    # Breakdown only, after every round (off the clock, while the parent waits): the CPU time of
    # the exporter's own encoding step (spans -> protobuf bytes) on the first round's spans.
    starts[rounds].wait()
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans, cpu = per_round[0], time.process_time()
    for k in range(0, len(spans), batch):
        encode_spans(spans[k : k + batch]).SerializePartialToString()
    done.put(("encode", len(spans), time.process_time() - cpu))


def _post(connection: Any, body: bytes) -> int:
    """POST one encoded request; the HTTP status (the body read, so the connection is reusable)."""
    connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
    response = connection.getresponse()
    response.read()
    return response.status


def _replay_worker(url: str, n: int, rounds: int, batch: int, ready: Any, starts: list, done: Any) -> None:
    """A sender posting requests encoded before the clock (see the module docstring): the same
    messages as :func:`_worker`, in the same order and sizes."""
    import http.client
    from urllib.parse import urlsplit

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    per_round = [make_spans(n) for _ in range(rounds)]
    cpu = time.process_time()
    bodies = [
        [
            (encode_spans(spans[k : k + batch]).SerializePartialToString(), len(spans[k : k + batch]))
            for k in range(0, len(spans), batch)
        ]
        for spans in per_round
    ]
    encode_cpu = time.process_time() - cpu
    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    ready.put(os.getpid())
    for r in range(rounds):
        starts[r].wait()
        failed = 0
        started, cpu = time.perf_counter(), time.process_time()
        for body, count in bodies[r]:
            for attempt in range(60):  # what the SDK does on 429/503: wait and try again
                try:
                    status = _post(connection, body)
                except (OSError, http.client.HTTPException):
                    connection.close()
                    status = 0
                if status not in (0, 429, 503):
                    break
                time.sleep(min(0.05 * 2**attempt, 1.0))
            failed += 0 if status == 200 else count
        done.put((r, n, failed, time.perf_counter() - started, time.process_time() - cpu))
    connection.close()
    starts[rounds].wait()
    done.put(("encode", n * rounds, encode_cpu))


SENDERS = {"replay": _replay_worker, "sdk": _worker}


def in_process_rate(spans: list, path: Path, batch: int) -> tuple[float, int]:
    """Spans/s through ``DuckDBSpanExporter`` (export + flush) into a fresh file; and drops."""
    from agent_rl_plugin.store import DuckDBSpanExporter

    exporter = DuckDBSpanExporter(path, normalizers=None)
    exporter.export(spans[:1])
    exporter.force_flush()
    started = time.perf_counter()
    for k in range(1, len(spans), batch):
        exporter.export(spans[k : k + batch])
    assert exporter.force_flush(600_000)
    seconds = time.perf_counter() - started
    dropped = exporter.stats["spans_dropped"]
    exporter.shutdown()
    return (len(spans) - 1) / seconds, dropped


def measure(
    folder: Path,
    processes: int,
    n: int,
    rounds: int,
    batch: int,
    log=print,
    senders: str = "replay",
    in_process: bool = True,
    decode_workers: int | None = None,
) -> dict[str, Any]:
    """Receiver rounds (``senders``: ``replay`` or ``sdk``, see the module docstring), each
    followed by an in-process round when ``in_process``; every count needed for zero loss.
    ``decode_workers``: the receiver's (default: ``agent-rl serve``'s default)."""
    from agent_rl_plugin.receiver import Receiver
    from agent_rl_plugin.receiver.workers import default_decode_workers

    if decode_workers is None:
        decode_workers = default_decode_workers()

    path = folder / f"served-{senders}-{decode_workers}-workers.duckdb"
    receiver = Receiver(str(path), port=0, token="", announce=False, decode_workers=decode_workers).start()
    ctx = mp.get_context("spawn")
    ready, done = ctx.Queue(), ctx.Queue()
    starts = [ctx.Event() for _ in range(rounds + 1)]  # the last: measure the senders' encoding
    workers = [
        ctx.Process(target=SENDERS[senders], args=(receiver.url, n, rounds, batch, ready, starts, done), daemon=True)
        for _ in range(processes)
    ]
    out: dict[str, Any] = {
        "receiver": [],
        "ack": [],
        "in_process": [],
        "sent": 0,
        "failed": 0,
        "local_dropped": 0,
        "sender_cpu_s": 0.0,
        "receiver_cpu_s": 0.0,
        "wall_s": 0.0,
        "encoded": 0,
        "encode_cpu_s": 0.0,
        "decode_workers": receiver.pool.workers if receiver.pool is not None else 0,
    }
    try:
        for worker in workers:
            worker.start()
        local_spans = make_spans(processes * n + 1) if in_process else []
        for _ in workers:
            ready.get(timeout=600)
        for r in range(rounds):
            started, cpu = time.perf_counter(), _receiver_cpu_s(receiver)
            starts[r].set()
            results = [done.get(timeout=600) for _ in workers]
            acknowledged = time.perf_counter()
            assert receiver.sink.flush(600)
            seconds = time.perf_counter() - started
            out["receiver_cpu_s"] += _receiver_cpu_s(receiver) - cpu
            out["sender_cpu_s"] += sum(x[4] for x in results)
            out["wall_s"] += seconds
            sent = sum(x[1] for x in results)
            out["sent"] += sent
            out["failed"] += sum(x[2] for x in results)
            out["receiver"].append(sent / seconds)
            out["ack"].append(sent / (acknowledged - started))
            if not in_process:
                log(f"receiver ({senders} senders): round {r + 1}/{rounds}: {out['receiver'][-1]:,.0f} spans/s")
                continue
            rate, dropped = in_process_rate(local_spans, folder / f"local-{r}.duckdb", batch)
            (folder / f"local-{r}.duckdb").unlink()
            out["in_process"].append(rate)
            out["local_dropped"] += dropped
            log(
                f"receiver ({senders} senders): round {r + 1}/{rounds}: {out['receiver'][-1]:,.0f} spans/s; "
                f"in-process {rate:,.0f}"
            )
        starts[rounds].set()
        for _ in workers:
            _, encoded, encode_cpu = done.get(timeout=600)
            out["encoded"] += encoded
            out["encode_cpu_s"] += encode_cpu
        for worker in workers:
            worker.join(60)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        stats = receiver.stop()
    connection = duckdb.connect(str(path), read_only=True)
    counted = connection.execute("select count(*), count(distinct (trace_id, span_id)) from spans").fetchone()
    assert counted is not None  # an aggregate returns one row
    rows, distinct = counted
    connection.close()
    out.update(
        rows=rows,
        distinct=distinct,
        batches_refused=stats["batches_rejected"],
        dropped=stats["spans_dropped"],
        exit_codes=[w.exitcode for w in workers],
        batches_delayed=stats["batches_delayed"],
        breakdown=breakdown(out, stats),
    )
    return out


def _receiver_cpu_s(receiver: Any) -> float:
    """CPU seconds of the receiver: this process's threads and its decode workers (from /proc)."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in receiver.pool.pids if receiver.pool is not None else ():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def breakdown(out: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """Where a span's time goes, per span over every round, in CPU time (robust to other load on
    the machine): decoding (body -> span fields) and converting (-> rows), in the receiver's
    decode workers or its request threads, and committing (the writer thread's inserts); the
    senders' processes (the SDK's encoding and HTTP) and the receiver's whole (its process and
    its decode workers). ``receiver_other_us_per_span``: the receiver's CPU outside those three
    timers (HTTP parsing and answering, handing bodies to the workers and their rows back, the
    writer's queue, the workers' start). ``sender_encode_us_per_span``: the SDK's
    encoding step alone (``encode_spans(...).SerializePartialToString()``, what
    ``OTLPSpanExporter.export`` does before posting), timed in each sender after the rounds.
    ``cpu_busy``: the share of all cores those used during the rounds (below 1: other work on
    the machine, or idle waits); ``cpu_ceiling_spans_per_s``: the rate the cores allow at that
    cost if all were busy with it, ``senders_alone_ceiling_spans_per_s`` the same for the
    senders alone (a receiver costing nothing: the clock includes the SDK's encoding in the 4
    processes) and ``senders_encode_ceiling_spans_per_s`` for their encoding step alone."""
    sent = max(out["sent"], 1)
    sender, receiver = out["sender_cpu_s"] / sent, out["receiver_cpu_s"] / sent
    cpus = os.cpu_count() or 1
    encode = out["encode_cpu_s"] / out["encoded"] if out["encoded"] else 0.0
    timed = stats["decode_s"] + stats["convert_s"] + stats["commit_s"]
    return {
        "decode_us_per_span": round(stats["decode_s"] / sent * 1e6, 2),
        "convert_us_per_span": round(stats["convert_s"] / sent * 1e6, 2),
        "commit_us_per_span": round(stats["commit_s"] / sent * 1e6, 2),
        "sender_cpu_us_per_span": round(sender * 1e6, 2),
        "receiver_cpu_us_per_span": round(receiver * 1e6, 2),
        "receiver_other_us_per_span": round((out["receiver_cpu_s"] - timed) / sent * 1e6, 2),
        "sender_encode_us_per_span": round(encode * 1e6, 2),
        "cpu_busy": round((out["sender_cpu_s"] + out["receiver_cpu_s"]) / max(out["wall_s"] * cpus, 1e-9), 3),
        "cpu_ceiling_spans_per_s": round(cpus / (sender + receiver)) if sender + receiver else None,
        "senders_alone_ceiling_spans_per_s": round(cpus / sender) if sender else None,
        "senders_encode_ceiling_spans_per_s": round(cpus / encode) if encode else None,
    }


def _lost(out: dict[str, Any]) -> int:
    return out["sent"] - out["distinct"]


def _zero_loss(out: dict[str, Any]) -> bool:
    return _lost(out) == 0 and out["rows"] == out["sent"] and out["failed"] == 0 and out["dropped"] == 0


def _loss_detail(out: dict[str, Any]) -> str:
    return f"rows {out['rows']}, distinct {out['distinct']}, export failures {out['failed']}, dropped {out['dropped']}"


def run(ctx: Context) -> Row:
    processes = 4
    n = ctx.size(20_000, 2_500)
    rounds = ctx.size(3, 2)
    batch = 512
    row = Row(
        id="receiver",
        sizes={"processes": processes, "spans_per_process_per_round": n, "rounds": rounds, "batch": batch},
    )
    ctx.log(f"receiver: {processes} processes x {n:,} spans x {rounds} rounds (building spans first)")
    out = measure(ctx.folder("receiver"), processes, n, rounds, batch, log=ctx.log, senders="replay")
    alone = measure(
        ctx.folder("receiver"),
        processes,
        n,
        rounds,
        batch,
        log=ctx.log,
        senders="replay",
        in_process=False,
        decode_workers=0,
    )
    sdk = measure(ctx.folder("receiver"), processes, n, rounds, batch, log=ctx.log, senders="sdk", in_process=False)
    workers = out["decode_workers"]
    row.value = Measure(
        f"OTLP/HTTP from 4 processes (requests encoded before the clock), {workers} decode workers",
        "spans/s",
        out["receiver"],
    )
    row.baselines.append(Measure("in-process exporter, same spans", "spans/s", out["in_process"]))
    row.baselines.append(
        Measure("the same, decoding in the receiver's process (--decode-workers 0)", "spans/s", alone["receiver"])
    )
    row.baselines.append(
        Measure("OTLP/HTTP from 4 processes encoding with the OTel SDK on the same cores", "spans/s", sdk["receiver"])
    )
    row.ratios["receiver / in-process"] = ratio(row.value.median, row.baselines[0].median)
    row.ratios["decode workers / none"] = ratio(row.value.median, row.baselines[1].median)
    row.ratios["SDK senders / encoded before the clock"] = ratio(row.baselines[2].median, row.value.median)
    row.target("spans/s", row.value.median, ">=", 40_000)
    row.check(f"zero loss: every span sent is one row ({out['sent']:,})", _zero_loss(out), _loss_detail(out))
    row.check(f"zero loss without decode workers ({alone['sent']:,})", _zero_loss(alone), _loss_detail(alone))
    row.check(f"zero loss with the SDK's senders ({sdk['sent']:,})", _zero_loss(sdk), _loss_detail(sdk))
    row.check("the in-process baseline dropped nothing", out["local_dropped"] == 0, f"{out['local_dropped']} dropped")
    row.info.update(
        acknowledged_spans_per_s=median(out["ack"]),
        batches_refused=out["batches_refused"],
        sent=out["sent"],
        rows=out["rows"],
        worker_exit_codes=out["exit_codes"] + alone["exit_codes"] + sdk["exit_codes"],
        batches_delayed=out["batches_delayed"],
        decode_workers=workers,
        **out["breakdown"],
    )
    row.info.update({f"no_workers_{key}": value for key, value in alone["breakdown"].items()})
    row.info["no_workers_acknowledged_spans_per_s"] = median(alone["ack"])
    row.info.update({f"sdk_senders_{key}": value for key, value in sdk["breakdown"].items()})
    return row


def _report(out: dict[str, Any], senders: str, processes: int) -> None:
    print(
        f"receiver ({senders} senders): {out['sent']} spans from {processes} processes, rows {out['rows']} "
        f"(distinct {out['distinct']}), lost {_lost(out)}, export failures {out['failed']}, "
        f"refused {out['batches_refused']}, dropped {out['dropped']}"
    )
    local = f"; in-process exporter: median {median(out['in_process']):,.0f} spans/s" if out["in_process"] else ""
    print(
        f"receiver ({senders} senders): median {median(out['receiver']):,.0f} spans/s committed "
        f"({median(out['ack']):,.0f} acknowledged){local}; {out['decode_workers']} decode workers; {os.cpu_count()} CPUs"
    )
    print(f"receiver ({senders} senders): breakdown " + ", ".join(f"{k} {v}" for k, v in out["breakdown"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20_000, help="spans per process per round (default 20000)")
    parser.add_argument("--processes", type=int, default=4, help="exporting processes (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--batch", type=int, default=512, help="spans per export request (default 512)")
    parser.add_argument(
        "--senders", choices=("both", *SENDERS), default="both", help="which senders (default both; see above)"
    )
    parser.add_argument(
        "--decode-workers", type=int, default=None, help="the receiver's decode workers (default: agent-rl serve's)"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-bench-receiver-"))
    kinds = list(SENDERS) if args.senders == "both" else [args.senders]
    bad = []
    try:
        for senders in kinds:
            out = measure(
                folder,
                args.processes,
                args.n,
                args.rounds,
                args.batch,
                senders=senders,
                in_process=senders == "replay",
                decode_workers=args.decode_workers,
            )
            _report(out, senders, args.processes)
            if not _zero_loss(out):
                bad.append(senders)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if bad:
        raise SystemExit(f"spans were lost or duplicated ({', '.join(bad)} senders)")


if __name__ == "__main__":
    main()
