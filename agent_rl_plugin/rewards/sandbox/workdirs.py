"""The runs' temporary working directories: where they go (:func:`_workdir_base`), and the sweep
that removes the ones a killed caller left behind (:func:`sweep_stale_workdirs`).

A working directory is ``arl-sandbox-*`` under the base; its run holds an ``flock`` on it while
in use, so the sweep never touches a directory in use.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time

from .settings import SANDBOX_UID

_WORKDIR_PREFIX = "arl-sandbox-"
#: Working directories left unlocked this long (seconds) are removed by the sweep.
STALE_AFTER_S = 300.0


def _workdir_base(dropping_privileges: bool) -> str:
    """Where working directories go: ``/tmp`` when dropping privileges (the sandbox user must be
    able to reach it; ``$TMPDIR`` may be inside a directory only the caller can enter), else
    the usual temporary directory."""
    if dropping_privileges and os.path.isdir("/tmp"):
        return "/tmp"
    return tempfile.gettempdir()


def sweep_stale_workdirs(min_age_s: float = STALE_AFTER_S) -> int:
    """Remove working directories that their run left behind: a caller killed with SIGKILL (a
    scoring worker at its timeout) cannot clean up. A directory in use is locked (``flock``,
    released by the kernel when its process dies) and is never touched; only unlocked ones not
    modified for ``min_age_s`` go. Runs once per process with the probe; returns the count."""
    removed = 0
    now = time.time()
    bases = {_workdir_base(os.geteuid() == 0), tempfile.gettempdir()}
    for base in bases:
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.startswith(_WORKDIR_PREFIX):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (
                not stat.S_ISDIR(info.st_mode)
                or now - info.st_mtime < min_age_s
                or info.st_uid not in (os.geteuid(), SANDBOX_UID)
            ):
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # in use
            try:
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += not os.path.exists(entry.path)
            finally:
                os.close(fd)
    return removed
