"""Run untrusted Python code in a separate, contained process: :func:`run_python`.

The code really runs, in a fresh interpreter, with these layers (each one is tested in
``tests/test_sandbox.py``):

* **Separate process, scrubbed environment.** The child gets only ``PATH``, ``LANG``,
  ``HOME`` and ``TMPDIR`` (both the temporary working directory): no secret of the parent's
  environment (``OPENAI_API_KEY`` ...) is visible. stdin is ``/dev/null`` unless ``stdin`` text
  is given. The interpreter runs with ``-I -S -B``: isolated mode (``PYTHON*`` variables, the
  user site directory and the script directory are ignored) and no ``site`` module, so no
  ``site-packages`` (only the standard library can be imported) and no ``.pth`` files. ``-S``
  also removes the ``exit``/``quit`` builtins that ``site`` defines; the launcher puts them back,
  because model-written code calls them.
* **A launcher, no ``preexec_fn``.** ``subprocess.Popen`` starts ``python -I -S -B -c LAUNCHER``
  (through ``unshare``, below) in a new session; the launcher (a few dozen lines, in this
  module) mounts, drops privileges, forks the *user process* (which sets the rlimits, installs
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
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
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


class SandboxError(RuntimeError):
    """The sandbox could not be set up (no usable interpreter, a failed mount, ...); the code did
    not run."""


@dataclass(frozen=True)
class SandboxResult:
    """What happened to one :func:`run_python` run.

    ``exit_code`` is ``None`` when the code's process was killed (``killed_by_signal`` names the
    signal, e.g. ``"SIGKILL"``) or its status is unknown. ``reason`` says it in a sentence:
    ``"exited with code 1: ZeroDivisionError: division by zero"``, ``"timed out after 5 s"``,
    ``"CPU time limit exceeded (6 s)"``, ``"MemoryError: memory limit (256 MiB) reached"``.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    killed_by_signal: str | None
    duration_s: float
    reason: str
    memory_error: bool = False
    cpu_limit_exceeded: bool = False
    cpu_time_s: float | None = None
    max_rss_mb: float | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    network_mechanism: str = "none"
    mechanisms: tuple[str, ...] = field(default_factory=tuple)
    python: str | None = None

    @property
    def ok(self) -> bool:
        """Exited with code 0 before the timeout."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def last_error_line(self) -> str | None:
        """The last non-blank line of stderr (the exception line of a traceback), if any."""
        for line in reversed(self.stderr.splitlines()):
            if line.strip() and not line.startswith("[... "):
                return line.strip()
        return None


# --------------------------------------------------------------------------------------------
# The launcher: runs as ``python -I -S -B -c _LAUNCHER <config json>`` in the child. Python 3.8+.
# --------------------------------------------------------------------------------------------

_LAUNCHER = r'''
import sys, os, json
cfg = json.loads(sys.argv[1])
status_fd = cfg["status_fd"]
lifeline_fd = cfg["lifeline_fd"]

def report(obj):
    try:
        os.write(status_fd, (json.dumps(obj) + "\n").encode())
    except OSError:
        pass

def setup_failed(message):
    report({"setup_error": message})
    os._exit(121)

try:
    import builtins, errno, resource, select, signal, time, traceback, linecache, types
    workdir = cfg["workdir"]
    uid, gid = cfg["uid"], cfg["gid"]
    with open(os.path.join(workdir, "main.py"), "rb") as f:
        source = f.read()
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if cfg["mount"]:
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

        def mount(src, target, fstype, flags, data):
            if libc.mount(src.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                          data.encode() if data else None) != 0:
                err = ctypes.get_errno()
                raise OSError(err, "mount %s: %s" % (target, os.strerror(err)))

        MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 16384, 1 << 18
        mount("none", "/", None, MS_REC | MS_PRIVATE, None)
        for d in cfg["scratch_dirs"]:
            if os.path.isdir(d) and not os.path.islink(d):
                mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=%dm" % cfg["scratch_mb"])
        os.makedirs(workdir, exist_ok=True)
        options = "mode=0700,size=%dm" % cfg["disk_mb"]
        if uid is not None:
            options += ",uid=%d,gid=%d" % (uid, gid)
        mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, options)
        with open(os.path.join(workdir, "main.py"), "wb") as f:
            f.write(source)
        if uid is not None:
            os.chown(os.path.join(workdir, "main.py"), uid, gid)
    os.chdir(workdir)
    if uid is not None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid) or os.getgroups() not in ([], [gid]):
            setup_failed("could not drop privileges to %d:%d" % (uid, gid))
        try:
            os.setuid(0)
        except OSError:
            pass
        else:
            setup_failed("could get root back after dropping privileges")
    if cfg["drop_caps"]:
        # root of a user namespace (not root outside it): give up every capability for good
        SECBIT_NOROOT, SECBIT_NOROOT_LOCKED, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_SETUID_FIXUP_LOCKED = 1, 2, 4, 8
        if libc.prctl(28, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED, 0, 0, 0) != 0:
            setup_failed("prctl(PR_SET_SECUREBITS) failed: %s" % os.strerror(ctypes.get_errno()))
        for cap in range(64):
            if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:  # PR_CAPBSET_DROP
                setup_failed("prctl(PR_CAPBSET_DROP) failed: %s" % os.strerror(ctypes.get_errno()))
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        if libc.capset(header, data) != 0:
            setup_failed("capset failed: %s" % os.strerror(ctypes.get_errno()))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        setup_failed("prctl(PR_SET_NO_NEW_PRIVS) failed: %s" % os.strerror(ctypes.get_errno()))
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the code come to the supervisor
    # no ctypes left for the code: not in sys.modules, not in these globals (frames reach them)
    del libc, ctypes
    if cfg["mount"]:
        del mount
    for name in [m for m in sys.modules if m in ("ctypes", "_ctypes") or m.startswith("ctypes.")]:
        del sys.modules[name]
    import gc
    gc.collect()
except SystemExit:
    raise
except BaseException as exc:
    setup_failed("%s: %s" % (type(exc).__name__, exc))

try:
    child = os.fork()
except OSError as exc:
    setup_failed("fork: %s" % exc)

def children():
    me = os.getpid()
    try:
        with open("/proc/%d/task/%d/children" % (me, me)) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == str(me):
                        found.append(int(entry))
            except (OSError, IndexError):
                pass
    return found

def kill_descendants():
    """SIGKILL every process the code left, even in another session: as a subreaper the
    supervisor adopts the orphans of its descendants, so killing its children level by level
    reaches them all."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        kids = children()
        if not kids:
            break
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        for kid in kids:
            try:
                os.waitpid(kid, 0)
            except OSError:
                pass
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except OSError:
        pass

