"""The child side of the sandbox: run by the parent as ``python -I -S -B -c <this file's
text> <config json>`` (see :mod:`.process`). Never imported: the parent reads it as text.

It sets up the sandbox in the child (mounts, dropping privileges and capabilities), forks the
*user process* (rlimits, the audit hook, then ``exec`` of ``main.py`` from the working
directory) and stays as its *supervisor* (waits for it, or for the caller's death on the
lifeline pipe; reports the status as JSON on ``status_fd``; kills every descendant left).
Only the standard library; it must run on every interpreter the probe may pick (Python 3.8+).
"""

if __name__ != "__main__":
    raise ImportError("launcher_script is the sandbox child's program: the parent runs its text with -c")

import json
import os
import sys

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
    import builtins
    import errno
    import resource
    import select
    import signal
    import time
    import traceback
    import types

    workdir = cfg["workdir"]
    uid, gid = cfg["uid"], cfg["gid"]
    with open(os.path.join(workdir, "main.py"), "rb") as f:
        source = f.read()
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if cfg["mount"]:
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

        def mount(src, target, fstype, flags, data):
            if (
                libc.mount(
                    src.encode(),
                    target.encode(),
                    fstype.encode() if fstype else None,
                    flags,
                    data.encode() if data else None,
                )
                != 0
            ):
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
        with open(os.path.join(workdir, "main.py"), "wb") as out:
            out.write(source)
        if uid is not None:
            os.chown(os.path.join(workdir, "main.py"), uid, gid)
    os.chdir(workdir)
    if uid is not None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid) or os.getgroups() not in (
            [],
            [gid],
        ):
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
        if (
            libc.prctl(
                28,
                SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED,
                0,
                0,
                0,
            )
            != 0
        ):
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
        pidfd = os.pidfd_open(child)  # type: int | None
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
        isinstance(flags, int) and flags & WRITE_FLAGS
    )
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


HANDLERS = types.MappingProxyType(
    {
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
        **(
            {
                event: _on_network
                for event in (
                    "socket.connect",
                    "socket.bind",
                    "socket.sendto",
                    "socket.sendmsg",
                    "socket.getaddrinfo",
                    "socket.gethostbyname",
                    "socket.gethostbyname_ex",
                    "socket.gethostbyaddr",
                    "socket.getnameinfo",
                )
            }
            if cfg["block_network"]
            else {}
        ),
    }
)


def _audit(event, args, _get=HANDLERS.get):
    handler = _get(event)
    if handler is not None:
        handler(args)
    elif event.startswith("ctypes."):
        _deny("ctypes")


class _Quitter:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Use %s() or Ctrl-D (i.e. EOF) to exit" % self.name

    def __call__(self, code=None):
        raise SystemExit(code)


# -S: site's Quitter is not there; typeshed types these as site's class, ours stands in for it
builtins.exit = _Quitter("exit")  # type: ignore[assignment]
builtins.quit = _Quitter("quit")  # type: ignore[assignment]
main = types.ModuleType("__main__")
main.__file__ = MAIN
main.__builtins__ = builtins  # type: ignore[attr-defined]  # read by exec from the globals; not in ModuleType's stub
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
    assert exc.__traceback__ is not None  # caught here: it holds at least this frame
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.exit(1)
