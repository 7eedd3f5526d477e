"""Notes that say what a process holding a database is doing, for lock messages.

DuckDB's lock error names the holder's PID and executable; it cannot say *what* the holder is
doing. While this package holds a database, the process keeps a note
``<db>.spool/holders/<pid>.json`` with ``what`` ("agent-rl score", "reading", "merging 3 spool
segments") and since when; :func:`describe_holder` reads it back for an error message.

A process that waits for the lock says so too: :func:`waiting` keeps a note
``<db>.spool/holders/<pid>.<thread>.wait`` while it waits, and :func:`someone_waiting` tells a
recording process's merger to leave the file free for a moment between its leases (it merges
back to back otherwise).

Contract: notes are best effort (a note that cannot be written is skipped, never an error);
a note of a dead process is ignored and removed by :func:`remove_stale_notes` (run with every
merge); :func:`holding` removes its note on exit (or restores the process's previous note when
leases nest); a :func:`note` is removed when the process exits; a :func:`waiting` note when its
block ends.
"""

from __future__ import annotations

import atexit
import json
import os
import stat
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from agent_rl_plugin.store.liveness import pid_alive
from agent_rl_plugin.store.spool import check_private, remove_spool_if_empty

_lock = threading.Lock()
_active: dict[str, list[str]] = {}  # db key -> stack of what this process is doing


def _note_pid(entry: str) -> int | None:
    """The pid a note's name starts with; ``None`` for a name no process of ours writes."""
    text = entry.split(".", 1)[0]
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        return None
    pid = int(text)
    return pid if pid > 0 else None


def _note_path(db_path: str, pid: int) -> str:
    return os.path.abspath(db_path) + f".spool{os.sep}holders{os.sep}{pid}.json"


def _notes_folder(db_path: str, *, make_spool: bool = False, make_holders: bool = True) -> int | None:
    """A descriptor of ``<db>.spool/holders`` (opened without following a link) when the spool
    folder is a private folder of ours, else ``None``; each folder is made (0700) when missing if
    its flag says so. Notes are never written through a link nor into a folder another user
    could fill (docs/store.md: such a spool is left alone)."""
    spool = os.path.dirname(os.path.dirname(_note_path(db_path, 0)))
    try:
        if make_spool:
            os.makedirs(spool, mode=0o700, exist_ok=True)
        if not stat.S_ISDIR(os.lstat(spool).st_mode):
            return None
        check_private(spool)
        folder = os.path.join(spool, "holders")
        if make_holders:
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                pass
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except Exception:  # noqa: BLE001 - no spool, not private, a link, no permission: no note
        return None


def _write(db_path: str, what: str) -> None:
    folder = _notes_folder(db_path, make_spool=True)
    if folder is None:
        return
    name = os.path.basename(_note_path(db_path, os.getpid()))
    temp = f"{name}.{threading.get_ident()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=folder)
        with os.fdopen(fd, "w") as handle:
            json.dump({"pid": os.getpid(), "what": what, "since": time.time()}, handle)
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError:
        pass
    finally:
        os.close(folder)


def _remove(db_path: str) -> None:
    folder = _notes_folder(db_path, make_holders=False)
    if folder is None:
        return
    try:
        os.remove(os.path.basename(_note_path(db_path, os.getpid())), dir_fd=folder)
    except OSError:
        pass
    finally:
        os.close(folder)


@contextmanager
def holding(db_path: str | os.PathLike[str], what: str) -> Iterator[None]:
    """Keep a note that this process holds ``db_path`` doing ``what`` while the block runs."""
    key = os.path.abspath(os.fspath(db_path))
    with _lock:
        stack = _active.setdefault(key, [])
        stack.append(what)
        _write(key, what)
    try:
        yield
    finally:
        with _lock:
            stack = _active.get(key, [])
            if what in stack:
                stack.remove(what)
            if stack:
                _write(key, stack[-1])
            else:
                _active.pop(key, None)
                _remove(key)


_noted: set[str] = set()  # files with a note() of this process, removed at exit


def note(db_path: str | os.PathLike[str], what: str) -> None:
    """Leave a note for a hold whose end this package does not see (a reader handed to the
    user): it stays until the process ends (removed at exit) or takes another note."""
    key = os.path.abspath(os.fspath(db_path))
    with _lock:
        if not _active.get(key):
            _write(key, what)
            if not _noted:
                atexit.register(_remove_notes_at_exit)
            _noted.add(key)


def _remove_notes_at_exit() -> None:
    for key in list(_noted):
        _remove(key)
        remove_spool_if_empty(key)


def remove_stale_notes(db_path: str | os.PathLike[str]) -> int:
    """Delete the notes of processes that are gone (killed before they could); returns how many."""
    folder = os.path.dirname(_note_path(os.fspath(db_path), 0))
    try:
        entries = os.listdir(folder)
    except OSError:
        return 0
    removed = 0
    for entry in entries:
        pid = _note_pid(entry)
        if pid is None or pid_alive(pid):
            continue
        try:
            os.remove(os.path.join(folder, entry))
            removed += 1
        except OSError:
            pass
    return removed


def describe_holder(db_path: str | os.PathLike[str], pid: int | None) -> str | None:
    """``"agent-rl score, for 12 s"`` from the note of process ``pid``, or ``None``."""
    if pid is None or not pid_alive(pid):
        return None
    try:
        with open(_note_path(os.fspath(db_path), pid)) as handle:
            data = json.load(handle)
        what, since = str(data["what"]), float(data["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return f"{what}, for {max(0.0, time.time() - since):.0f} s"


WAIT_SUFFIX = ".wait"


def _wait_note_path(db_path: str) -> str:
    folder = os.path.dirname(_note_path(db_path, 0))
    return os.path.join(folder, f"{os.getpid()}.{threading.get_ident()}{WAIT_SUFFIX}")


@contextmanager
def waiting(db_path: str | os.PathLike[str]) -> Iterator[None]:
    """Keep a note that this thread waits for ``db_path``'s lock while the block runs. Only a
    database with a spool folder gets one (only a recording process's merger reads them): a
    reader never creates the spool folder."""
    key = os.path.abspath(os.fspath(db_path))
    name = os.path.basename(_wait_note_path(key))
    folder = _notes_folder(key)
    if folder is not None:
        try:
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=folder))
        except OSError:
            os.close(folder)
            folder = None
    try:
        yield
    finally:
        if folder is not None:
            try:
                os.remove(name, dir_fd=folder)
            except OSError:
                pass
            os.close(folder)


def someone_waiting(db_path: str | os.PathLike[str]) -> bool:
    """True when a live process (this one included) waits for ``db_path``'s lock (:func:`waiting`)."""
    folder = os.path.dirname(_note_path(os.fspath(db_path), 0))
    try:
        entries = os.listdir(folder)
    except OSError:
        return False
    for entry in entries:
        if entry.endswith(WAIT_SUFFIX):
            pid = _note_pid(entry)
            if pid is not None and pid_alive(pid):
                return True
    return False
