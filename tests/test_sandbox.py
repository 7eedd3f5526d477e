"""The sandbox really runs code, and keeps it contained: one test (at least) per property.

Every containment test makes the attempt *and* checks the effect from outside (the file is not
there, the listening socket got no connection, no process is left). Limits are kept low (16
processes, 1-2 s timeouts) so the suite stays safe and quick on a loaded 2-core machine.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from agent_rl_plugin.rewards import sandbox
from agent_rl_plugin.rewards.sandbox import SandboxError, SandboxResult, run_python, sandbox_info
from agent_rl_plugin.rewards.sandbox import process as sandbox_process
from agent_rl_plugin.rewards.sandbox import runtime as sandbox_runtime
from agent_rl_plugin.rewards.sandbox import settings as sandbox_settings
from agent_rl_plugin.rewards.sandbox import streams as sandbox_streams
from agent_rl_plugin.rewards.sandbox import workdirs as sandbox_workdirs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox needs Linux")

PROJECT_DIR = Path(__file__).resolve().parent.parent
SLACK_S = 5.0  # extra wall time allowed on a loaded machine


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def wait_until(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def assert_no_survivors(workdir: str) -> None:
    assert workdir.startswith(("/tmp/", "/")) and "arl-sandbox-" in workdir
    assert wait_until(lambda: not processes_with(workdir)), f"processes left: {processes_with(workdir)}"


@pytest.fixture(scope="module")
def info() -> dict:
    return sandbox_info()


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 of this (the parent's) network namespace."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


NETWORK_ATTEMPTS = code(
    """
    import json, socket, sys
    port = PORT
    out = {}
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        out["connect"] = "connected"
    except OSError as exc:
        out["connect"] = [type(exc).__name__, exc.errno, str(exc)]
    try:
        socket.getaddrinfo("example.com", 80)
        out["dns"] = "resolved"
    except OSError as exc:
        out["dns"] = [type(exc).__name__, exc.errno, str(exc)]
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"x", ("8.8.8.8", 53))
        out["udp"] = "sent"
    except OSError as exc:
        out["udp"] = [type(exc).__name__, exc.errno, str(exc)]
    print(json.dumps(out))
    """
)


def network_attempts(port: int, **kwargs) -> tuple[SandboxResult, dict]:
    result = run_python(NETWORK_ATTEMPTS.replace("PORT", str(port)), timeout_s=20, **kwargs)
    assert result.exit_code == 0, result.stderr
    return result, json.loads(result.stdout)


# ---------------------------------------------------------------------------------------------
# it really runs
# ---------------------------------------------------------------------------------------------


def test_runs_code_in_a_separate_process(info):
    result = run_python(code("""
        import os, sys
        print("hello", os.getpid() != PARENT)
        print("to stderr", file=sys.stderr)
        sys.exit(3)
    """).replace("PARENT", str(os.getpid())), timeout_s=20)
    assert result.exit_code == 3 and not result.timed_out and result.killed_by_signal is None
    assert result.stdout == "hello True\n"
    assert result.stderr == "to stderr\n"
    assert result.reason == "exited with code 3: to stderr"
    assert not result.ok
    assert 0 < result.duration_s < 20
    assert result.python == info["python"]


def test_exception_and_syntax_error_are_reported():
    result = run_python("x = 1\ny = x / 0\n", timeout_s=20)
    assert result.exit_code == 1
    assert result.last_error_line == "ZeroDivisionError: division by zero"
    assert 'main.py", line 2' in result.stderr
    assert result.reason == "exited with code 1: ZeroDivisionError: division by zero"

    result = run_python("def f(:\n    pass\n", timeout_s=20)
    assert result.exit_code == 1
    assert result.last_error_line.startswith("SyntaxError")


def test_success_and_exit_builtins():
    # -S drops the exit()/quit() builtins that site.py defines; the launcher puts them back
    assert run_python("print('ok')", timeout_s=20).ok
    assert run_python("exit()", timeout_s=20).exit_code == 0
    assert run_python("quit(4)", timeout_s=20).exit_code == 4
    assert run_python("raise SystemExit('bye')", timeout_s=20).exit_code == 1


def test_isolated_interpreter_without_site():
    result = run_python(code("""
        import json, sys
        print(json.dumps({"isolated": sys.flags.isolated, "no_site": sys.flags.no_site,
                          "site": "site" in sys.modules, "name": __name__,
                          "site_packages": [p for p in sys.path if "-packages" in p]}))
    """), timeout_s=20)
    assert result.ok, result.stderr
    assert json.loads(result.stdout) == {"isolated": 1, "no_site": 1, "site": False, "name": "__main__", "site_packages": []}


def test_environment_is_scrubbed(monkeypatch):
    secret = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    result = run_python(code("""
        import json, os
        try:
            parent_env = open("/proc/PARENT/environ", "rb").read().decode(errors="replace")
        except OSError as exc:
            parent_env = type(exc).__name__
        print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "parent_env": parent_env}))
    """).replace("PARENT", str(os.getpid())), timeout_s=20)
    assert result.ok, result.stderr
    assert secret not in result.stdout
    seen = json.loads(result.stdout)
    assert set(seen["env"]) == {"PATH", "LANG", "HOME", "TMPDIR"}
    assert seen["env"]["HOME"] == seen["env"]["TMPDIR"] == seen["cwd"]
    assert "OPENAI_API_KEY" not in seen["env"]
    assert seen["parent_env"] in ("FileNotFoundError", "PermissionError", "ProcessLookupError")


def test_stdin_is_empty_unless_given():
    result = run_python("input()", timeout_s=20)
    assert result.exit_code == 1 and result.last_error_line.startswith("EOFError")
    result = run_python("import sys\nprint(sys.stdin.read()[::-1])", stdin="abc", timeout_s=20)
    assert result.stdout == "cba\n"


def test_fresh_working_directory_removed_afterwards():
    program = code("""
        import os
        before = sorted(os.listdir("."))
        with open("out.txt", "w") as f:
            f.write("data")
        os.makedirs("sub/dir")
        print(os.getcwd())
        print(before)
    """)
    first, second = run_python(program, timeout_s=20), run_python(program, timeout_s=20)
    assert first.ok and second.ok, first.stderr + second.stderr
    cwd1, listing = first.stdout.splitlines()
    cwd2 = second.stdout.splitlines()[0]
    assert cwd1 != cwd2 and "arl-sandbox-" in cwd1
    assert listing == "['main.py']"
    assert not os.path.exists(cwd1) and not os.path.exists(cwd2)


def test_output_is_capped():
    result = run_python("import sys\nprint('a' * 100000 + 'END')\nprint('x' * 100000, file=sys.stderr)\nprint('LAST', file=sys.stderr)",
                        max_output_bytes=1000, timeout_s=20)
    assert result.ok
    assert result.stdout_truncated and result.stderr_truncated
    assert len(result.stdout) < 1100 and "bytes cut" in result.stdout
    assert result.stdout.rstrip().endswith("END")  # the tail is kept
    assert result.stderr.rstrip().endswith("LAST")


def test_concurrent_runs_from_threads():
    results: list[SandboxResult] = []

    def one(n: int) -> None:
        results.append(run_python(f"print({n} * 2)", timeout_s=30))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(r.stdout for r in results) == ["0\n", "2\n", "4\n", "6\n"]


def test_bad_arguments_and_unusable_interpreter():
    with pytest.raises(ValueError, match="timeout_s"):
        run_python("pass", timeout_s=0)
    with pytest.raises(ValueError, match="network_mechanism"):
        run_python("pass", network_mechanism="firewall")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        run_python(b"pass")  # type: ignore[arg-type]
    with pytest.raises(SandboxError, match="no Python interpreter"):
        run_python("pass", python="/nonexistent/python3")


# ---------------------------------------------------------------------------------------------
# privileges
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="privileges are dropped only when running as root")
def test_runs_as_unprivileged_user_without_new_privileges(info):
    result = run_python(code("""
        import os
        print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
        try:
            os.setuid(0)
            print("root again")
        except PermissionError:
            print("no root")
        print([line.split()[1] for line in open("/proc/self/status") if line.startswith("NoNewPrivs")][0])
    """), timeout_s=20)
    assert result.ok, result.stderr
    ids, root, no_new_privs = result.stdout.splitlines()
    assert ids == f"{sandbox.SANDBOX_UID} {sandbox.SANDBOX_UID} {sandbox.SANDBOX_GID} []"
    assert root == "no root"
    assert no_new_privs == "1"
    assert f"uid:{sandbox.SANDBOX_UID}" in result.mechanisms
    assert info["uid"] == sandbox.SANDBOX_UID


# ---------------------------------------------------------------------------------------------
# network
# ---------------------------------------------------------------------------------------------


def test_network_is_blocked_by_default(listener, info):
    result, seen = network_attempts(listener.getsockname()[1])
    assert seen["connect"] != "connected" and seen["dns"] != "resolved" and seen["udp"] != "sent"
    assert not accepted(listener)
    expected = "netns+audit-hook" if "net" in info["namespaces"] else "audit-hook"
    assert result.network_mechanism == expected


def test_network_namespace_alone_blocks_connections(listener, info):
    if "net" not in info["namespaces"]:
        pytest.skip("network namespaces are not available here")
    result, seen = network_attempts(listener.getsockname()[1], network_mechanism="netns")
    assert result.network_mechanism == "netns"
    # not the audit hook's PermissionError: the kernel refuses (loopback is down, no route)
    assert seen["connect"][0] != "PermissionError" and seen["connect"][1] in (errno.ENETUNREACH, errno.ECONNREFUSED, errno.EADDRNOTAVAIL)
    assert seen["dns"][0] == "gaierror"
    assert seen["udp"][1] == errno.ENETUNREACH
    assert not accepted(listener)


def test_audit_hook_alone_blocks_connections(listener):
    result, seen = network_attempts(listener.getsockname()[1], network_mechanism="audit-hook")
    assert result.network_mechanism == "audit-hook"
    for attempt in ("connect", "dns", "udp"):
        assert seen[attempt][0] == "PermissionError" and "network access" in seen[attempt][2]
    assert not accepted(listener)


def test_network_allowed_when_asked(listener):
    # the control: the listener is reachable, so the tests above do test the blocking
    result, seen = network_attempts(listener.getsockname()[1], network=True)
    assert seen["connect"] == "connected"
    assert result.network_mechanism == "none (network allowed)"
    assert wait_until(lambda: accepted(listener), 5)


# ---------------------------------------------------------------------------------------------
# file system
# ---------------------------------------------------------------------------------------------

WRITE_ATTEMPTS = code(
    """
    import json, os, pathlib, shutil, sys
    targets = json.loads(TARGETS)
    victim = VICTIM
    out = {}

    def attempt(name, fn):
        try:
            fn()
            out[name] = "ok"
        except OSError as exc:
            out[name] = type(exc).__name__

    for i, path in enumerate(targets):
        attempt(f"open{i}", lambda: open(path, "w").write("x"))
        attempt(f"append{i}", lambda: open(path, "a").write("x"))
        attempt(f"os.open{i}", lambda: os.close(os.open(path, os.O_WRONLY | os.O_CREAT)))
        attempt(f"pathlib{i}", lambda: pathlib.Path(path).write_text("x"))
        attempt(f"mkdir{i}", lambda: os.mkdir(path + ".d"))
        attempt(f"copy{i}", lambda: shutil.copy("main.py", path))
        attempt(f"symlink{i}", lambda: (os.symlink(path, "link%d" % i), open("link%d" % i, "w")))
        attempt(f"rename{i}", lambda: (open("mine", "w").close(), os.rename("mine", path)))
    attempt("remove_victim", lambda: os.remove(victim))
    attempt("chmod_victim", lambda: os.chmod(victim, 0o777))
    attempt("truncate_victim", lambda: os.truncate(victim, 0))
    attempt("utime_victim", lambda: os.utime(victim))
    attempt("inside", lambda: open("inside.txt", "w").write("fine"))
    print(json.dumps(out))
    """
)


def outside_targets(tmp_path: Path) -> list[str]:
    name = f"arl-sandbox-escape-{uuid.uuid4().hex}"
    return ["/tmp/" + name, str(PROJECT_DIR / name), os.path.join(os.path.expanduser("~"), name), str(tmp_path / name)]


def test_writes_outside_the_working_directory_fail(tmp_path):
    targets = outside_targets(tmp_path)
    victim = Path("/tmp") / f"arl-sandbox-victim-{uuid.uuid4().hex}"
    victim.write_text("keep me")
    try:
        program = WRITE_ATTEMPTS.replace("TARGETS", repr(json.dumps(targets))).replace("VICTIM", repr(str(victim)))
        result = run_python(program, timeout_s=20)
        assert result.ok, result.stderr
        seen = json.loads(result.stdout)
        assert seen.pop("inside") == "ok"
        assert seen and all(outcome == "PermissionError" for outcome in seen.values()), seen
        assert victim.read_text() == "keep me"
    finally:
        victim.unlink()
        for path in targets:
            for suffix in ("", ".d"):
                assert not os.path.lexists(path + suffix), f"{path + suffix} was written"


def test_running_programs_and_ctypes_are_refused(tmp_path):
    marker = f"/tmp/arl-sandbox-escape-{uuid.uuid4().hex}"
    result = run_python(code(f"""
        import os, subprocess
        out = []
        for attempt in (lambda: os.system("touch {marker}"),
                        lambda: subprocess.run(["touch", "{marker}"]),
                        lambda: os.execv("/usr/bin/touch", ["touch", "{marker}"])):
            try:
                attempt()
                out.append("ran")
            except PermissionError as exc:
                out.append("refused")
        try:
            import ctypes
            out.append("ctypes")
        except ImportError:
            out.append("no ctypes")
        print(out)
    """), timeout_s=20)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "['refused', 'refused', 'refused', 'no ctypes']"
    assert not os.path.exists(marker)


def test_os_layers_hold_without_the_audit_hook(tmp_path, info):
    """The uid (and the private /tmp of the mount namespace) stop writes on their own: the audit
    hook is only a second layer."""
    if info["uid"] is None:
        pytest.skip("privileges are dropped only when running as root")
    targets = outside_targets(tmp_path)
    program = code("""
        import json
        out = {}
        for path in TARGETS:
            try:
                open(path, "w").write("x")
                out[path] = "ok"
            except OSError as exc:
                out[path] = type(exc).__name__
        print(json.dumps(out))
    """).replace("TARGETS", json.dumps(targets))
    runtime = sandbox_runtime._runtime(None)
    limits = sandbox_settings._Limits(timeout_s=20, cpu_s=20, memory_mb=256, max_processes=64, max_file_mb=1,
                                      max_disk_mb=8, max_output_bytes=10000)
    try:
        result = sandbox_process._execute(runtime, program, limits, isolate_network=True, audit_network=True,
                                          stdin=None, audit=False)
        assert "no-audit-hook" in result.mechanisms
        seen = json.loads(result.stdout)
        for path in targets[1:3]:  # the project directory, $HOME
            # under a scratch directory (a clone in /tmp), the private tmpfs hides it entirely
            hidden = "mount" in info["namespaces"] and path.startswith(tuple(d + "/" for d in sandbox.SCRATCH_DIRS))
            assert seen[path] in (("PermissionError", "FileNotFoundError") if hidden else ("PermissionError",))
        # a root-owned directory under /tmp: not writable, or not even there (private /tmp)
        assert seen[targets[3]] in ("PermissionError", "FileNotFoundError")
        if "mount" in info["namespaces"]:
            # /tmp is world-writable: the write "works", into the run's private tmpfs
            assert seen[targets[0]] == "ok"
        for path in targets:
            assert not os.path.exists(path), f"{path} was written"
    finally:
        for path in targets:
            if os.path.exists(path):
                os.unlink(path)


def test_file_size_limit():
    result = run_python("open('big', 'wb').write(b'x' * (3 * 2**20))", max_file_mb=1, timeout_s=20)
    assert result.exit_code == 1
    assert "File too large" in result.last_error_line


# ---------------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------------

FORK_LOOP = code(
    """
    import os, time
    print(os.getcwd(), flush=True)
    forked, error = 0, None
    for _ in range(200):              # bounded: at most 200 forks
        try:
            pid = os.fork()
        except OSError as exc:         # EAGAIN at RLIMIT_NPROC
            error = exc.errno
            break
        if pid == 0:                   # children just wait to be killed
            time.sleep(60)
            os._exit(0)
        forked += 1
    print(forked, error, flush=True)
    time.sleep(60)
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC is per user: meaningful for the dropped uid")
def test_fork_loop_is_bounded_by_nproc_and_killed_as_a_whole():
    result = run_python(FORK_LOOP, timeout_s=1.5, max_processes=16)
    assert result.timed_out and result.killed_by_signal == "SIGKILL" and result.exit_code is None
    workdir, counts = result.stdout.splitlines()[:2]
    forked, error = counts.split()
    assert int(forked) < 16 and int(error) == errno.EAGAIN
    assert result.duration_s < 1.5 + SLACK_S
    assert_no_survivors(workdir)
    assert run_python("print('fine')", timeout_s=20).stdout == "fine\n"  # the machine is fine


