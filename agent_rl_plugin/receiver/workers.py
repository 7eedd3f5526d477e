"""Decode workers: child processes that turn OTLP request bodies into rows for the receiver.

One Python process decodes and converts about 45k spans a second at most (~22 µs a span, one
thread at a time under the GIL), and while its request threads do that, the writer's DuckDB
inserts wait for the GIL too. :class:`DecodePool` moves that work into ``workers`` child
processes: a request thread hands the body over a pipe and gets back the converted
:class:`~agent_rl_plugin.store.rows.SpanBatch` (as Arrow IPC), then queues it as before.

Contract:

* Each worker builds its converter with
  :func:`~agent_rl_plugin.receiver.conversion.receiver_converter` (the ``AGENT_RL_*`` config of the
  environment it inherits, the plugins installed) and, when it starts, sends its
  :func:`~agent_rl_plugin.receiver.conversion.converter_fingerprint`. :meth:`DecodePool.start` refuses
  the pool (returns a reason, starts nothing) unless every worker's fingerprint equals the
  receiver's own converter's: a plugin registered only in the parent process, or anything else
  that would store a span differently (weaker redaction), keeps decoding in the receiver's
  process. It also refuses where children cannot run (:func:`~agent_rl_plugin.store.child_process.children_supported`).
* :meth:`DecodePool.decode` returns a :class:`Decoded` or raises what the in-process decoding
  raises for the body (:class:`~agent_rl_plugin.receiver.decode.BodyTooLarge`,
  :class:`~agent_rl_plugin.receiver.decode.DecodeError`), or :class:`WorkerUnavailable` when no
  worker answered (it died, hung past ``reply_timeout_s`` or could not be started): the worker
  is stopped and replaced, nothing of the body was queued, and the sender should retry (the
  receiver answers 503). A body that crashes a worker crashes only that worker; the same body
  failing a worker again (an exporter retrying it) raises ``DecodeError`` (a 400, not retried).
* Workers decode one body at a time each; a request waits for a free worker. Conversion
  problems a worker reports (``on_error`` of its converter) come back in
  :attr:`Decoded.reports` for the receiver's counters and log.
* Workers ignore Ctrl+C (the terminal's process group: the receiver decides) and exit when their
  input closes; :meth:`DecodePool.close` closes it and kills a worker that does not end.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
import os
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa

try:
    import fcntl
except ImportError:  # not POSIX: no workers there (children_supported), only the module is loaded
    fcntl = None  # type: ignore[assignment]

from agent_rl_plugin.arrow_memory import child_environment
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.receiver.conversion import converter_fingerprint, receiver_converter
from agent_rl_plugin.receiver.decode import BodyTooLarge, DecodeError, decode_body, fields_from_request
from agent_rl_plugin.store.child_process import child_argv, children_supported, reply_channel
from agent_rl_plugin.store.rows import SpanBatch, SpanConverter

logger = logging.getLogger("agent_rl_plugin.receiver")

#: Longest a worker may take to start and say it is ready (its imports: ~0.5 s, seconds under load).
START_TIMEOUT_S = 30.0
#: Longest one body may take (the largest body, 64 MiB, is ~300k spans: ~10 s of decoding).
REPLY_TIMEOUT_S = 120.0
_FAILED_BODIES_KEPT = 256
_PIPE_BYTES = 1 << 20  # Linux's default largest pipe for a user: fewer reads and wake-ups per body
_MODULE = "agent_rl_plugin.receiver.workers"
_READY = b"agent-rl-decode-worker-ready:"  # then the fingerprint's JSON and a newline
_REQUEST = struct.Struct(">IQ")  # header length, body length
_REPLY = struct.Struct(">IQQ")  # header length, spans IPC length, rewards IPC length


_VACANT: Any = object()  # a worker's place in the pool, to be started when taken


def default_decode_workers(cpus: int | None = None) -> int:
    """``agent-rl serve``'s number of decode workers: one per CPU, at most 4 (past that the
    single writer is the limit, ~90k spans a second), none on one CPU (nothing to gain)."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 0 if cpus < 2 else min(4, cpus)


class WorkerUnavailable(AgentRLError, RuntimeError):
    """No decode worker answered for this body (see the module contract): retry later."""


