"""Errors raised by the store, each with a message that names the fix.

Contract:

* :class:`StoreError` is the base of everything the store raises on purpose (a missing file, a
  file that is not a DuckDB database, a database this process cannot open).
* :class:`StoreLockedError` means another process holds DuckDB's write lock on the file. Its
  message names the path, the holder's PID (read from DuckDB's own message) and the fix.
* :func:`translate_duckdb_error` turns a ``duckdb.Error`` raised while opening ``path`` into one of
  these, or returns ``None`` when it is something else.
"""

from __future__ import annotations

import errno
import os
import re
import sys

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.store.holders import describe_holder

LOCK_FIX = (
    "wait for it to finish and try again, or close its connection (a Python session that keeps "
    "an open_reader() or duckdb.connect() connection holds the file until it closes it); "
    "recording agents never hold the file, so they are not the cause"
)

_PID = re.compile(r"PID (\d+)")
_HOLDER = re.compile(r"lock is held in (.+?) \(PID")


class StoreError(AgentRLError):
    """A store problem the user can fix; ``str(error)`` says what happened and how to fix it."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreLockedError(StoreError):
    """Another process holds the DuckDB write lock on ``path``.

    ``pid`` is the holder's process id and ``holder`` its executable, when DuckDB reported them.
    """

    def __init__(
        self,
        path: str,
        pid: int | None = None,
        holder: str | None = None,
        detail: str = "",
        doing: str | None = None,
        waited_s: float | None = None,
    ) -> None:
        who = "another process"
        if pid is not None and pid == os.getpid():
            who = f"this process (PID {pid}), in another connection (one from open_reader() or connect_writer() not closed yet),"
        elif pid is not None:
            who = f"another process (PID {pid}{', ' + holder if holder else ''})"
        if doing:
            who += f", busy with {doing},"
        waited = f" (waited {waited_s:.1f} s)" if waited_s else ""
        message = (
            f"database {path} is locked{waited}: {who} has it open, and DuckDB lets one process "
            f"write a file and no process read it meanwhile. Fix: {LOCK_FIX.format(path=path)}."
        )
        super().__init__(message, path)
        self.pid = pid
        self.holder = holder
        self.detail = detail
        self.doing = doing


def is_duckdb_error(exc: BaseException) -> bool:
    """``isinstance(exc, duckdb.Error)``, without importing DuckDB: an error of a module not yet
    imported cannot be one (a recording agent whose merges run in a child never imports it)."""
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(exc, duckdb.Error)


def is_lock_error(exc: BaseException) -> bool:
    """True for DuckDB's "Could not set lock on file" error."""
    return is_duckdb_error(exc) and "could not set lock" in str(exc).lower()


def is_config_conflict(exc: BaseException) -> bool:
    """True when this process already has the file open with another configuration."""
    return is_duckdb_error(exc) and "different configuration" in str(exc).lower()


def translate_duckdb_error(exc: BaseException, path: str) -> StoreError | None:
    """A :class:`StoreError` for a failure to open ``path``, or ``None`` if ``exc`` is unrelated."""
    text = str(exc)
    if is_lock_error(exc):
        pid_match = _PID.search(text)
        holder_match = _HOLDER.search(text)
        pid = int(pid_match.group(1)) if pid_match else None
        return StoreLockedError(
            path,
            pid=pid,
            holder=holder_match.group(1) if holder_match else None,
            detail=text,
            doing=describe_holder(path, pid),
        )
    if is_config_conflict(exc):
        return StoreError(
            f"database {path} is already open in this process with other settings (read-only vs "
            "read-write). Fix: close the other connection (for example the one from "
            "open_reader()) before recording, or read through open_reader(), which shares the "
            "recorder's connection.",
            path,
        )
    lowered = text.lower()
    if is_duckdb_error(exc) and (
        "not a valid duckdb database" in lowered or "unable to open" in lowered or "cannot open" in lowered
    ):
        return StoreError(f"cannot open {path} as a DuckDB database: {text.splitlines()[0]}", path)
    return None


#: Storage failures, by errno and by how DuckDB and the OS word them: (meaning, fix).
_STORAGE_PROBLEMS: tuple[tuple[int | None, str, str, str], ...] = (
    (
        errno.ENOSPC,
        "no space left on device",
        "the disk is full (ENOSPC)",
        "free space on that disk, or record into a database on another disk (configure(db=...))",
    ),
    (
        errno.EFBIG,
        "file too large",
        "the file size limit was reached (EFBIG: a full disk or ulimit -f)",
        "free space or raise the limit (ulimit -f), or record into a database on another disk",
    ),
    (
        getattr(errno, "EDQUOT", None),
        "disk quota exceeded",
        "the disk quota is exceeded (EDQUOT)",
        "free space within your quota, or record into a database on another disk",
    ),
    (
        errno.EROFS,
        "read-only file system",
        "the file system is read-only (EROFS)",
        "record into a database in a writable folder (configure(db=...))",
    ),
)


def storage_problem(exc: BaseException) -> tuple[str, str] | None:
    """``(meaning, fix)`` when ``exc`` (or its cause) says the disk cannot take the data."""
    seen: BaseException | None = exc
    for _ in range(8):  # the error and its causes (bounded: a chain could loop)
        if seen is None:
            break
        code = getattr(seen, "errno", None)
        text = str(seen).lower()
        for number, phrase, meaning, fix in _STORAGE_PROBLEMS:
            if (number is not None and code == number) or phrase in text:
                return meaning, fix
        seen = seen.__cause__
    return None