def test_fork_bomb_is_contained():
    bomb = "import os\nprint(os.getcwd(), flush=True)\nwhile True:\n    os.fork()\n"
    start = time.monotonic()
    result = run_python(bomb, timeout_s=2, max_processes=16)
    assert time.monotonic() - start < 2 + SLACK_S
    assert not result.ok
    assert_no_survivors(result.stdout.splitlines()[0])
    after = run_python("print('fine')", timeout_s=20)
    assert after.ok and after.duration_s < 10


def test_processes_that_leave_the_group_are_killed_too():
    result = run_python(code("""
        import os, time
        print(os.getcwd(), flush=True)
        if os.fork() == 0:
            os.setsid()                # a new session: out of the process group
            time.sleep(60)
            os._exit(0)
        print("main done", flush=True)
    """), timeout_s=20)
    assert result.ok and result.stdout.splitlines()[1] == "main done"
    assert_no_survivors(result.stdout.splitlines()[0])


def test_signals_to_outside_processes_are_refused():
    # this (the caller's) process: invisible in the PID namespace, else refused (hook and uid)
    result = run_python(f"import os, signal\nos.kill({os.getpid()}, signal.SIGTERM)", timeout_s=20)
    assert result.exit_code == 1
    assert result.last_error_line.split(":")[0] in ("PermissionError", "ProcessLookupError")
    result = run_python("import os, signal\nos.kill(-1, signal.SIGKILL)", timeout_s=20)
    assert result.exit_code == 1 and "PermissionError" in result.last_error_line


