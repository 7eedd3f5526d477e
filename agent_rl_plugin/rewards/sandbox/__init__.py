"""Run untrusted Python code in a separate, contained process: :func:`run_python`.

The code really runs, in a fresh interpreter, with these layers (each one is tested in
``tests/test_sandbox.py``):

* **Separate process, scrubbed environment.** The child gets only ``PATH``, ``LANG``,
  ``HOME`` and ``TMPDIR`` (both the temporary working directory): no secret of the parent's
  environment (``OPENAI_API_KEY`` ...) is visible. stdin is ``/dev/null`` unless ``stdin`` text
  is given (then an open file whose name is removed before the code starts: it cannot be
  reopened by path). The interpreter runs with ``-I -S -B``: isolated mode (``PYTHON*`` variables, the
  user site directory and the script directory are ignored) and no ``site`` module, so no
  ``site-packages`` (only the standard library can be imported) and no ``.pth`` files. ``-S``
  also removes the ``exit``/``quit`` builtins that ``site`` defines; the launcher puts them back,
  because model-written code calls them.
* **A launcher, no ``preexec_fn``.** ``subprocess.Popen`` starts ``python -I -S -B -c LAUNCHER``
  (through ``unshare``, below) in a new session; the launcher (``launcher_script.py`` in this
  package) mounts, drops privileges, forks the *user process* (which sets the rlimits, installs
  the audit hook and ``exec``\\ s the code compiled from ``main.py`` in the working directory)
  and stays as its *supervisor*. ``preexec_fn`` is not used because it is not safe in a parent
  with threads (the scoring runner and the exporters have threads).
* **Namespaces** (when available, decided once per process by a probe run, see
  :func:`sandbox_info`): ``unshare --net --pid --fork --kill-child --mount-proc`` (util-linux;
  not root: the same inside ``--user --map-root-user``, where the launcher then drops every
  capability). The new *network* namespace has only a loopback interface, which is down: every
  connection fails, even to ``127.0.0.1``. The *PID* namespace makes the supervisor its init:
  when the supervisor exits (the user process ended) or is killed (timeout), the kernel kills
  every process left in it, including ones that left the process group with ``setsid()``. The
  private *mount* namespace gets fresh small ``tmpfs`` mounts over the world-writable
  directories (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock``) and a ``max_disk_mb``
  ``tmpfs`` as the working directory (at the same path), so even a write that gets around the
  audit hook lands in a throw-away file system.
* **Unprivileged user.** Running as root, the launcher drops to ``SANDBOX_UID``/``SANDBOX_GID``
  (65534, nobody/nogroup) with no supplementary groups and sets ``PR_SET_NO_NEW_PRIVS`` (set-uid
  programs cannot raise privileges again). This is what makes the project directory, ``$HOME``
  and the rest of the file system read-only for the code, and what makes ``RLIMIT_NPROC``
  effective (the kernel does not apply it to root). The interpreter must be readable by that
  user: the probe picks the first of ``$AGENT_RL_SANDBOX_PYTHON``, ``sys.executable`` and
  ``/usr/bin/python3`` (etc.) that works (a pyenv interpreter under ``/root`` does not).
* **rlimits** in the user process: ``RLIMIT_CPU`` (soft ``cpu_s``: SIGXCPU, then SIGKILL one
  second later), ``RLIMIT_AS`` (``memory_mb``: allocations fail with ``MemoryError``),
  ``RLIMIT_NPROC`` (``max_processes``), ``RLIMIT_FSIZE`` (``max_file_mb``: ``OSError: File too
  large``), ``RLIMIT_NOFILE`` (:data:`MAX_OPEN_FILES`) and ``RLIMIT_CORE = 0``; it also runs at
  ``nice`` 10, so the caller stays responsive.
* **Audit hook** (:pep:`578`), installed in the user process before its code runs: refuses
  ``open`` for writing/creating, ``os.remove``/``rename``/``mkdir``/``rmdir``/``chmod``/
  ``symlink``/``link``/``utime``/``truncate``..., ``shutil`` and ``sqlite3.connect`` outside
  the working directory (after resolving symlinks); running other programs (``os.system``,
  ``subprocess``, ``os.exec*``, ``os.posix_spawn``); ``ctypes``; signals to processes outside
  its own process group; and, with ``network=False``, ``socket.connect``/``bind``/``sendto``
  and name resolution. It is the only network barrier where namespaces are unavailable
  (``SandboxResult.network_mechanism`` says which was used).
* **Wall-clock timeout, killed as a whole.** The parent reads stdout/stderr (each capped to
  ``max_output_bytes``, keeping the head and the tail) with its own deadline; at
  ``timeout_s`` it SIGKILLs the namespace's init (the whole PID namespace dies) and the process
  group, then reaps, every wait bounded: a run cannot hang the caller. The supervisor is a
  *child subreaper*: after the code ends (or is stopped) it kills every descendant left, even
  in another session, which also covers the case without a PID namespace. A pipe from the
  parent (the *lifeline*) tells the supervisor when the caller died (e.g. a scoring worker
  killed at its own timeout, which cannot reach this new session): it kills the code at once.

Limits: reads are not restricted (the code can read every world-readable file, such as the
project's sources). ``RLIMIT_NPROC`` counts *all* processes of the sandbox uid on the machine:
concurrent sandboxes, or anything else running as nobody, share the budget (a fork bomb in one
sandbox makes ``fork`` fail in a concurrent one; a busy nobody daemon lowers it). ``RLIMIT_AS``
limits virtual memory (each thread reserves its stack, so many threads fail early); tmpfs pages
are not counted in it. The audit hook is *not* a security boundary: Python code can tamper with
it (frames reach the launcher's state, modules can be monkeypatched), crafted bytecode,
``_posixsubprocess`` or C extensions that open files themselves (``dbm``) get around it, and
``os.open(..., dir_fd=...)`` is not checked (its audit event has no ``dir_fd``); the uid, the
namespaces and the rlimits are the boundary. Without namespaces (not root and no user
namespaces), writes to world-writable directories (``/tmp``) and network access are stopped
only by the audit hook, and without the uid drop (not root) nothing but the hook keeps the
code from the caller's files. Without the mount namespace the working directory is on disk:
only ``RLIMIT_FSIZE`` (per file) and the timeout bound what the code writes there. Output
still buffered in the process when it is killed is lost.

The package, one job per module: :mod:`.run` (:func:`run_python`: arguments, network mechanism),
:mod:`.runtime` (probing the interpreter and the namespaces once per process,
:func:`sandbox_info`), :mod:`.isolation` (the interpreter and namespaces chosen),
:mod:`.process` (one run: start, read, kill, reap, report), :mod:`.streams` (capped output,
reading the pipes), :mod:`.workdirs` (working directories and :func:`sweep_stale_workdirs`),
:mod:`.launcher_script` (the child side, run as a script, never imported), :mod:`.result` and
:mod:`.settings`.
"""

from __future__ import annotations

from .result import SandboxError, SandboxResult
from .run import run_python
from .runtime import sandbox_info
from .settings import (
    MAX_OPEN_FILES,
    PYTHON_CANDIDATES,
    SANDBOX_GID,
    SANDBOX_UID,
    SCRATCH_DIRS,
    SCRATCH_MB,
    NetworkMechanism,
)
from .workdirs import STALE_AFTER_S, sweep_stale_workdirs

__all__ = ["SANDBOX_GID", "SANDBOX_UID", "SandboxError", "SandboxResult", "run_python", "sandbox_info"]
