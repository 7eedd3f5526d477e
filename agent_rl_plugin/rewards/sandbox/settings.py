"""The sandbox's fixed settings and the limits of one run (shared by its modules; no logic)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The unprivileged user and group the code runs as when this process is root.
SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: ``RLIMIT_NOFILE`` of the code.
MAX_OPEN_FILES = 128
#: Size of each throw-away tmpfs mounted over a world-writable directory (MiB).
SCRATCH_MB = 4
#: World-writable directories hidden behind a private tmpfs (in the mount namespace).
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/shm")
#: Interpreters tried, after ``$AGENT_RL_SANDBOX_PYTHON`` and ``sys.executable``.
PYTHON_CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
#: Seconds to wait for the last output after the code ended, and for a killed group to go.
_GRACE_S = 0.5
_REAP_S = 5.0
_SETUP_FAILED = 121
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

NetworkMechanism = Literal["auto", "netns", "audit-hook"]


@dataclass(frozen=True)
class _Limits:
    timeout_s: float
    cpu_s: int
    memory_mb: int
    max_processes: int
    max_file_mb: int
    max_disk_mb: int
    max_output_bytes: int