# ---------------------------------------------------------------------------------------------
# memory, CPU, time
# ---------------------------------------------------------------------------------------------


def test_huge_allocation_fails_with_memory_error():
    result = run_python("x = bytearray(2**34)", memory_mb=128, timeout_s=20)
    assert result.exit_code == 1 and result.memory_error
    assert result.reason == "MemoryError: memory limit (128 MiB) reached"


def test_growing_list_fails_with_memory_error():
    result = run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(2**20))", memory_mb=96, timeout_s=20)
    assert result.memory_error and not result.timed_out
    assert "memory limit (96 MiB)" in result.reason


def test_infinite_loop_is_killed_at_the_wall_clock_timeout():
    result = run_python("print('started', flush=True)\nwhile True:\n    pass", timeout_s=1)
    assert result.timed_out and result.killed_by_signal == "SIGKILL" and result.exit_code is None
    assert result.reason == "timed out after 1 s"
    assert result.stdout == "started\n"
    assert 1 <= result.duration_s < 1 + SLACK_S


def test_sleeping_code_is_killed_at_the_timeout_even_with_closed_pipes():
    result = run_python("import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)", timeout_s=1)
    assert result.timed_out
    assert result.duration_s < 1 + SLACK_S


def test_cpu_time_limit():
    result = run_python("while True:\n    pass", cpu_s=1, timeout_s=30)
    assert not result.timed_out
    assert result.cpu_limit_exceeded and result.killed_by_signal == "SIGXCPU"
    assert result.reason == "CPU time limit exceeded (1 s)"


