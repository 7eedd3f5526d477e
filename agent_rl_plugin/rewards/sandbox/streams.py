"""Reading the child's pipes: stdout and stderr, each capped (:class:`_Capped`, head and tail
kept), and the status pipe that carries the supervisor's report (:class:`_Reader`), all with a
deadline."""

from __future__ import annotations

import os
import selectors
import time

from .settings import _GRACE_S


class _Capped:
    """Bytes of one stream: all of them up to ``limit``, else the head and the tail."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.limit:
            take = data[: self.limit - len(self.head)]
            self.head += take
            data = data[len(take) :]
        if data:
            self.tail += data
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        if not self.truncated:
            return self.head.decode("utf-8", "replace")
        half = self.limit // 2
        head = bytes(self.head[:half])
        tail = bytes((self.head + self.tail)[-(self.limit - half) :])
        cut = self.total - len(head) - len(tail)
        return head.decode("utf-8", "replace") + f"\n[... {cut} bytes cut ...]\n" + tail.decode("utf-8", "replace")


class _Reader:
    """Reads the child's stdout, stderr and status pipes (status: the supervisor's report)."""

    def __init__(self, streams: dict[int, _Capped], status_fd: int, status: bytearray) -> None:
        self.streams = streams
        self.status_fd = status_fd
        self.status = status
        self.ended_at: float | None = None  # when the status pipe closed: the code has ended
        self.selector = selectors.DefaultSelector()
        for fd in [*streams, status_fd]:
            self.selector.register(fd, selectors.EVENT_READ)

    def read_until(self, deadline: float, *, grace: bool = True) -> bool:
        """Read until every pipe is closed or ``deadline``; True when the deadline came before
        the code ended. With ``grace``, once the code has ended its output pipes get
        ``_GRACE_S`` more (something it started may still hold them)."""
        while self.selector.get_map():
            now = time.monotonic()
            limit = deadline
            if grace and self.ended_at is not None:
                limit = min(deadline, self.ended_at + _GRACE_S)
            if now >= limit:
                return self.ended_at is None and now >= deadline
            for key, _ in self.selector.select(limit - now):
                data = os.read(key.fd, 65536)
                if data:
                    if key.fd == self.status_fd:
                        self.status += data
                    else:
                        self.streams[key.fd].add(data)
                    continue
                self.selector.unregister(key.fd)
                if key.fd == self.status_fd:
                    self.ended_at = time.monotonic()
        return False

    def close(self) -> None:
        self.selector.close()