if child:
    # ---- the supervisor: waits for the user process (or the caller's death), reports ----
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        pidfd = os.pidfd_open(child)
    except (AttributeError, OSError):
        pidfd = None
    while True:
        watch = [lifeline_fd] + ([pidfd] if pidfd is not None else [])
        ready = select.select(watch, [], [], None if pidfd is not None else 0.05)[0]
        if lifeline_fd in ready:  # the caller is gone or gave up (timeout): kill everything now
            try:
                kill_descendants()
            finally:
                os._exit(1)
        pid, status, usage = os.wait4(child, os.WNOHANG)
        if pid == child:
            break
    result = {"cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss}
    if os.WIFSIGNALED(status):
        result["signal"] = os.WTERMSIG(status)
    else:
        result["exit_code"] = os.WEXITSTATUS(status)
    report(result)
    kill_descendants()
    os._exit(0)

# ---- the user process ----
try:
    for name, limits in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), tuple(limits))
    if cfg["nice"]:
        os.nice(cfg["nice"])
except BaseException as exc:
    setup_failed("rlimits: %s: %s" % (type(exc).__name__, exc))
os.close(status_fd)
os.close(lifeline_fd)

WORK = os.path.realpath(workdir)
MAIN = os.path.join(WORK, "main.py")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
DEVICES = ("/dev/null", "/dev/stdout", "/dev/stderr")
BLOCKED_MODULES = ("ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_xxsubinterpreters")

