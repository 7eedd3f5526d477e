"""Whether a process named in a file of this package (a holder note, a receiver's announcement,
a port entry) still runs.

Contract: :func:`pid_alive` is ``False`` only when no process has that id; a process of
another user (``PermissionError``) or any other doubt counts as alive, so a file is never
treated as stale while its writer may still run.
"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True unless no process ``pid`` exists (signal 0 probes it; nothing is sent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
