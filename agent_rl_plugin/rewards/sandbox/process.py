"""One run of code in the sandbox: :func:`_execute` writes ``main.py`` into a fresh locked working
directory, starts the launcher (:mod:`.launcher_script`, passed with ``-c``) through the
runtime's ``unshare`` command in a new session, reads its output (:mod:`.streams`) until the
code ends or the wall-clock timeout, kills whatever is left (the PID namespace's init, the
lifeline, the process group), reaps with a bound, removes the directory and turns the
supervisor's report into a :class:`~.result.SandboxResult`. It raises
:class:`~.result.SandboxError` only when the sandbox could not be set up; even on an exception
(``KeyboardInterrupt``) it kills, reaps and cleans up.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from importlib import resources

from .isolation import _Runtime
from .result import SandboxError, SandboxResult
from .settings import _GRACE_S, _REAP_S, _SYSTEM_PATH, MAX_OPEN_FILES, SCRATCH_DIRS, SCRATCH_MB, _Limits
from .streams import _Capped, _Reader
from .workdirs import _WORKDIR_PREFIX, _workdir_base

#: The child's program, run as ``python -I -S -B -c _LAUNCHER <config json>``.
_LAUNCHER = resources.files(__package__).joinpath("launcher_script.py").read_text(encoding="utf-8")


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
            os.unlink(stdin_path)  # only the open file is left: the code cannot reopen (and re-read) it
        if runtime.uid is not None and not mount:
            assert runtime.gid is not None  # the probe sets uid and gid together
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
        assert proc.stdout is not None and proc.stderr is not None  # both are PIPE
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