@dataclass
class Decoded:
    """A body decoded and converted by a worker: ``batch`` to queue, ``total`` spans in the
    request (decoded, or left out for their ids: ``invalid``), CPU seconds of the decoding and of
    the conversion, and the problems the worker's converter reported (``(kind, message)``)."""

    batch: SpanBatch
    total: int
    invalid: int
    decode_s: float
    convert_s: float
    reports: list[tuple[str, str]] = field(default_factory=list)


class _Worker:
    """One child process and its pipes."""

    def __init__(self, max_body_bytes: int, max_attribute_size: int | None) -> None:
        self.process = subprocess.Popen(
            child_argv(_MODULE, str(max_body_bytes), str(max_attribute_size or 0)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=child_environment(),
            start_new_session=True,  # the terminal's signals go to the receiver, which decides
        )
        self._buffer = b""
        for stream in (self.process.stdin, self.process.stdout):
            # Not Linux, or a lower limit: the default pipe works, with more reads.
            with contextlib.suppress(AttributeError, OSError):
                fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)  # type: ignore[union-attr,attr-defined]
        assert self.process.stdin is not None
        os.set_blocking(self.process.stdin.fileno(), False)  # see _write_all

    def ready(self, timeout_s: float) -> dict[str, Any]:
        """The fingerprint the worker sends once started (output before it is skipped)."""
        deadline = time.monotonic() + timeout_s
        while (start := self._buffer.find(_READY)) < 0 or b"\n" not in self._buffer[start:]:
            self._buffer += self._read_some(deadline)
        fingerprint, _, self._buffer = self._buffer[start + len(_READY) :].partition(b"\n")
        return json.loads(fingerprint)

    def call(self, header: dict[str, Any], body: bytes, timeout_s: float) -> tuple[dict[str, Any], bytes, bytes]:
        deadline = time.monotonic() + timeout_s
        head = json.dumps(header).encode()
        self._write_all(_REQUEST.pack(len(head), len(body)) + head, deadline)
        self._write_all(body, deadline)
        sizes = _REPLY.unpack(self._read_exactly(_REPLY.size, deadline))
        reply = json.loads(self._read_exactly(sizes[0], deadline))
        return reply, self._read_exactly(sizes[1], deadline), self._read_exactly(sizes[2], deadline)

    def _write_all(self, data: bytes, deadline: float) -> None:
        """Write ``data`` to the worker's input by the deadline (its pipe is non-blocking: a
        worker that stopped reading cannot hold this thread past it)."""
        assert self.process.stdin is not None
        fd = self.process.stdin.fileno()
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the decode worker did not take the body in time")
            _, writable, _ = select.select([], [fd], [], min(remaining, 1.0))
            if writable:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    continue

    def _read_exactly(self, n: int, deadline: float) -> bytes:
        chunks, have = [self._buffer], len(self._buffer)
        while have < n:  # chunks joined once: a large reply is not copied over and over
            chunk = self._read_some(deadline, n - have)
            chunks.append(chunk)
            have += len(chunk)
        joined = b"".join(chunks)
        if len(joined) == n:
            self._buffer = b""
            return joined
        data, self._buffer = joined[:n], joined[n:]
        return data

    def _read_some(self, deadline: float, wanted: int = 65536) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the decode worker did not answer in time")
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(fd, max(65536, min(wanted, 1 << 24)))
                if not chunk:
                    raise EOFError("the decode worker ended")
                return chunk

    def stop(self, *, kill: bool, timeout_s: float = 10.0) -> None:
        with contextlib.suppress(OSError):  # its end of the pipe may be gone already
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            if kill:
                self.process.kill()
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