def _deny(what, path=None):
    if path is None:
        raise PermissionError(errno.EACCES, "sandbox: %s is not allowed" % what)
    raise PermissionError(errno.EACCES, "sandbox: %s outside the working directory is not allowed" % what, path)

def _outside(path, dir_fd=None):
    """The resolved path when it is outside the working directory, else None."""
    if path is None or isinstance(path, int):
        return None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    elif not isinstance(path, str):
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
    if path in DEVICES:
        return None
    if os.path.isabs(path):
        base = "/"
    elif isinstance(dir_fd, int) and dir_fd >= 0:
        try:
            base = os.readlink("/proc/self/fd/%d" % dir_fd)
        except OSError:
            return path
    else:
        base = os.getcwd()
    full = os.path.realpath(os.path.join(base, path))
    if full == WORK or full.startswith(WORK + os.sep):
        return None
    return full

def _check(what, path, dir_fd=None):
    outside = _outside(path, dir_fd)
    if outside is not None:
        _deny(what, outside)

def _on_open(args):
    path, mode, flags = args[0], args[1], args[2]
    writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        isinstance(flags, int) and flags & WRITE_FLAGS)
    if writing:
        _check("writing", path)

def _dir_fd(args, index):
    return args[index] if len(args) > index else None

def _on_kill(args):
    pid = args[0]
    if pid == 0 or pid == os.getpid():
        return
    if pid == -1:
        _deny("signalling every process")
    try:
        group = -pid if pid < 0 else os.getpgid(pid)
    except OSError:
        return
    if group != os.getpgrp():
        _deny("signalling a process outside the sandbox")

def _on_killpg(args):
    if args[0] not in (0, os.getpgrp()):
        _deny("signalling a process group outside the sandbox")

def _on_import(args):
    if args[0] in BLOCKED_MODULES:
        raise ImportError("sandbox: module %s is not available" % args[0])

def _on_program(args):
    _deny("running other programs")

def _on_network(args):
    _deny("network access")

def _on_sqlite(args):
    database = args[0]
    if isinstance(database, str) and (database == ":memory:" or database == ""):
        return
    if isinstance(database, str) and database.startswith("file:"):
        _deny("opening a database by URI")
    _check("writing", database)

HANDLERS = types.MappingProxyType({
    "open": _on_open,
    "os.chmod": lambda a: _check("chmod", a[0], _dir_fd(a, 2)),
    "os.chown": lambda a: _check("chown", a[0], _dir_fd(a, 3)),
    "os.chflags": lambda a: _check("chflags", a[0]),
    "os.lchflags": lambda a: _check("chflags", a[0]),
    "os.link": lambda a: _check("link", a[1], _dir_fd(a, 3)),
    "os.mkdir": lambda a: _check("mkdir", a[0], _dir_fd(a, 2)),
    "os.mkfifo": lambda a: _check("mkfifo", a[0], _dir_fd(a, 2)),
    "os.mknod": lambda a: _check("mknod", a[0], _dir_fd(a, 3)),
    "os.remove": lambda a: _check("remove", a[0], _dir_fd(a, 1)),
    "os.rename": lambda a: (_check("rename", a[0], _dir_fd(a, 2)), _check("rename", a[1], _dir_fd(a, 3))),
    "os.rmdir": lambda a: _check("rmdir", a[0], _dir_fd(a, 1)),
    "os.symlink": lambda a: _check("symlink", a[1], _dir_fd(a, 2)),
    "os.truncate": lambda a: _check("truncate", a[0]),
    "os.utime": lambda a: _check("utime", a[0], _dir_fd(a, 3)),
    "os.setxattr": lambda a: _check("setxattr", a[0]),
    "os.removexattr": lambda a: _check("removexattr", a[0]),
    "shutil.copyfile": lambda a: _check("copying", a[1]),
    "shutil.copymode": lambda a: _check("copying", a[1]),
    "shutil.copystat": lambda a: _check("copying", a[1]),
    "shutil.copytree": lambda a: _check("copying", a[1]),
    "shutil.move": lambda a: (_check("moving", a[0]), _check("moving", a[1])),
    "shutil.chown": lambda a: _check("chown", a[0]),
    "shutil.rmtree": lambda a: _check("rmtree", a[0], _dir_fd(a, 1)),
    "shutil.make_archive": lambda a: _check("writing", a[0]),
    "shutil.unpack_archive": lambda a: _check("writing", a[1] if a[1] is not None else "."),
    "tempfile.mkstemp": lambda a: _check("writing", a[0]),
    "tempfile.mkdtemp": lambda a: _check("writing", a[0]),
    "sqlite3.connect": _on_sqlite,
    "os.system": _on_program,
    "os.exec": _on_program,
    "os.posix_spawn": _on_program,
    "os.spawn": _on_program,
    "subprocess.Popen": _on_program,
    "os.kill": _on_kill,
    "os.killpg": _on_killpg,
    "import": _on_import,
    **({event: _on_network for event in (
        "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
        "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr", "socket.getnameinfo",
    )} if cfg["block_network"] else {}),
})

