"""Spool merges of a recording process, done in a child process (the merger) or in-process.

A recording agent writes spool segments; merging them into the DuckDB file opens the file and
its indexes, and that memory grows with the file (20-50 MB per merge at a million spans) and
competes with the agent for the GIL. An agent that records a lot hands its merges to one child
process instead: its own memory stays flat, and merges run on another core while it records.

Contract:

* :func:`merge_leases` is the one definition of a recording process's merge: up to
  ``limits.max_leases`` short leases (:func:`~agent_rl_plugin.store.lease.try_merge`) of at most
  ``limits.max_rows`` rows and ``limits.merge_threads`` DuckDB threads each (:class:`LeaseLimits`),
  stopping when nothing is left or the file is busy. It never raises: an interrupted merge (rolled back; its segments wait) and a
  failure come back in the :class:`MergeOutcome`.
* :class:`MergerProcess` runs :func:`merge_leases` in a child (this module's :func:`main`, in the
  same copy of the package as the agent's), started on the first :meth:`~MergerProcess.merge`,
  one request at a time; the child's leases append in row groups of :data:`MERGE_ROW_GROUP_SIZE`.
  :meth:`~MergerProcess.merge` returns ``None`` when the child cannot be
  started or did not answer within its timeout (the child is then stopped; a later call starts a
  new one): the caller merges in-process, or leaves the segments for the next merge. After
  ``MAX_FAILURES`` requests in a row without an answer (or a child that cannot start at all) it
  returns ``None`` at once: that process merges by itself from then on. A new child says it is
  ready before its first request; one that does not within ``START_TIMEOUT_S`` (a
  ``sys.executable`` that is no Python) is stopped and counts as all ``MAX_FAILURES`` at once,
  so a flush waits seconds for it once, not ``REPLY_TIMEOUT_S``. A frozen app (``sys.frozen``)
  never starts one: its ``sys.executable`` is the app itself.
* The child answers each request with one JSON line; it ignores Ctrl+C (sent to the whole
  terminal's process group: its parent decides) and exits when its input closes (the parent
  closed it or ended), after the merge in progress, so a DuckDB transaction is never cut short.
* A forked process never uses its parent's child: it closes its copies of the child's pipes at
  the fork (so the child still ends with its agent) and :meth:`~MergerProcess.merge` there starts
  its own.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field, fields
from typing import IO, Any, Callable

from agent_rl_plugin.arrow_memory import child_environment
from agent_rl_plugin.store.child_process import child_argv, children_supported, reply_channel

#: Longest a request may take beyond its lock wait before the child counts as hung (it is then
#: stopped, and its segments wait for the next merge: nothing is lost).
REPLY_TIMEOUT_S = 300.0
#: Longest a new child may take to say it is ready (its imports; ~0.3 s, seconds under load).
#: One that does not (a ``sys.executable`` that is no Python: an embedding or frozen binary) is
#: stopped, and this process merges from then on: a flush never waits for it again.
START_TIMEOUT_S = 10.0
#: Rows per row group the merger child appends in (DuckDB's default: 122,880). Each lease ends
#: with a checkpoint, which rewrites the table's last row group whole when the lease appended to
#: it: with the default size a lease of 16k rows costs 40-160 ms of checkpoint (the group fills
#: over several leases and is rewritten each time), with row groups of this size ~13 ms
#: (measured: docs/benchmarks.md, the tenth pass). The child opens the file for its
#: leases only, so it can attach it with this size (DuckDB refuses a second open of one file in a
#: process): in-process merges keep the default.
MERGE_ROW_GROUP_SIZE = 16_384
#: How long stopping the child waits for it to finish its merge before killing it.
STOP_TIMEOUT_S = 30.0
#: Requests in a row without an answer after which a writer stops starting children and merges
#: in its own process (a child that cannot start would otherwise cost a process per merge).
MAX_FAILURES = 3
#: What starts each reply line: other output that reaches the pipe before the child's ``main``
#: (a ``sitecustomize`` that prints) is skipped; ``main`` sends all later output of the child's
#: own (DuckDB prints its progress bar to file descriptor 1) to ``os.devnull``.
_REPLY = b"agent-rl-merger-reply:"
_READY = b"ready"  # the child's first reply, before any request


@dataclass(frozen=True)
class LeaseLimits:
    """How much one merge may do: at most ``max_leases`` leases in a row, each of at most
    ``max_segments`` segments and ``max_rows`` span rows (whole segments, at least one), on
    ``merge_threads`` DuckDB threads."""

    max_leases: int
    max_segments: int
    max_rows: int
    merge_threads: int

    @classmethod
    def from_request(cls, request: dict[str, Any]) -> LeaseLimits:
        """The limits a merger request carries (its fields as integers)."""
        return cls(**{f.name: int(request[f.name]) for f in fields(cls)})


@dataclass
class MergeOutcome:
    """What :func:`merge_leases` did: the results of its leases (``MergeResult`` fields as
    dicts), whether DuckDB interrupted one, and a failure (type name, message, errno)."""

    results: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    error: dict[str, Any] | None = None
    peak_rss_mb: float | None = None

    def failure(self, path: str) -> BaseException | None:
        """The failure as a :class:`~agent_rl_plugin.store.errors.StoreError` whose cause keeps
        the errno (so a full disk is named as such), or ``None``."""
        if self.error is None:
            return None
        from agent_rl_plugin.store.errors import StoreError

        error = StoreError(f"{self.error['type']}: {self.error['message']}", path)
        if self.error.get("errno") is not None:
            error.__cause__ = OSError(int(self.error["errno"]), str(self.error["message"]))
        return error


def merge_leases(
    path: str,
    *,
    wait_s: float,
    limits: LeaseLimits,
    keep_going: Callable[[], bool] = lambda: True,
    row_group_size: int | None = None,
) -> MergeOutcome:
    """Merge ``path``'s spool segments in up to ``limits.max_leases`` leases (see the module
    contract), before each lease but the first asking ``keep_going()``; ``row_group_size``: see
    :data:`MERGE_ROW_GROUP_SIZE`."""
    from agent_rl_plugin.store.lease import try_merge

    outcome = MergeOutcome()
    for lease in range(limits.max_leases):
        if lease and not keep_going():
            return outcome
        try:
            result = try_merge(
                path,
                wait_s=wait_s,
                max_segments=limits.max_segments,
                max_rows=limits.max_rows,
                merge_threads=limits.merge_threads,
                row_group_size=row_group_size,
            )
        except Exception as exc:  # noqa: BLE001 - handed back, never raised into the recorder
            if "Interrupt" in type(exc).__name__:
                # DuckDB interrupted the merge (seen under heavy load, and when the process ends
                # mid-merge): its transaction rolled back, its segments stay in the spool and the
                # next merge, flush or reader merges them. Nothing is lost: deferred.
                outcome.interrupted = True
            else:
                cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
                outcome.error = {
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "errno": getattr(cause, "errno", None),
                }
            return outcome
        if result is None:
            return outcome
        outcome.results.append(asdict(result))
        if not result.segments:
            return outcome
    return outcome


class MergerProcess:
    """A child process that merges one database's spool segments on request (see the module
    contract). Thread-safe: requests take turns."""

    def __init__(self, path: str, reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self.path = path
        self.reply_timeout_s = reply_timeout_s
        self.started = 0  # children started (a hung or dead one is replaced)
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()
        self._buffer = b""
        self._failures = 0  # requests in a row that got no answer (a child that cannot start, or dies)
        if hasattr(os, "register_at_fork"):
            mine = weakref.ref(self)

            def _after_fork_in_child() -> None:
                merger = mine()
                if merger is not None:
                    merger._forget_after_fork()

            os.register_at_fork(after_in_child=_after_fork_in_child)

    def _forget_after_fork(self) -> None:
        """In a forked process: the parent's child is not ours. Our copies of its pipes are
        closed (else it would see its input end only when every fork has ended), and the lock,
        which a thread of the parent may have held at the fork, is new."""
        child, self._child = self._child, None
        self._owner, self._buffer, self._lock = os.getpid(), b"", threading.Lock()
        if child is not None:
            for stream in (child.stdin, child.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            child.returncode = 0  # not ours to wait for: Popen must not reap it from here

    @staticmethod
    def supported() -> bool:
        """Children are started where ``select`` works on pipes (POSIX) and Python can be run
        (not from a frozen app, whose ``sys.executable`` is the app itself)."""
        return children_supported()

    def merge(self, *, wait_s: float, limits: LeaseLimits, lock_wait_s: float | None = None) -> MergeOutcome | None:
        """Ask the child to run :func:`merge_leases` (``wait_s`` for the file's lock) and return its outcome;
        ``None`` when it could not be asked or did not answer in time. ``lock_wait_s`` bounds the
        wait for a request already in progress (default: as long as it takes); a caller that gave
        up waiting gets ``MergeOutcome()`` (that merge covers its segments)."""
        if lock_wait_s is None:
            self._lock.acquire()
        elif not self._lock.acquire(timeout=lock_wait_s):
            return MergeOutcome()
        try:
            if self._owner != os.getpid():  # forked without the fork hook: the parent's child is not ours
                self._child, self._owner, self._buffer = None, os.getpid(), b""
            if self._failures >= MAX_FAILURES:
                return None  # this process merges from now on: no process start per merge
            fresh = self._child is None or self._child.poll() is not None
            child = self._start() if fresh else self._child
            if child is None:
                self._failures = MAX_FAILURES
                return None
            if fresh:
                deadline = time.monotonic() + START_TIMEOUT_S
                if self._read_line(child, deadline) != _READY:  # ended (a failure) or hung (given up)
                    hung = time.monotonic() >= deadline
                    self._failures = MAX_FAILURES if hung else self._failures + 1
                    self._stop(child, kill=True)
                    return None
            request = json.dumps({"wait_s": wait_s, **asdict(limits)}).encode() + b"\n"
            try:
                assert child.stdin is not None
                child.stdin.write(request)
                child.stdin.flush()
                line = self._read_line(child, time.monotonic() + self.reply_timeout_s + max(0.0, wait_s))
            except (OSError, ValueError):
                line = None
            outcome = None
            if line is not None:
                try:
                    outcome = MergeOutcome(**json.loads(line))
                except (ValueError, TypeError):  # not an answer: the child is stopped, as a hung one
                    outcome = None
            if outcome is None:
                self._failures += 1
                self._stop(child, kill=True)
            else:
                self._failures = 0
            return outcome
        finally:
            self._lock.release()

    def close(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Close the child's input and wait for it to end (killed after ``timeout_s``)."""
        with self._lock:
            child = self._child
            if child is not None and self._owner == os.getpid():
                self._stop(child, kill=False, timeout_s=timeout_s)
            self._child = None

    def _start(self) -> subprocess.Popen[bytes] | None:
        if not self.supported():
            return None
        try:
            child = subprocess.Popen(
                child_argv("agent_rl_plugin.store.merger_process", self.path),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                env=child_environment(),  # its pyarrow commits arena memory on use: see arrow_memory
                start_new_session=True,  # the terminal's signals go to the agent, which decides
            )
        except (OSError, ValueError):
            return None
        self._child, self._buffer = child, b""
        self.started += 1
        return child

    def _read_line(self, child: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        """The next reply (what follows :data:`_REPLY` on its line), other lines skipped."""
        while True:
            line = self._next_line(child, deadline)
            if line is None or _REPLY in line:
                return None if line is None else line[line.rfind(_REPLY) + len(_REPLY) :]

    def _next_line(self, child: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        assert child.stdout is not None
        fd = child.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:  # the child ended
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _stop(self, child: subprocess.Popen[bytes], *, kill: bool, timeout_s: float = STOP_TIMEOUT_S) -> None:
        try:
            if child.stdin is not None:
                child.stdin.close()
        except OSError:
            pass
        try:
            if kill:
                child.kill()
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        finally:
            if child.stdout is not None:
                child.stdout.close()
            if self._child is child:
                self._child = None


def _serve(path: str, requests: IO[bytes], replies: IO[bytes]) -> None:
    """The child's loop: one JSON request per line in, one :class:`MergeOutcome` per line out. A
    request stops after the lease in progress when the agent has ended (the child then belongs to
    another parent): the file is not held for a dead agent's backlog, which its readers merge; and
    when another process or thread waits for the file (a reader, a scorer): it gets the file
    before the next lease."""
    from agent_rl_plugin.store.holders import someone_waiting

    parent = os.getppid()
    for line in requests:
        request = json.loads(line)
        outcome = merge_leases(
            path,
            wait_s=float(request["wait_s"]),
            limits=LeaseLimits.from_request(request),
            keep_going=lambda: os.getppid() == parent and not someone_waiting(path),
            row_group_size=MERGE_ROW_GROUP_SIZE,
        )
        import resource  # POSIX only, as the child

        outcome.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        replies.write(_REPLY + json.dumps(asdict(outcome)).encode() + b"\n")
        replies.flush()


def main(argv: list[str] | None = None) -> None:
    """``python -m agent_rl_plugin.store.merger_process DB``: the merger child (started with
    :func:`~agent_rl_plugin.store.child_process.child_argv`)."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = reply_channel()  # file descriptor 1 now goes nowhere
    replies.write(_REPLY + _READY + b"\n")
    replies.flush()
    _serve(os.path.abspath(args[0]), sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
