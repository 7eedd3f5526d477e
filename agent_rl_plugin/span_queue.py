"""Bounded span queues that slow the agent down rather than lose spans (back-pressure).

Contract:

* :class:`CountingBatchSpanProcessor` is OpenTelemetry's ``BatchSpanProcessor`` whose full
  queue makes the thread ending a span wait for room for as long as the exporter makes
  progress; it drops (and counts) a span only when told not to wait
  (``queue_full_wait_s=0``) or when the exporter made no progress for ``queue_full_wait_s``.
* :class:`BackPressureExporter` sits between that processor and an exporter that says how many
  spans it still holds (:func:`pending_probe`): the export thread waits while more than
  ``max_pending`` are held, so the spans wait in the queue (bounded) and not in the exporter.
* Memory stays flat however fast the agent produces spans: at most ``max_queue_size`` finished
  spans in the queue, one batch in the export thread, and ``max_pending`` in the exporter.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

logger = logging.getLogger("agent_rl_plugin.tracing")


#: The sampled bit of a span's trace flags (W3C trace context).
TRACE_FLAG_SAMPLED = 0x01
_get_ident = threading.get_ident

#: How long a span waits for room while the exporter is known to be stalled.
STALLED_LOOK_S = 0.001


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """OpenTelemetry's batch processor with back-pressure and a drop count.

    When its queue is full, the thread ending a span wakes the export thread and waits for
    room (the SDK would drop the oldest queued span at once, with only a warning per span). It
    waits as long as the exporter makes progress: only when the queue has not shrunk for
    ``queue_full_wait_s`` (a stalled exporter) is the span dropped, counted in :attr:`dropped`
    (summed by :func:`agent_rl_plugin.tracing.dropped_spans`) and the first drop logged once as an error with the fix.
    After such a drop the processor counts as stalled: until the queue has room again, a span that
    finds it full only looks once more after ``STALLED_LOOK_S`` (1 ms) and is then dropped, so a
    dead exporter costs the agent one long wait, not one per span. ``queue_full_wait_s=0`` drops at once, as the SDK does. Spans ended
    while the export thread itself is exporting never wait. :attr:`waited` counts the spans
    that had to wait."""

    def __init__(self, *args: Any, queue_full_wait_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dropped = 0
        self.waited = 0
        self.queue_full_wait_s = max(0.0, float(queue_full_wait_s))
        self._stalled = False
        # Checking for room and queueing happen under this lock: two threads
        # that both saw one free slot would otherwise both append, and the SDK's queue (a deque
        # with a maximum length) would silently push out the oldest span. Re-entrant: a signal
        # handler that ends a span while this thread waits for room (holding the lock) would
        # otherwise wait for itself forever.
        self._full_lock = threading.RLock()
        inner = getattr(self, "_batch_processor", None)
        known = all(hasattr(inner, name) for name in ("_queue", "_max_queue_size", "emit"))
        self._inner = inner if known else None  # the SDK's BatchProcessor, when its internals are known
        if hasattr(os, "register_at_fork"):  # a child forked while a thread held the lock gets a free one
            weak_reinit = weakref.WeakMethod(self._reinit_lock_after_fork)

            def _after_in_child() -> None:
                reinit = weak_reinit()
                if reinit is not None:
                    reinit()

            os.register_at_fork(after_in_child=_after_in_child)

    def _reinit_lock_after_fork(self) -> None:
        self._full_lock = threading.RLock()
        self._stalled = False

    def on_end(self, span: ReadableSpan) -> None:
        inner = self._inner
        if inner is None:  # an SDK whose internals differ: its own behaviour
            super().on_end(span)
            return
        queue, limit, emit = inner._queue, inner._max_queue_size, inner.emit  # noqa: SLF001
        # What BatchSpanProcessor.on_end does (1.34 to 1.45): unsampled spans are never queued,
        # the others go to its BatchProcessor's emit, called directly here.
        context = span.context
        if context is None or not context.trace_flags & TRACE_FLAG_SAMPLED:
            return
        worker = getattr(inner, "_worker_thread", None)
        if worker is not None and _get_ident() == worker.ident:
            # A span ended while exporting: the export thread cannot wait for itself, nor for a
            # thread that holds the lock while it waits for the export thread.
            if not self._full_lock.acquire(blocking=False):
                self._count_drop(limit)
                return
            try:
                if len(queue) >= limit:
                    self._count_drop(limit)
                    return
                emit(span)
            finally:
                self._full_lock.release()
            return
        # Checking for room and queueing always happen under the lock: a thread that saw room and
        # was then descheduled while others filled the queue would otherwise append to a full
        # deque, which silently pushes out its oldest span (seen: 1 of 100,000 spans lost).
        with self._full_lock:
            if len(queue) >= limit and not self._wait_for_room(inner, queue, limit):
                self._count_drop(limit)
                return
            self._stalled = False
            emit(span)

    def _count_drop(self, limit: int) -> None:
        self.dropped += 1
        if self.dropped == 1:
            logger.error(
                "agent-rl: the span queue is full (max_queue_size=%d) and its exporter made no "
                "progress for %.1f s: spans are being dropped [fix: check the exporter (disk, "
                "endpoint), or raise queue_full_wait_ms; count: agent_rl_plugin.tracing.dropped_spans()]",
                limit,
                self.queue_full_wait_s,
            )

    def _wait_for_room(self, inner: Any, queue: Any, limit: int) -> bool:
        """Wait until the queue has room (``True``), or give up (``False``): at once when waiting
        is off or the exporter is known stalled, else after ``queue_full_wait_s`` without room
        (the export thread takes a whole batch at a time, so any progress makes room)."""
        if self.queue_full_wait_s <= 0:
            return False
        if self._stalled:  # one short look (the export thread gets the GIL meanwhile), no long wait
            awaken = getattr(inner, "_worker_awaken", None)
            if awaken is not None:
                awaken.set()
            time.sleep(STALLED_LOOK_S)
            return len(queue) < limit
        self.waited += 1
        awaken = getattr(inner, "_worker_awaken", None)
        deadline = time.monotonic() + self.queue_full_wait_s
        while len(queue) >= limit:
            if awaken is not None:
                awaken.set()
            if getattr(inner, "_shutdown", False):
                return False
            if time.monotonic() >= deadline:
                self._stalled = True
                return False
            time.sleep(0.001)
        return True


def pending_probe(exporter: SpanExporter) -> Callable[[], int] | None:
    """A function giving the spans ``exporter`` has accepted but not written yet, when it says
    (a ``stats`` mapping with ``pending``, as :class:`~agent_rl_plugin.store.exporter.DuckDBSpanExporter`
    has); ``None`` otherwise."""
    try:
        stats = getattr(exporter, "stats", None)
    except Exception:
        return None
    if not isinstance(stats, dict) or not isinstance(stats.get("pending"), int):
        return None

    def pending() -> int:
        return int(exporter.stats["pending"])  # type: ignore[attr-defined]

    return pending


class BackPressureExporter(SpanExporter):
    """Forwards to an exporter, with back-pressure behind the queue: when ``pending`` (see :func:`pending_probe`) says more than
    ``max_pending`` spans handed over earlier still wait to be written, :meth:`export` (the batch
    processor's thread) waits until they drop below it, so spans wait in one bounded place
    rather than piling up in the exporter; its queue then fills and the agent waits
    (:class:`CountingBatchSpanProcessor`). It stops waiting when the count has not gone down for
    ``stall_s`` (the exporter then keeps or drops the spans by its own rules, and counts them)."""

    def __init__(
        self,
        inner: SpanExporter,
        pending: Callable[[], int] | None = None,
        max_pending: int = 0,
        stall_s: float = 0.0,
    ) -> None:
        self.inner = inner
        self._pending = pending
        self.max_pending = max_pending
        self.stall_s = stall_s
        self.waited = 0

    def export(self, spans):  # type: ignore[no-untyped-def]
        if self._pending is not None and self.stall_s > 0:
            self._wait_for_writer(len(spans))
        return self.inner.export(spans)

    def _wait_for_writer(self, n: int) -> None:
        assert self._pending is not None
        try:
            pending = self._pending()
            if pending == 0 or pending + n <= self.max_pending:
                return
            self.waited += 1
            lowest = pending
            deadline = time.monotonic() + self.stall_s
            while pending > 0 and pending + n > self.max_pending:
                if pending < lowest:  # the writer is making progress: keep waiting
                    lowest = pending
                    deadline = time.monotonic() + self.stall_s
                elif time.monotonic() >= deadline:
                    return
                time.sleep(0.002)
                pending = self._pending()
        except Exception:  # never let a probe stop the export
            logger.debug("agent-rl: could not read the exporter's pending spans", exc_info=True)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.inner.shutdown()
