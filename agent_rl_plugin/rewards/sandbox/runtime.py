"""Choosing the isolation, once per process and interpreter: :func:`_runtime` probes the
interpreters (``$AGENT_RL_SANDBOX_PYTHON``, ``sys.executable``, :data:`~.settings.PYTHON_CANDIDATES`)
with the strongest namespaces first (``unshare``; in a user namespace when not root), keeps
the first that really runs the probe program (a :class:`_Runtime`), or remembers why none did
and raises :class:`~.result.SandboxError` on every later call. :func:`sandbox_info` reports it.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading

from .isolation import _Runtime
from .process import _execute
from .result import SandboxError
from .settings import PYTHON_CANDIDATES, SANDBOX_GID, SANDBOX_UID, _Limits
from .workdirs import sweep_stale_workdirs

_RUNTIMES: dict[str | None, _Runtime] = {}
_RUNTIME_ERRORS: dict[str | None, str] = {}
_RUNTIME_LOCK = threading.Lock()
_PROBE = (
    "import fractions, difflib, textwrap, json\n"
    "with open('probe.txt', 'w') as f:\n"
    "    f.write('ok')\n"
    "print(open('probe.txt').read())\n"
)


def _python_candidates(python: str | None) -> list[str]:
    if python is not None:
        return [python]
    names = [os.environ.get("AGENT_RL_SANDBOX_PYTHON"), sys.executable, getattr(sys, "_base_executable", None)]
    names += list(PYTHON_CANDIDATES)
    seen: set[str] = set()
    found = []
    for name in names:
        if not name or not os.path.isfile(name) or not os.access(name, os.X_OK):
            continue
        real = os.path.realpath(name)
        if real not in seen:
            seen.add(real)
            found.append(name)
    return found


def _levels() -> list[tuple[str, ...]]:
    if os.geteuid() == 0:
        return [("net", "pid", "mount"), ("net",), ()]
    return [("user", "net", "pid", "mount"), ("user", "net"), ()]


def _runtime(python: str | None) -> _Runtime:
    with _RUNTIME_LOCK:
        if python in _RUNTIMES:
            return _RUNTIMES[python]
        if python in _RUNTIME_ERRORS:
            raise SandboxError(_RUNTIME_ERRORS[python])
        unshare = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin")
        root = os.geteuid() == 0
        uid, gid = (SANDBOX_UID, SANDBOX_GID) if root else (None, None)
        failures = []
        for namespaces in _levels():
            if namespaces and unshare is None:
                continue
            for candidate in _python_candidates(python):
                runtime = _Runtime(candidate, unshare if namespaces else None, namespaces, uid, gid)
                try:
                    result = _execute(
                        runtime,
                        _PROBE,
                        _Limits(
                            timeout_s=30.0,
                            cpu_s=30,
                            memory_mb=256,
                            max_processes=64,
                            max_file_mb=1,
                            max_disk_mb=8,
                            max_output_bytes=4096,
                        ),
                        isolate_network=True,
                        audit_network=True,
                        stdin=None,
                    )
                except SandboxError as exc:
                    failures.append(f"{candidate} {'+'.join(namespaces) or 'no namespaces'}: {exc}")
                    continue
                if result.exit_code == 0 and result.stdout.strip() == "ok":
                    _RUNTIMES[python] = runtime
                    sweep_stale_workdirs()
                    return runtime
                failures.append(f"{candidate} {'+'.join(namespaces) or 'no namespaces'}: {result.reason}")
        who = f"uid {uid}" if root else "this user"
        message = (
            f"no Python interpreter can run sandboxed code as {who} (set AGENT_RL_SANDBOX_PYTHON to one whose "
            f"standard library that user can read, e.g. /usr/bin/python3): " + "; ".join(failures[-6:])
        )
        _RUNTIME_ERRORS[python] = message
        raise SandboxError(message)


def sandbox_info(python: str | None = None, *, network: bool = False) -> dict:
    """What :func:`run_python` uses here: interpreter, namespaces, uid. Runs the probe (once per
    process; about 0.1 s) if it has not run yet; raises :class:`SandboxError` when no
    interpreter works."""
    return _runtime(python).describe(not network)