def test_background_process_does_not_hold_the_run():
    # a child keeps stdout open after the main code ended: the run still ends promptly
    result = run_python("import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('done')", timeout_s=20)
    assert result.ok and result.stdout == "done\n"
    assert result.duration_s < SLACK_S


def test_caller_death_kills_the_code(tmp_path):
    """A scoring worker killed at its own timeout must not leave the code running."""
    script = tmp_path / "caller.py"
    script.write_text(code(f"""
        import sys
        sys.path.insert(0, {str(PROJECT_DIR)!r})
        from agent_rl_plugin.rewards.sandbox import run_python
        print("start", flush=True)
        run_python("import os, time\\nif os.fork() == 0:\\n    time.sleep(60)\\ntime.sleep(60)", timeout_s=60)
    """))
    dirs_before = set(Path(sandbox_workdirs._workdir_base(os.geteuid() == 0)).glob("arl-sandbox-*"))
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert caller.stdout.readline() == b"start\n"
        # the code's processes carry their working directory (arl-sandbox-...) in their command line
        assert wait_until(lambda: len(processes_with("arl-sandbox-")) >= 2, 20)
        running = processes_with("arl-sandbox-")
    finally:
        caller.kill()
        caller.wait(10)
        caller.stdout.close()
    assert wait_until(lambda: not [pid for pid in running if pid in processes_with("arl-sandbox-")], 5)
    # the killed caller could not remove its working directory; it is unlocked now, so the
    # sweep (with no minimum age here) removes it
    left = set(Path(sandbox_workdirs._workdir_base(os.geteuid() == 0)).glob("arl-sandbox-*")) - dirs_before
    assert len(left) == 1
    sandbox.sweep_stale_workdirs(min_age_s=0)
    assert not any(path.exists() for path in left)