class DecodePool:
    """``workers`` decode worker processes for a receiver (see the module contract)."""

    def __init__(
        self,
        workers: int,
        *,
        max_body_bytes: int,
        max_attribute_size: int | None,
        fingerprint: dict[str, Any],
        reply_timeout_s: float = REPLY_TIMEOUT_S,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a decode pool needs at least one worker, got {workers}")
        self.workers = workers
        self.max_body_bytes = max_body_bytes
        self.max_attribute_size = max_attribute_size
        self.fingerprint = json.loads(json.dumps(fingerprint))  # as a worker's arrives: lists, not tuples
        self.reply_timeout_s = reply_timeout_s
        self.start_timeout_s = start_timeout_s
        self.restarts = 0  #: workers replaced after dying or hanging
        self._idle: queue.Queue[Any] = queue.Queue()  # workers, _VACANT places, None once closed
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Digests of bodies a worker failed on (the newest ``_FAILED_BODIES_KEPT``).
        self._failed_bodies: collections.OrderedDict[bytes, None] = collections.OrderedDict()

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers running now."""
        with self._lock:
            return [worker.process.pid for worker in self._all]

    def start(self) -> str | None:
        """Start every worker and check its fingerprint: ``None`` when all are ready, else why
        not (and nothing is left running)."""
        if not children_supported():
            return "helper processes cannot be started here (not POSIX, or a frozen app)"
        try:
            started = [self._spawn() for _ in range(self.workers)]  # all at once: their imports overlap
            for worker in started:
                self._check(worker)
                self._idle.put(worker)
        except RuntimeError as exc:
            self.close()
            return str(exc)
        return None

    def _new_worker(self) -> _Worker:
        return self._check(self._spawn())

    def _spawn(self) -> _Worker:
        try:
            worker = _Worker(self.max_body_bytes, self.max_attribute_size)
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"a decode worker could not be started: {exc}") from exc
        with self._lock:
            closed = self._closed
            if not closed:
                self._all.append(worker)
        if closed:  # close() ran meanwhile: this one would outlive the pool
            worker.stop(kill=True)
            raise RuntimeError("the receiver is stopping")
        return worker

    def _check(self, worker: _Worker) -> _Worker:
        """``worker`` once it said it is ready with the fingerprint of this pool (else stopped,
        and ``RuntimeError`` says why)."""
        try:
            theirs = worker.ready(self.start_timeout_s)
        except (OSError, ValueError, EOFError, TimeoutError) as exc:
            self._drop(worker)
            raise RuntimeError(f"a decode worker did not start: {exc}") from exc
        if theirs != self.fingerprint:
            self._drop(worker)
            differs = sorted(k for k in set(theirs) | set(self.fingerprint) if theirs.get(k) != self.fingerprint.get(k))
            raise RuntimeError(
                "a decode worker would convert spans differently from this process (it differs in "
                f"{', '.join(differs)}: a plugin registered here only, not installed?)"
            )
        return worker

    def _drop(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
        worker.stop(kill=True)

    def decode(self, body: bytes, kind: str, encoding: str | None) -> Decoded:
        """Decode and convert ``body`` in a worker (see the module contract)."""
        worker = self._idle.get()
        if worker is None or self._closed:
            self._idle.put(None)  # the next waiter learns it too
            raise WorkerUnavailable("the receiver is stopping")
        if worker is _VACANT:  # its worker failed and no new one could be started then
            try:
                worker = self._new_worker()
            except Exception as exc:
                self._idle.put(_VACANT)
                raise WorkerUnavailable(f"{exc}; retry") from exc
        try:
            reply, spans, rewards = worker.call({"kind": kind, "encoding": encoding}, body, self.reply_timeout_s)
        except (OSError, ValueError, EOFError, TimeoutError) as exc:
            self._drop(worker)
            self._idle.put(self._replacement())
            failure = f"{type(exc).__name__}: {exc}"
            digest = hashlib.sha256(body).digest()
            with self._lock:
                self.restarts += 1
                again = digest in self._failed_bodies
                self._failed_bodies[digest] = None
                while len(self._failed_bodies) > _FAILED_BODIES_KEPT:
                    self._failed_bodies.popitem(last=False)
            if again:  # the exporter's retry of a body that kills or hangs workers: refuse it for good
                raise DecodeError(f"this body made a decode worker fail twice ({failure}); it is refused") from exc
            raise WorkerUnavailable(f"the decode worker failed ({failure}); retry") from exc
        self._idle.put(worker)
        return _decoded(reply, spans, rewards)

    def _replacement(self) -> Any:
        """A new worker for one that failed, or ``_VACANT`` when none starts now (the next
        body tries again)."""
        if self._closed:
            return None
        try:
            return self._new_worker()
        except RuntimeError as exc:
            logger.error("agent-rl serve: %s", exc)
            return _VACANT

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop every worker (their input closed; killed after ``timeout_s``)."""
        with self._lock:
            self._closed = True
            workers, self._all = list(self._all), []
        for worker in workers:
            worker.stop(kill=False, timeout_s=timeout_s)
        self._idle.put(None)


def decode_and_convert(
    converter: SpanConverter, body: bytes, kind: str, encoding: str | None, max_bytes: int
) -> Decoded:
    """Decode an OTLP request body (``kind``: its media type, ``encoding``: its
    Content-Encoding) and convert its spans with ``converter``: what a worker does with each
    body, and the receiver itself without workers. Raises
    :class:`~agent_rl_plugin.receiver.decode.BodyTooLarge` (inflated past ``max_bytes``) and
    :class:`~agent_rl_plugin.receiver.decode.DecodeError` (any other fault of the body, or a
    converter that raised)."""
    started = time.thread_time()
    try:
        request = decode_body(body, kind, encoding, max_bytes=max_bytes)
        fields, invalid = fields_from_request(request)
    except DecodeError:
        raise
    except Exception as exc:  # anything else the decoder hits is still the body's fault
        raise DecodeError(f"could not decode the body: {type(exc).__name__}: {exc}") from exc
    decoded = time.thread_time()
    try:
        batch = converter.convert_fields(fields)
    except Exception as exc:  # the converter reports its own per-span problems; this is a bug's
        raise DecodeError(f"could not convert the spans: {type(exc).__name__}: {exc}") from exc
    return Decoded(batch, len(fields) + invalid, invalid, decoded - started, time.thread_time() - decoded)


def _decoded(reply: dict[str, Any], spans: bytes, rewards: bytes) -> Decoded:
    if not reply["ok"]:
        error = BodyTooLarge if reply["status"] == 413 else DecodeError
        raise error(reply["message"])
    batch = SpanBatch(
        spans=_table(spans),
        rewards=_table(rewards) if rewards else None,
        failed=reply["failed"],
        invalid=reply["invalid_rows"],
        truncated=reply["truncated"],
    )
    reports = [(kind, message) for kind, message in reply["reports"]]
    return Decoded(batch, reply["total"], reply["invalid"], reply["decode_s"], reply["convert_s"], reports)


def _table(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def ipc_bytes(table: pa.Table | None) -> bytes:
    """``table`` as Arrow IPC stream bytes (``b""`` for ``None``)."""
    if table is None:
        return b""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _serve(
    converter: SpanConverter,
    reports: list[tuple[str, str]],
    max_body_bytes: int,
    requests: IO[bytes],
    replies: IO[bytes],
) -> None:
    """The worker's loop: one body in, one reply out, until the input closes."""
    while True:
        head = requests.read(_REQUEST.size)
        if len(head) < _REQUEST.size:
            return
        header_size, body_size = _REQUEST.unpack(head)
        header = json.loads(requests.read(header_size))
        body = requests.read(body_size)
        if len(body) < body_size:
            return
        spans = rewards = b""
        try:
            del reports[:]
            decoded = decode_and_convert(converter, body, header["kind"], header["encoding"], max_body_bytes)
        except BodyTooLarge as exc:
            reply: dict[str, Any] = {"ok": False, "status": 413, "message": str(exc)}
        except DecodeError as exc:
            reply = {"ok": False, "status": 400, "message": str(exc)}
        else:
            batch = decoded.batch
            spans, rewards = ipc_bytes(batch.spans), ipc_bytes(batch.rewards)
            reply = {
                "ok": True,
                "total": decoded.total,
                "invalid": decoded.invalid,
                "failed": batch.failed,
                "invalid_rows": batch.invalid,
                "truncated": batch.truncated,
                "decode_s": decoded.decode_s,
                "convert_s": decoded.convert_s,
                "reports": list(reports),
            }
        head = json.dumps(reply).encode()
        replies.write(_REPLY.pack(len(head), len(spans), len(rewards)) + head)
        replies.write(spans)
        replies.write(rewards)
        replies.flush()


def main(argv: list[str] | None = None) -> None:
    """A decode worker (started by :class:`DecodePool` through
    :func:`~agent_rl_plugin.store.child_process.child_argv`); ``argv``: the largest body (bytes)
    and the attribute size limit (``0``: none)."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = reply_channel()
    reports: list[tuple[str, str]] = []
    converter = receiver_converter(
        int(args[1]) or None,
        lambda kind, exc: reports.append((kind, str(exc) or type(exc).__name__)),
    )
    replies.write(_READY + json.dumps(converter_fingerprint(converter)).encode() + b"\n")
    replies.flush()
    _serve(converter, reports, int(args[0]), sys.stdin.buffer, replies)
