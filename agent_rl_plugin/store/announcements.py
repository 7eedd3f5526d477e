"""How a running receiver (``agent-rl serve``) announces that it holds a database, and how to
reach it. Standard library only: readers of the store find an announced receiver without
importing :mod:`agent_rl_plugin.receiver`.

Contract:

* A running receiver writes :func:`info_path` ``(db)`` = ``<db>.serve.json`` with
  :func:`write_info` (mode 0600, atomically: it may hold the token): ``host``, ``port``,
  ``pid``, ``db`` (absolute path, symlinks resolved), ``token`` (or null) and ``url``; it
  removes it on shutdown with :func:`remove_info` (only a file this process wrote).
* :func:`find_receiver` returns that info when the file exists, names the same database and its
  process is alive (:func:`~agent_rl_plugin.store.liveness.pid_alive`); else ``None`` (a stale
  file left by a killed receiver is ignored).
* :func:`exchange` sends one HTTP request to a receiver with its bearer token and an exact
  Content-Type and returns the answer whatever its status; ``OSError`` when it cannot be reached.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent_rl_plugin.store.liveness import pid_alive

ANNOUNCEMENT_SUFFIX = ".serve.json"


def info_path(db: str | os.PathLike[str]) -> str:
    """``<db>.serve.json``: where a receiver of ``db`` announces itself."""
    return os.path.abspath(os.fspath(db)) + ANNOUNCEMENT_SUFFIX


def write_private_json(path: str, data: dict[str, Any]) -> str:
    """Write ``data`` as JSON to ``path`` atomically, readable by this user only (0600); the path."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def _url_host(host: str) -> str:
    connect = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    return f"[{connect}]" if ":" in connect else connect


def base_url(host: str, port: int) -> str:
    """``http://host:port`` for connecting (a wildcard bind address becomes loopback)."""
    return f"http://{_url_host(host)}:{port}"


def receiver_url(info: dict[str, Any]) -> str:
    """The base URL of the receiver an announcement ``info`` describes."""
    return info.get("url") or base_url(info["host"], info["port"])


def write_info(db: str, host: str, port: int, token: str | None) -> str:
    """Write the announcement file (mode 0600, atomically); returns its path."""
    info = {
        "host": host,
        "port": port,
        "pid": os.getpid(),
        "db": os.path.realpath(os.path.abspath(db)),
        "token": token,
        "url": base_url(host, port),
    }
    return write_private_json(info_path(db), info)


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


def find_receiver(db: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The running receiver of ``db`` (its announcement), or ``None`` (see the module contract)."""
    path = info_path(db)
    try:
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int) or not pid_alive(info["pid"]):
        return None
    if info.get("db") != os.path.realpath(os.path.abspath(os.fspath(db))):
        return None
    return info


def exchange(
    url: str, token: str | None, data: bytes | None = None, content_type: str | None = None, timeout: float = 60.0
) -> tuple[int, str, bytes, dict[str, str]]:
    """One request to a receiver: ``POST`` with ``data``, else ``GET``; returns ``(status,
    content type, body, headers)`` for any HTTP status. ``OSError`` when unreachable."""
    import urllib.error  # here: readers that find no receiver never pay for urllib.request (~8 ms)
    import urllib.request

    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if content_type:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read(), dict(exc.headers)
