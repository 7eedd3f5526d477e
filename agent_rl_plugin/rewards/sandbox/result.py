"""What a run returns (:class:`SandboxResult`) and what it raises when the sandbox cannot be set
up (:class:`SandboxError`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_rl_plugin.errors import AgentRLError


class SandboxError(AgentRLError, RuntimeError):
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
