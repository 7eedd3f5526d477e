"""Talking to a running receiver: ``/query``, ``/stats``, and the port entries for its token.

Contract:

* A running :class:`~agent_rl_plugin.receiver.server.Receiver` announces itself in
  ``<db>.serve.json``; the format, :func:`info_path`, :func:`write_info`, :func:`remove_info`
  and :func:`find_receiver` belong to the store layer
  (:mod:`agent_rl_plugin.store.announcements`, re-exported here), so that a reader of the
  store finds the receiver without importing this package.
* :func:`remote_query` sends read-only SQL to ``POST /query`` and returns ``(columns, rows)``
  with the same Python types a local DuckDB cursor gives (the result travels as Arrow IPC).
  It raises :class:`RemoteQueryError` with the receiver's message for refused or failing SQL,
  and ``OSError`` when the receiver cannot be reached.
* :func:`request_snapshot` asks for ``POST /snapshot`` and returns the path of the copy
  (``OSError`` when the receiver cannot be reached or refuses); it lives in
  :mod:`agent_rl_plugin.store.snapshots`, which :func:`~agent_rl_plugin.store.open_reader` uses.
* :func:`fetch_stats` returns the JSON of ``GET /stats``.
* A receiver with a token on a loopback address also writes a port entry (0600, in a 0700
  folder of this user: ``$AGENT_RL_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/agent-rl``, else
  ``~/.cache/agent-rl/receivers``); :func:`token_for_endpoint` reads it so that a local OTLP
  exporter pointed at ``http://127.0.0.1:PORT`` sends the token without being told.
* Every request of this module sends the token of ``info`` and an exact Content-Type.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.parse
from typing import Any

import pyarrow as pa

from agent_rl_plugin.errors import AgentRLError

# The announcement and the snapshot request belong to the store layer; their names stay
# importable from here for callers of this module.
from agent_rl_plugin.store.announcements import (
    base_url,
    exchange,
    find_receiver,
    info_path,
    receiver_url,
    remove_info,
    write_info,
    write_private_json,
)
from agent_rl_plugin.store.liveness import pid_alive
from agent_rl_plugin.store.snapshots import request_snapshot

__all__ = [
    "ARROW_STREAM",
    "TOKEN_ENV",
    "TRUNCATED_HEADER",
    "RemoteQueryError",
    "base_url",
    "fetch_stats",
    "find_receiver",
    "info_path",
    "is_loopback",
    "remote_query",
    "remote_query_table",
    "remove_info",
    "remove_port_entry",
    "request_snapshot",
    "runtime_dir",
    "token_for_endpoint",
    "write_info",
    "write_port_entry",
]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
TOKEN_ENV = "AGENT_RL_SERVE_TOKEN"


class RemoteQueryError(AgentRLError):
    """The receiver refused or failed the SQL; ``str(error)`` is its message."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def runtime_dir() -> str | None:
    """This user's private folder for port entries (created 0700), or ``None`` when it cannot be
    made private (another owner, group or world access)."""
    base = os.environ.get("AGENT_RL_RUNTIME_DIR")
    if not base:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        base = (
            os.path.join(xdg, "agent-rl")
            if xdg
            else os.path.join(os.path.expanduser("~"), ".cache", "agent-rl", "receivers")
        )
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        status = os.stat(base)
    except OSError:
        return None
    if status.st_uid != os.getuid() or status.st_mode & 0o077:
        return None
    return base


def _port_entry(port: int) -> str | None:
    folder = runtime_dir()
    return os.path.join(folder, f"port-{int(port)}.json") if folder else None


def write_port_entry(port: int, token: str, db: str) -> str | None:
    """Record the token of the loopback receiver on ``port`` for local exporters; its path.
    Entries left by receivers that died (``kill -9``) are removed on the way."""
    path = _port_entry(port)
    if path is None:
        return None
    folder = os.path.dirname(path)
    for name in os.listdir(folder):
        if name.startswith("port-") and name.endswith(".json"):
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    pid = json.load(handle).get("pid")
                if isinstance(pid, int) and not pid_alive(pid):
                    os.remove(os.path.join(folder, name))
            except (OSError, ValueError, AttributeError):
                pass
    return write_private_json(path, {"port": port, "pid": os.getpid(), "token": token, "db": db})


def remove_port_entry(port: int) -> None:
    """Remove the port entry if this process wrote it."""
    path = _port_entry(port)
    try:
        with open(path or "", encoding="utf-8") as handle:
            if json.load(handle).get("pid") == os.getpid():
                os.remove(path or "")
    except (OSError, ValueError, AttributeError):
        pass


def token_for_endpoint(url: str) -> str | None:
    """The token of the live receiver of this user at ``url`` when its host is loopback, else
    ``None`` (see the module contract)."""
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return None
    if not parsed.hostname or not is_loopback(parsed.hostname):
        return None
    path = _port_entry(port)
    try:
        with open(path or "", encoding="utf-8") as handle:
            info = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int) or not pid_alive(info["pid"]):
        return None
    token = info.get("token")
    return token if isinstance(token, str) and token else None


def _request(
    url: str, token: str | None, data: bytes | None = None, content_type: str | None = None, timeout: float = 60.0
) -> tuple[int, str, bytes]:
    status, kind, body, _ = exchange(url, token, data, content_type, timeout)
    return status, kind, body


TRUNCATED_HEADER = "X-Agent-RL-Truncated"


def remote_query_table(info: dict[str, Any], sql: str, timeout: float = 120.0) -> tuple[pa.Table, str | None]:
    """Run read-only ``sql`` on the receiver described by ``info``: ``(table, truncated)`` where
    ``truncated`` is ``"rows"``/``"bytes"`` when the receiver cut the result at its cap, else
    ``None``. Errors as :func:`remote_query`."""
    url = receiver_url(info)
    status, content_type, body, headers = exchange(
        url + "/query", info.get("token"), json.dumps({"sql": sql}).encode("utf-8"), "application/json", timeout
    )
    if status != 200:
        try:
            message = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            message = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
        raise RemoteQueryError(message)
    if not content_type.startswith(ARROW_STREAM):
        raise RemoteQueryError(f"unexpected answer from the receiver ({content_type or 'no content type'})")
    return pa.ipc.open_stream(body).read_all(), headers.get(TRUNCATED_HEADER) or None


def remote_query(info: dict[str, Any], sql: str, timeout: float = 120.0) -> tuple[list[str], list[tuple]]:
    """Run read-only ``sql`` on the receiver described by ``info`` (see the module contract)."""
    table, _ = remote_query_table(info, sql, timeout)
    columns = list(table.column_names)
    if not columns:
        return [], []
    rows = list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))
    return columns, rows


def fetch_stats(host: str, port: int, token: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """``GET /stats`` of the receiver at ``host:port``. Raises ``OSError`` when unreachable and
    ``PermissionError`` when the token is missing or wrong."""
    status, _, body = _request(base_url(host, port) + "/stats", token, timeout=timeout)
    if status == 401:
        raise PermissionError("the receiver wants a token: pass --token or set AGENT_RL_SERVE_TOKEN")
    if status != 200:
        raise OSError(f"the receiver answered HTTP {status}: {body[:200]!r}")
    return json.loads(body)
