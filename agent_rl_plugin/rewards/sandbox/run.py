"""The entry point, :func:`run_python`: checks the arguments, picks the network mechanism from
what the runtime supports, and runs the code once (:func:`~.process._execute`)."""

from __future__ import annotations

import math

from .process import _execute
from .result import SandboxError, SandboxResult
from .runtime import _runtime
from .settings import NetworkMechanism, _Limits


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
    for name, value in (
        ("timeout_s", timeout_s),
        ("memory_mb", memory_mb),
        ("max_processes", max_processes),
        ("max_file_mb", max_file_mb),
        ("max_disk_mb", max_disk_mb),
        ("max_output_bytes", max_output_bytes),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"run_python: {name} must be a positive number, got {value!r}")
    if cpu_s is not None and (
        isinstance(cpu_s, bool) or not isinstance(cpu_s, (int, float)) or not math.isfinite(cpu_s) or cpu_s <= 0
    ):
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
