"""A threading HTTP server that caps its open connections: one thread per connection while
fewer than ``max_connections`` are open; past that a connection gets a fixed ``503`` answer
(``busy``, JSON, ``Retry-After: 1``) and is closed, so a flood of clients cannot exhaust threads.
A client that hung up is logged at debug level, never as a traceback. The receiver
(``agent-rl serve``) and the policy server (``agent-rl policy serve``) both build on it."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["BoundedHTTPServer", "busy_response"]


def busy_response(body: bytes) -> bytes:
    """The raw ``503`` answer with ``body`` (JSON) a refused connection gets."""
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


class BoundedHTTPServer(ThreadingHTTPServer):
    """Serve ``handler`` on ``address`` (IPv6 when the host has a ``:``) with at most
    ``max_connections`` connections at a time; ``busy`` is the raw answer past that.
    Subclasses may override :meth:`refused` (count it) and :meth:`unexpected_error`."""

    daemon_threads = True  # idle keep-alive connections must not hold the process at exit
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        max_connections: int,
        busy: bytes,
        logger: logging.Logger,
    ) -> None:
        self.slots = threading.BoundedSemaphore(max_connections)
        self.busy = busy
        self.logger = logger
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def refused(self) -> None:
        """Called for each connection refused because every slot was taken."""

    def unexpected_error(self, request: Any, client_address: Any) -> None:
        """An error on a connection other than the client hanging up (default: the traceback on stderr)."""
        super().handle_error(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            self.logger.debug("client %s went away", client_address)
        else:
            self.unexpected_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            try:
                request.sendall(self.busy)
            except OSError:
                pass
            self.refused()
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()
