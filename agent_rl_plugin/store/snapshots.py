"""Reading a database that a running receiver holds: a consistent copy made on request.

A receiver (``agent-rl serve``) holds its file open for good, so other processes cannot open
it; one announced in ``<db>.serve.json`` (:mod:`agent_rl_plugin.store.announcements`) writes a
copy on ``POST /snapshot``. Standard library and DuckDB only: :func:`open_snapshot` works in
a process that never imported the receiver.

Contract:

* :func:`announced_receiver` is true when a live receiver of the file announces itself.
* :func:`request_snapshot` asks the receiver ``info`` for a copy (retrying while it answers
  429, at most 5 times) and returns the copy's path; ``OSError`` when it cannot be reached or
  refuses.
* :func:`open_snapshot` returns a read-only connection to a fresh copy (the copy is unlinked
  once open: nothing is left behind), or ``None`` when no receiver of the file runs or it could
  not make one. It costs a full copy of the file.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import duckdb

from agent_rl_plugin.store.announcements import ANNOUNCEMENT_SUFFIX, exchange, find_receiver, receiver_url


def announced_receiver(path: str) -> bool:
    """True when a live ``agent-rl serve`` of ``path`` announces itself in ``<db>.serve.json``."""
    if not os.path.exists(path + ANNOUNCEMENT_SUFFIX):
        return False
    return find_receiver(path) is not None


def request_snapshot(info: dict[str, Any], timeout: float = 600.0) -> str:
    """Have the receiver described by ``info`` copy its database; the copy's path."""
    url = receiver_url(info)
    for _ in range(5):  # the receiver rate-limits snapshots: 429 + Retry-After
        status, _, body, headers = exchange(url + "/snapshot", info.get("token"), b"{}", "application/json", timeout)
        if status != 429:
            break
        time.sleep(min(float(headers.get("Retry-After", "1") or 1), 5.0))
    if status != 200:
        raise OSError(f"the receiver could not write a snapshot (HTTP {status}): {body[:200]!r}")
    return str(json.loads(body)["path"])


def open_snapshot(path: str) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection to a fresh copy made by the receiver holding ``path``, or ``None``
    (see the module contract)."""
    info = find_receiver(path)
    if info is None:
        return None
    try:
        copy = request_snapshot(info)
        connection = duckdb.connect(copy, read_only=True)
    except (OSError, ValueError, KeyError, duckdb.Error):
        return None
    try:
        os.remove(copy)  # the open connection keeps reading it; nothing is left behind
    except OSError:
        pass
    return connection
