"""Finding and talking to a running receiver: ``<db>.serve.json``, ``/query``, ``/stats``.

Contract:

* A running :class:`~agent_rl_plugin.receiver.server.Receiver` writes :func:`info_path` ``(db)``
  = ``<db>.serve.json`` (mode 0600: it may hold the token) with ``host``, ``port``, ``pid``,
  ``db`` (absolute path), ``token`` (or null) and ``url``, and removes it on shutdown.
* :func:`find_receiver` returns that info when the file exists, names the same database and its
  process is alive; else ``None`` (a stale file left by a killed receiver is ignored).
* :func:`remote_query` sends read-only SQL to ``POST /query`` and returns ``(columns, rows)``
  with the same Python types a local DuckDB cursor gives (the result travels as Arrow IPC).
  It raises :class:`RemoteQueryError` with the receiver's message for refused or failing SQL,
  and ``OSError`` when the receiver cannot be reached.
* :func:`request_snapshot` asks for ``POST /snapshot`` and returns the path of the copy
  (``OSError`` when the receiver cannot be reached or refuses).
* :func:`fetch_stats` returns the JSON of ``GET /stats``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

import pyarrow as pa

ARROW_STREAM = "application/vnd.apache.arrow.stream"
TOKEN_ENV = "AGENT_RL_SERVE_TOKEN"


class RemoteQueryError(Exception):
    """The receiver refused or failed the SQL; ``str(error)`` is its message."""


def info_path(db: str | os.PathLike[str]) -> str:
    """``<db>.serve.json``: where a receiver of ``db`` announces itself."""
    return os.path.abspath(os.fspath(db)) + ".serve.json"


def write_info(db: str, host: str, port: int, token: str | None) -> str:
    """Write the announcement file (mode 0600, atomically); returns its path."""
    path = info_path(db)
    info = {
        "host": host,
        "port": port,
        "pid": os.getpid(),
        "db": os.path.realpath(os.path.abspath(db)),
        "token": token,
        "url": f"http://{_url_host(host)}:{port}",
    }
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    os.replace(tmp, path)
    return path


def remove_info(db: str) -> None:
    """Remove the announcement file if this process wrote it."""
    path = info_path(db)
    try:
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
        if info.get("pid") == os.getpid():
            os.remove(path)
    except (OSError, ValueError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def find_receiver(db: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The running receiver of ``db`` (its announcement), or ``None`` (see the module contract)."""
    path = info_path(db)
    try:
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int) or not _alive(info["pid"]):
        return None
    if info.get("db") != os.path.realpath(os.path.abspath(os.fspath(db))):
        return None
    return info


def _url_host(host: str) -> str:
    connect = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    return f"[{connect}]" if ":" in connect else connect


def base_url(host: str, port: int) -> str:
    """``http://host:port`` for connecting (a wildcard bind address becomes loopback)."""
    return f"http://{_url_host(host)}:{port}"


def _request(url: str, token: str | None, data: bytes | None = None, content_type: str | None = None,
             timeout: float = 60.0) -> tuple[int, str, bytes]:
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if content_type:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def remote_query(info: dict[str, Any], sql: str, timeout: float = 120.0) -> tuple[list[str], list[tuple]]:
    """Run read-only ``sql`` on the receiver described by ``info`` (see the module contract)."""
    url = info.get("url") or base_url(info["host"], info["port"])
    status, content_type, body = _request(
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
    table = pa.ipc.open_stream(body).read_all()
    columns = list(table.column_names)
    if not columns:
        return [], []
    rows = list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))
    return columns, rows


def request_snapshot(info: dict[str, Any], timeout: float = 600.0) -> str:
    """Have the receiver described by ``info`` copy its database; the copy's path."""
    url = info.get("url") or base_url(info["host"], info["port"])
    status, _, body = _request(url + "/snapshot", info.get("token"), b"{}", "application/json", timeout)
    if status != 200:
        raise OSError(f"the receiver could not write a snapshot (HTTP {status}): {body[:200]!r}")
    return str(json.loads(body)["path"])


def fetch_stats(host: str, port: int, token: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """``GET /stats`` of the receiver at ``host:port``. Raises ``OSError`` when unreachable and
    ``PermissionError`` when the token is missing or wrong."""
    status, _, body = _request(base_url(host, port) + "/stats", token, timeout=timeout)
    if status == 401:
        raise PermissionError("the receiver wants a token: pass --token or set AGENT_RL_SERVE_TOKEN")
    if status != 200:
        raise OSError(f"the receiver answered HTTP {status}: {body[:200]!r}")
    return json.loads(body)