def _audit(event, args, _get=HANDLERS.get):
    handler = _get(event)
    if handler is not None:
        handler(args)
    elif event.startswith("ctypes."):
        _deny("ctypes")

class _Quitter(object):
    def __init__(self, name):
        self.name = name
    def __repr__(self):
        return "Use %s() or Ctrl-D (i.e. EOF) to exit" % self.name
    def __call__(self, code=None):
        raise SystemExit(code)

builtins.exit = _Quitter("exit")
builtins.quit = _Quitter("quit")
main = types.ModuleType("__main__")
main.__file__ = MAIN
main.__builtins__ = builtins
sys.modules["__main__"] = main
sys.argv = [MAIN]
sys.path.insert(0, WORK)
try:
    code = compile(source, MAIN, "exec", dont_inherit=True)
except (SyntaxError, ValueError) as exc:
    traceback.print_exception(type(exc), exc, None)
    sys.stderr.flush()
    os._exit(1)
audit = cfg["audit"]
del source, cfg
if audit:
    sys.addaudithook(_audit)
try:
    exec(code, main.__dict__)
except SystemExit:
    raise
except BaseException as exc:
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.exit(1)
'''


# --------------------------------------------------------------------------------------------
# Choosing the isolation once per process
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Runtime:
    python: str
    unshare: str | None
    namespaces: tuple[str, ...]  # of "user", "net", "pid", "mount"
    uid: int | None
    gid: int | None

    def command(self, isolate_network: bool) -> list[str]:
        if self.unshare is None:
            return []
        flags: list[str] = []
        if "net" in self.namespaces and isolate_network:
            flags.append("--net")
        if "pid" in self.namespaces:
            flags += ["--pid", "--fork", "--kill-child", "--mount-proc"]
        if not flags:
            return []
        if "user" in self.namespaces:
            flags = ["--user", "--map-root-user", *flags]
        return [self.unshare, *flags, "--"]

    def describe(self, isolate_network: bool) -> dict:
        used = set(self.namespaces) if self.command(isolate_network) else set()
        if not isolate_network:
            used.discard("net")
        return {
            "python": self.python,
            "namespaces": sorted(used - {"user"}),
            "user_namespace": "user" in used,
            "uid": self.uid,
            "gid": self.gid,
        }


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
                    result = _execute(runtime, _PROBE, _Limits(timeout_s=30.0, cpu_s=30, memory_mb=256,
                                                               max_processes=64, max_file_mb=1,
                                                               max_disk_mb=8, max_output_bytes=4096),
                                      isolate_network=True, audit_network=True, stdin=None)
                except SandboxError as exc:
                    failures.append(f"{candidate} {'+'.join(namespaces) or 'no namespaces'}: {exc}")
                    continue
                if result.exit_code == 0 and result.stdout.strip() == "ok":
                    _RUNTIMES[python] = runtime
                    sweep_stale_workdirs()
                    return runtime
                failures.append(
                    f"{candidate} {'+'.join(namespaces) or 'no namespaces'}: {result.reason}"
                )
        who = f"uid {uid}" if root else "this user"
        message = (
            f"no Python interpreter can run sandboxed code as {who} (set AGENT_RL_SANDBOX_PYTHON to one whose "
            f"standard library that user can read, e.g. /usr/bin/python3): " + "; ".join(failures[-6:])
        )
        _RUNTIME_ERRORS[python] = message
        raise SandboxError(message)


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
            if (not stat.S_ISDIR(info.st_mode) or now - info.st_mtime < min_age_s
                    or info.st_uid not in (os.geteuid(), SANDBOX_UID)):
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


def sandbox_info(python: str | None = None, *, network: bool = False) -> dict:
    """What :func:`run_python` uses here: interpreter, namespaces, uid. Runs the probe (once per
    process; about 0.1 s) if it has not run yet; raises :class:`SandboxError` when no
    interpreter works."""
    return _runtime(python).describe(not network)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Limits:
    timeout_s: float
    cpu_s: int
    memory_mb: int
    max_processes: int
    max_file_mb: int
    max_disk_mb: int
    max_output_bytes: int


class _Capped:
    """Bytes of one stream: all of them up to ``limit``, else the head and the tail."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.limit:
            take = data[: self.limit - len(self.head)]
            self.head += take
            data = data[len(take):]
        if data:
            self.tail += data
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        if not self.truncated:
            return self.head.decode("utf-8", "replace")
        half = self.limit // 2
        head = bytes(self.head[:half])
        tail = bytes((self.head + self.tail)[-(self.limit - half):])
        cut = self.total - len(head) - len(tail)
        return head.decode("utf-8", "replace") + f"\n[... {cut} bytes cut ...]\n" + tail.decode("utf-8", "replace")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _children(pid: int) -> list[int]:
    """Process ids of ``pid``'s children (``/proc/PID/task/PID/children``, else a /proc scan)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 1 and fields[1] == str(pid):
                found.append(int(entry))
    return found


def _kill(proc: subprocess.Popen, pid_namespace: bool, lifeline: int | None) -> None:
    """SIGKILL what is left of the code, then its process group, and leave it to be reaped.

    With a PID namespace, the namespace's init (``unshare``'s child, the supervisor) is killed
    first, so that ``unshare`` (still alive) reaps it (killed first, it would leave the init a
    zombie for the machine's init to reap) and the kernel kills the rest of the namespace.
    Without one, closing the lifeline tells the supervisor to kill every descendant (it is their
    subreaper, so this reaches processes that left the group with ``setsid()``), given
    ``_GRACE_S``. Then the process group, while its leader is not reaped (so its id is still
    its own)."""
    if lifeline is not None:
        os.close(lifeline)
    if pid_namespace:
        if proc.poll() is None:
            for child in _children(proc.pid):
                try:
                    os.kill(child, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(timeout=_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
    else:
        deadline = time.monotonic() + _GRACE_S
        while time.monotonic() < deadline:
            try:
                done = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if done is not None:
                break
            time.sleep(0.005)
    if proc.returncode is None:
        _kill_group(proc.pid)


def _execute(
    runtime: _Runtime,
    code: str,
    limits: _Limits,
    *,
    isolate_network: bool,
    audit_network: bool,
    stdin: str | bytes | None,
    audit: bool = True,
) -> SandboxResult:
    prefix = runtime.command(isolate_network)
    namespaces = set(runtime.namespaces) if prefix else set()
    if not isolate_network:
        namespaces.discard("net")
    mount = "mount" in namespaces
    workdir = tempfile.mkdtemp(prefix=_WORKDIR_PREFIX, dir=_workdir_base(runtime.uid is not None))
    # locked while in use: a caller killed before its clean-up leaves it unlocked for the sweep
    fds: list[int] = [os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)]
    fcntl.flock(fds[0], fcntl.LOCK_EX)
    proc: subprocess.Popen | None = None
    stdin_file = None
    try:
        main_path = os.path.join(workdir, "main.py")
        with open(main_path, "wb") as f:
            f.write(code.encode("utf-8", "surrogateescape"))
        os.chmod(main_path, 0o644)
        if stdin is not None:
            stdin_path = os.path.join(workdir, ".stdin")
            with open(stdin_path, "wb") as f:
                f.write(stdin.encode() if isinstance(stdin, str) else bytes(stdin))
            stdin_file = open(stdin_path, "rb")
        if runtime.uid is not None and not mount:
            os.chown(workdir, runtime.uid, runtime.gid)
        status_r, status_w = os.pipe()
        life_r, life_w = os.pipe()
        fds += [status_r, status_w, life_r, life_w]
        rlimits = {
            "RLIMIT_CPU": [limits.cpu_s, limits.cpu_s + 1],
            "RLIMIT_AS": [limits.memory_mb * 2**20] * 2,
            "RLIMIT_NPROC": [limits.max_processes] * 2,
            "RLIMIT_FSIZE": [limits.max_file_mb * 2**20] * 2,
            "RLIMIT_NOFILE": [MAX_OPEN_FILES] * 2,
            "RLIMIT_CORE": [0, 0],
        }
        scratch = [d for d in dict.fromkeys([*SCRATCH_DIRS, tempfile.gettempdir()])]
        config = {
            "workdir": workdir,
            "uid": runtime.uid,
            "gid": runtime.gid,
            "mount": mount,
            "scratch_dirs": scratch,
            "scratch_mb": SCRATCH_MB,
            "disk_mb": limits.max_disk_mb,
            "rlimits": rlimits,
            "nice": 10,
            "drop_caps": "user" in namespaces,
            "block_network": audit_network,
            "audit": audit,
            "status_fd": status_w,
            "lifeline_fd": life_r,
        }
        env = {"PATH": _SYSTEM_PATH, "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir}
        command = [*prefix, runtime.python, "-I", "-S", "-B", "-c", _LAUNCHER, json.dumps(config)]
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                command,
                stdin=stdin_file if stdin_file is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                pass_fds=(status_w, life_r),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise SandboxError(f"could not start {command[0]}: {exc}") from exc
        os.close(status_w)
        os.close(life_r)
        fds.remove(status_w)
        fds.remove(life_r)

        out, err, status = _Capped(limits.max_output_bytes), _Capped(limits.max_output_bytes), bytearray()
        reader = _Reader({proc.stdout.fileno(): out, proc.stderr.fileno(): err}, status_r, status)
        try:
            timed_out = reader.read_until(start + limits.timeout_s)
            # the code ended (or ran out of time): kill whatever is left of it, then reap
            fds.remove(life_w)
            _kill(proc, "pid" in namespaces, life_w)
            reader.read_until(time.monotonic() + _GRACE_S, grace=False)
        finally:
            reader.close()
        try:
            proc.wait(timeout=_REAP_S)
        except subprocess.TimeoutExpired:
            pass  # an unkillable (D state) process: Popen reaps it later
        duration = time.monotonic() - start
    finally:
        # on the normal path everything is done already; after an exception (even
        # KeyboardInterrupt) this still kills, reaps (with a bound) and cleans up
        for fd in fds:  # closing the lifeline tells the supervisor to kill the code
            try:
                os.close(fd)
            except OSError:
                pass
        if proc is not None:
            if proc.returncode is None:
                _kill(proc, "pid" in namespaces, None)
                try:
                    proc.wait(timeout=_REAP_S)
                except subprocess.TimeoutExpired:
                    pass
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        if stdin_file is not None:
            stdin_file.close()
        shutil.rmtree(workdir, ignore_errors=True)

    report: dict = {}
    for line in bytes(status).decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            if "setup_error" in item and "setup_error" not in report:
                report["setup_error"] = item["setup_error"]
            else:
                report.update({k: v for k, v in item.items() if k != "setup_error"})
    if "setup_error" in report:
        raise SandboxError(f"sandbox setup failed: {report['setup_error']}")
    if not report and not timed_out and proc.returncode not in (None, 0) and proc.returncode > 0:
        # the launcher died before reporting anything: an interpreter that cannot start
        raise SandboxError(f"sandbox did not start (exit code {proc.returncode}): {err.text().strip()[-300:]}")

    mechanisms = []
    if runtime.uid is not None:
        mechanisms.append(f"uid:{runtime.uid}")
    mechanisms += sorted(namespaces - {"user"})
    if "user" in namespaces:
        mechanisms.append("userns")
    mechanisms += ["rlimits", "audit-hook" if audit else "no-audit-hook"]
    if not isolate_network and not audit_network:
        network_mechanism = "none (network allowed)"
    elif "net" in namespaces and audit_network:
        network_mechanism = "netns+audit-hook"
    elif "net" in namespaces:
        network_mechanism = "netns"
    else:
        network_mechanism = "audit-hook"

    exit_code = report.get("exit_code")
    signal_number = report.get("signal")
    if timed_out:
        exit_code, signal_number = None, signal.SIGKILL
    elif exit_code is None and signal_number is None and proc.returncode is not None:
        if proc.returncode < 0:
            signal_number = -proc.returncode
        else:
            exit_code = proc.returncode
    killed_by = _signal_name(signal_number) if signal_number is not None else None
    cpu_time = report.get("cpu_s")
    cpu_exceeded = signal_number == signal.SIGXCPU or (
        signal_number == signal.SIGKILL and not timed_out and cpu_time is not None and cpu_time >= limits.cpu_s
    )
    stderr_text = err.text()
    if prefix:  # unshare's own complaint when it was killed ("unshare: sigprocmask unblock failed")
        lines = stderr_text.splitlines(keepends=True)
        while lines and lines[-1].startswith("unshare: "):
            lines.pop()
        stderr_text = "".join(lines)
    result = SandboxResult(
        exit_code=exit_code,
        stdout=out.text(),
        stderr=stderr_text,
        timed_out=timed_out,
        killed_by_signal=killed_by,
        duration_s=round(duration, 4),
        reason="",
        cpu_limit_exceeded=cpu_exceeded,
        cpu_time_s=round(cpu_time, 4) if cpu_time is not None else None,
        max_rss_mb=round(report["maxrss_kb"] / 1024, 2) if "maxrss_kb" in report else None,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        network_mechanism=network_mechanism,
        mechanisms=tuple(mechanisms),
        python=runtime.python,
    )
    last = result.last_error_line
    memory_error = bool(exit_code not in (None, 0) and last and last.split(":")[0] == "MemoryError")
    if timed_out:
        reason = f"timed out after {limits.timeout_s:g} s"
    elif cpu_exceeded:
        reason = f"CPU time limit exceeded ({limits.cpu_s} s)"
    elif killed_by is not None:
        reason = f"killed by {killed_by}"
    elif memory_error:
        reason = f"MemoryError: memory limit ({limits.memory_mb} MiB) reached"
    elif exit_code == 0:
        reason = "exited with code 0"
    else:
        reason = f"exited with code {exit_code}" + (f": {last}" if last else "")
    return replace(result, reason=reason, memory_error=memory_error)


class _Reader:
    """Reads the child's stdout, stderr and status pipes (status: the supervisor's report)."""

    def __init__(self, streams: dict[int, _Capped], status_fd: int, status: bytearray) -> None:
        self.streams = streams
        self.status_fd = status_fd
        self.status = status
        self.ended_at: float | None = None  # when the status pipe closed: the code has ended
        self.selector = selectors.DefaultSelector()
        for fd in [*streams, status_fd]:
            self.selector.register(fd, selectors.EVENT_READ)

    def read_until(self, deadline: float, *, grace: bool = True) -> bool:
        """Read until every pipe is closed or ``deadline``; True when the deadline came before
        the code ended. With ``grace``, once the code has ended its output pipes get
        ``_GRACE_S`` more (something it started may still hold them)."""
        while self.selector.get_map():
            now = time.monotonic()
            limit = deadline
            if grace and self.ended_at is not None:
                limit = min(deadline, self.ended_at + _GRACE_S)
            if now >= limit:
                return self.ended_at is None and now >= deadline
            for key, _ in self.selector.select(limit - now):
                data = os.read(key.fd, 65536)
                if data:
                    if key.fd == self.status_fd:
                        self.status += data
                    else:
                        self.streams[key.fd].add(data)
                    continue
                self.selector.unregister(key.fd)
                if key.fd == self.status_fd:
                    self.ended_at = time.monotonic()
        return False

    def close(self) -> None:
        self.selector.close()


def run_python(
    code: str,
    *,
    timeout_s: float = 5.0,
    cpu_s: float | None = None,
    memory_mb: int = 256,
    max_processes: int = 64,
    max_file_mb: int = 16,
    max_disk_mb: int = 64,
    network: bool = False,
    stdin: str | bytes | None = None,
    max_output_bytes: int = 65536,
    network_mechanism: NetworkMechanism = "auto",
    python: str | None = None,
) -> SandboxResult:
    """Run ``code`` as ``main.py`` of a fresh temporary directory in a contained interpreter.

    * ``timeout_s``: wall-clock limit; then the whole process group is killed (``timed_out``).
    * ``cpu_s``: ``RLIMIT_CPU`` per process (default ``ceil(timeout_s) + 1``).
    * ``memory_mb``: ``RLIMIT_AS`` (address space) per process.
    * ``max_processes``: ``RLIMIT_NPROC`` (counts every process of the sandbox uid).
    * ``max_file_mb``: ``RLIMIT_FSIZE``; ``max_disk_mb``: size of the working directory when it
      is a tmpfs (mount namespace available).
    * ``network``: allow network access (default False: blocked).
    * ``stdin``: text given on standard input (default: ``/dev/null``).
    * ``max_output_bytes``: stdout and stderr are each cut to this (head and tail kept).
    * ``network_mechanism``: ``"auto"`` (network namespace plus audit hook where namespaces
      work, else the audit hook alone), ``"netns"`` (the namespace alone; raises
      :class:`SandboxError` where unavailable) or ``"audit-hook"`` (the hook alone).
    * ``python``: the interpreter to use (default: probed, see :func:`sandbox_info`).

    Raises :class:`SandboxError` when the sandbox cannot be set up (the code did not run);
    everything the code does (errors, crashes, timeouts) is in the :class:`SandboxResult`.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, got {type(code).__name__}")
    for name, value in (("timeout_s", timeout_s), ("memory_mb", memory_mb), ("max_processes", max_processes),
                        ("max_file_mb", max_file_mb), ("max_disk_mb", max_disk_mb),
                        ("max_output_bytes", max_output_bytes)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"run_python: {name} must be a positive number, got {value!r}")
    if cpu_s is not None and (isinstance(cpu_s, bool) or not isinstance(cpu_s, (int, float))
                              or not math.isfinite(cpu_s) or cpu_s <= 0):
        raise ValueError(f"run_python: cpu_s must be a positive number or None, got {cpu_s!r}")
    if network_mechanism not in ("auto", "netns", "audit-hook"):
        raise ValueError(f"run_python: network_mechanism must be auto, netns or audit-hook, got {network_mechanism!r}")
    runtime = _runtime(python)
    if network:
        isolate, audit_network = False, False
    elif network_mechanism == "audit-hook":
        isolate, audit_network = False, True
    elif network_mechanism == "netns":
        if "net" not in runtime.namespaces:
            raise SandboxError("network namespaces are not available here")
        isolate, audit_network = True, False
    else:
        isolate, audit_network = "net" in runtime.namespaces, True
    limits = _Limits(
        timeout_s=float(timeout_s),
        cpu_s=max(1, math.ceil(cpu_s if cpu_s is not None else timeout_s + 1)),
        memory_mb=int(memory_mb),
        max_processes=int(max_processes),
        max_file_mb=max(1, int(max_file_mb)),
        max_disk_mb=max(1, int(max_disk_mb)),
        max_output_bytes=int(max_output_bytes),
    )
    return _execute(runtime, code, limits, isolate_network=isolate, audit_network=audit_network, stdin=stdin)


__all__ = ["SANDBOX_GID", "SANDBOX_UID", "SandboxError", "SandboxResult", "run_python", "sandbox_info"]