def test_sweep_removes_only_unlocked_old_workdirs():
    base = sandbox_workdirs._workdir_base(os.geteuid() == 0)
    stale, locked, fresh = (tempfile.mkdtemp(prefix="arl-sandbox-", dir=base) for _ in range(3))
    old = time.time() - 2 * sandbox.STALE_AFTER_S
    for path in (stale, locked):
        Path(path, "main.py").write_text("x = 1\n")
        os.utime(path, (old, old))
    fd = os.open(locked, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert sandbox.sweep_stale_workdirs() >= 1
        assert not os.path.exists(stale)
        assert os.path.exists(locked) and os.path.exists(fresh)
    finally:
        os.close(fd)
        for path in (stale, locked, fresh):
            if os.path.exists(path):
                shutil.rmtree(path)


# ---------------------------------------------------------------------------------------------
# without namespaces (the fallback where they are unavailable)
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def no_namespaces(monkeypatch, info):
    runtime = sandbox_runtime._runtime(None)
    monkeypatch.setitem(sandbox_runtime._RUNTIMES, None, replace(runtime, unshare=None, namespaces=()))
    return runtime


def test_fallback_without_namespaces(no_namespaces, listener, tmp_path):
    result, seen = network_attempts(listener.getsockname()[1])
    assert result.network_mechanism == "audit-hook"
    assert "net" not in result.mechanisms and "pid" not in result.mechanisms
    assert seen["connect"][0] == "PermissionError"
    assert not accepted(listener)
    with pytest.raises(SandboxError, match="network namespaces are not available"):
        run_python("pass", network_mechanism="netns")

    target = outside_targets(tmp_path)[0]
    result = run_python(f"open({target!r}, 'w')", timeout_s=20)
    assert result.exit_code == 1 and "PermissionError" in result.last_error_line
    assert not os.path.exists(target)

    result = run_python(code("""
        import os, time
        print(os.getcwd(), flush=True)
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
        time.sleep(60)
    """), timeout_s=1)
    assert result.timed_out
    assert_no_survivors(result.stdout.splitlines()[0])


def test_interrupted_run_still_cleans_up(monkeypatch):
    """An exception in the caller while the code runs (Ctrl-C...) still kills, reaps, removes."""
    before_dirs = set(Path("/tmp").glob("arl-sandbox-*"))
    before = set(processes_with("arl-sandbox-"))

    def interrupted(self, deadline, *, grace=True):
        wait_until(lambda: len(set(processes_with("arl-sandbox-")) - before) >= 2, 10)
        raise KeyboardInterrupt

    monkeypatch.setattr(sandbox_streams._Reader, "read_until", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_python("import time\ntime.sleep(60)", timeout_s=60)
    assert wait_until(lambda: not set(processes_with("arl-sandbox-")) - before, 5)
    assert set(Path("/tmp").glob("arl-sandbox-*")) <= before_dirs


def test_stdin_cannot_be_reopened_by_path(no_namespaces):
    """The stdin text is an open file whose name is gone before the code starts (without a mount
    namespace the working directory is on disk, next to the code): the code reads it once on
    fd 0, but cannot open it again (the code_execution harness hides a nonce there)."""
    result = run_python(code("""
        import os, sys
        print(sys.stdin.read().strip())
        names = [n for n in os.listdir(".") if n != "main.py"]
        print(names)
        for name in names:
            try:
                print(open(name).read())
            except OSError as exc:
                print(type(exc).__name__)
    """), stdin="secret\n", timeout_s=20)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["secret", "[]"]
