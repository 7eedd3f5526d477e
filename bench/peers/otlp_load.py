"""The load of the receiver rows: 4 processes exporting with the OTel SDK's ``OTLPSpanExporter``
(http/protobuf, batches of 512) into any OTLP/HTTP receiver, clock until the receiver's store
holds every span (``count`` polled), as ``bench/receiver.py`` does for ours.

The exporting processes are the bench's own (the same client for every receiver: only the
receiver differs); each builds its spans before the clock starts (``bench.receiver._worker``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from bench.receiver import _worker


def _worker_with_resource(resource: str, *args: Any) -> None:
    """``bench.receiver._worker`` with ``OTEL_RESOURCE_ATTRIBUTES`` set first (the SDK reads it
    when the spans' ``TracerProvider`` is built), for receivers that file spans by resource."""
    if resource:
        os.environ["OTEL_RESOURCE_ATTRIBUTES"] = resource
    _worker(*args)


@dataclass
class LoadResult:
    """One round: spans sent, export failures, seconds until acknowledged and until stored
    (``None`` when the store never held them all before the deadline), spans finally stored."""

    sent: int
    failed: int
    ack_s: float
    stored_s: float | None
    stored: int

    @property
    def rate(self) -> float:
        """Spans/s until stored (NaN when not all were)."""
        return self.sent / self.stored_s if self.stored_s else float("nan")

    @property
    def ack_rate(self) -> float:
        return self.sent / self.ack_s if self.ack_s else float("nan")


def otlp_round(
    url: str,
    count: Callable[[], int],
    processes: int,
    n: int,
    batch: int = 512,
    deadline_s: float = 600,
    poll_s: float = 0.1,
    wait: Callable[[float], bool] | None = None,
    resource: str = "",
) -> LoadResult:
    """Export ``processes * n`` spans to ``url`` (``.../v1/traces`` is appended) and wait until
    ``count()`` reaches ``before + sent`` (or ``deadline_s`` passes). ``wait(timeout)``, when
    given, is called first once the exporters are done (ours: the sink's flush, which returns
    when everything is committed) before counting. ``resource``: ``OTEL_RESOURCE_ATTRIBUTES`` of
    the exporting processes (``k=v,k2=v2``; none by default)."""
    before = count()
    ctx = mp.get_context("spawn")
    ready, done = ctx.Queue(), ctx.Queue()
    starts = [ctx.Event()]
    workers = [
        ctx.Process(target=_worker_with_resource, args=(resource, url, n, 1, batch, ready, starts, done), daemon=True)
        for _ in range(processes)
    ]
    try:
        for worker in workers:
            worker.start()
        for _ in workers:
            ready.get(timeout=600)
        started = time.perf_counter()
        starts[0].set()
        results = [done.get(timeout=deadline_s) for _ in workers]
        ack_s = time.perf_counter() - started
        sent = sum(r[1] for r in results)
        failed = sum(r[2] for r in results)
        if wait is not None:
            wait(deadline_s)
        stored_s: float | None = None
        stored = count() - before
        while stored < sent and time.perf_counter() - started < deadline_s:
            time.sleep(poll_s)
            stored = count() - before
        if stored >= sent:
            stored_s = time.perf_counter() - started
        for worker in workers:
            worker.join(60)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
    return LoadResult(sent=sent, failed=failed, ack_s=ack_s, stored_s=stored_s, stored=stored)
