"""``code_execution``: does the final answer's Python code actually run (and pass the tests)?"""

from __future__ import annotations

import ast
import warnings
from typing import Any

from agent_rl_plugin.rewards.base import RewardPlugin, ScoringContext
from agent_rl_plugin.rewards.builtin._util import check_choice, check_number
from agent_rl_plugin.rewards.builtin.code_harness import (
    failing_line,
    harness_program,
    harness_stdin,
    new_nonce,
    read_verdict,
)
from agent_rl_plugin.rewards.code_blocks import python_code_blocks
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout
from agent_rl_plugin.rewards.sandbox import SandboxError, run_python, sandbox_info

WHICH = ("all", "last")


def _has_assert(code: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


def _as_code(value: Any) -> str | None:
    """A tests value as code: a string, or a list of strings joined by newlines."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        joined = "\n".join(value)
        return joined if joined.strip() else None
    return None


def find_tests(rollout: Rollout) -> str | None:
    """Test code for the rollout: ``metadata["tests"]``, else ``task_metadata["tests"]``, else
    ``ground_truth["tests"]`` (a dict ground truth), else the ground truth itself when it is a
    string (or list of strings) of Python code containing an ``assert`` statement. A string or
    a list of strings (joined by newlines)."""
    truth = rollout.ground_truth
    for value in (
        rollout.metadata.get("tests"),
        rollout.task_metadata.get("tests"),
        truth.get("tests") if isinstance(truth, dict) else None,
    ):
        code = _as_code(value)
        if code is not None:
            return code
    code = _as_code(truth) if not isinstance(truth, dict) else None
    if code is not None and _has_assert(code):
        return code
    return None


def _lookup(rollout: Rollout, key: str) -> Any:
    truth = rollout.ground_truth
    for value in (
        rollout.metadata.get(key),
        rollout.task_metadata.get(key),
        truth.get(key) if isinstance(truth, dict) else None,
    ):
        if value is not None:
            return value
    return None


def normalise_output(text: str) -> str:
    """Output as compared with ``expected_stdout``: newlines unified, trailing spaces of each
    line and surrounding blank space stripped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


class CodeExecution(RewardPlugin):
    """1.0 when the final answer's Python code, and then the task's tests, run to the end in the
    sandbox (and, with an expected output, stdout matches it), else 0.0.

    The code is the answer's Python blocks (same rules as ``syntax_valid``; ``untagged``,
    ``bare``): all of them joined in order with blank lines (``which="all"``, default) or only
    the last (``which="last"``). The tests come from :func:`find_tests` (``metadata["tests"]``,
    ``task_metadata["tests"]``, ``ground_truth["tests"]``, or a ground truth that is Python code
    with an ``assert``). Both run under a harness (:mod:`.code_harness`,
    :mod:`.code_harness_script`) as the sandbox's program: the code as module ``__main__``
    (``solution.py``), then the tests (``tests.py``) in their own namespace with pristine
    builtins, their ``==``/``in`` made strict (an object that equals everything equals no
    builtin value), and their uncalled top-level ``test*`` functions called. A pass needs the
    harness's completion line carrying a nonce drawn for this run and handed to the harness on
    stdin before the code runs: an early ``exit(0)``/``os._exit(0)``, a signal, an exception or
    a printed fake line all score 0.0 (a ``SystemExit(0)`` of the module ends the module, and
    the tests still run). The sandbox is
    :func:`~agent_rl_plugin.rewards.sandbox.run_python` (a separate interpreter as an
    unprivileged user, no network, rlimits; only the standard library is importable) with
    ``timeout_s``, ``cpu_s``, ``memory_mb`` and ``network``; the code's stdin is ``stdin`` from
    the metadata / task metadata / ground-truth dict, else empty. When ``expected_stdout`` is
    found the same way, the code's stdout must equal it after :func:`normalise_output`
    (newlines unified, trailing spaces of each line and surrounding blank space stripped).

    The reason is ``"ran without error (exit code 0)"``, ``"code and tests ran without error
    (exit code 0)"``, ``"exit code 1: ZeroDivisionError: division by zero (line 3: x = 1 / 0)"``
    or ``"exit code 1: AssertionError (tests line 2: assert f(2) == 4)"`` (the last stderr line
    and the line the traceback points at, in the answer's code or in the tests), ``"exited
    before the tests finished (exit code 0, no completion line)"``, ``"timed out after 5 s"``,
    ``"killed: memory limit (256 MiB)"``, ``"killed: CPU time limit (6 s)"``, ``"killed by
    SIGKILL"`` or ``"stdout does not match the expected output"``. Metrics: ``duration_s``,
    ``exit_code``, ``timed_out``, ``killed_by_signal``, ``memory_error``, ``completed`` (the
    harness's nonce line was there), ``mechanism`` (the containment used, e.g.
    ``uid:65534,mount,net,pid,rlimits,audit-hook``), ``network_mechanism``, ``n_blocks``,
    ``has_tests``, ``stdout_match`` (``None`` without an expected output), ``error_line``.
    Not applicable (``None``) when the answer has no Python code; an ``error`` (no score) when
    the sandbox cannot be set up on this machine.

    Parameters: ``which="all"``, ``timeout_s=5.0``, ``memory_mb=256``, ``cpu_s=None`` (then
    ``timeout_s + 1``), ``network=False``, ``use_tests=True``, ``untagged=True``, ``bare=False``.
    """

    name = "code_execution"
    version = "1"
    weight = 2.0
    description = "1.0 when the answer's Python code and then the task's tests run to the end in a sandbox."

    def __init__(
        self,
        which: str = "all",
        timeout_s: float = 5.0,
        memory_mb: int = 256,
        cpu_s: float | None = None,
        network: bool = False,
        use_tests: bool = True,
        untagged: bool = True,
        bare: bool = False,
        weight: float | None = None,
    ) -> None:
        check_choice(self.name, "which", which, WHICH)
        check_number(self.name, "timeout_s", timeout_s, minimum=0, strict_minimum=True)
        check_number(self.name, "memory_mb", memory_mb, minimum=32)
        check_number(self.name, "cpu_s", cpu_s, minimum=0, strict_minimum=True, allow_none=True)
        for param, value in (("network", network), ("use_tests", use_tests), ("untagged", untagged), ("bare", bare)):
            if not isinstance(value, bool):
                raise ValueError(f"{self.name}: parameter {param} must be true or false, got {value!r}")
        super().__init__(
            weight=weight,
            which=which,
            timeout_s=float(timeout_s),
            memory_mb=int(memory_mb),
            cpu_s=float(cpu_s) if cpu_s is not None else None,
            network=network,
            use_tests=use_tests,
            untagged=untagged,
            bare=bare,
        )

    def prepare(self, context: ScoringContext) -> None:
        """Probe the sandbox once in the scoring process, so worker processes inherit the result."""
        try:
            sandbox_info(network=self.params["network"])
        except SandboxError:
            pass  # reported per rollout by score()

    def program(self, rollout: Rollout) -> tuple[str, str | None, int] | None:
        """``(code, tests or None, number of blocks)`` for the rollout, or None without code."""
        blocks = python_code_blocks(rollout.final_output, untagged=self.params["untagged"], bare=self.params["bare"])
        if not blocks:
            return None
        codes = [block.code for block in blocks]
        code = codes[-1] if self.params["which"] == "last" else "\n\n".join(c.rstrip("\n") for c in codes)
        tests = find_tests(rollout) if self.params["use_tests"] else None
        return code.rstrip("\n") + "\n", tests, len(blocks)

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        built = self.program(rollout)
        if built is None:
            return None
        code, tests, n_blocks = built
        has_tests = tests is not None
        stdin = _lookup(rollout, "stdin")
        expected = _lookup(rollout, "expected_stdout")
        nonce = new_nonce()
        try:
            result = run_python(
                harness_program(code, tests),
                timeout_s=self.params["timeout_s"],
                cpu_s=self.params["cpu_s"],
                memory_mb=self.params["memory_mb"],
                network=self.params["network"],
                stdin=harness_stdin(nonce, stdin if isinstance(stdin, str) else None),
            )
        except SandboxError as exc:
            return EvaluateResult(error=f"sandbox unavailable: {exc}")
        verdict = read_verdict(result.stdout, nonce)
        completed = result.ok and verdict.completed
        stdout_match = None
        if expected is not None and completed:
            stdout_match = normalise_output(verdict.stdout) == normalise_output(str(expected))
        metrics: dict[str, Any] = {
            "duration_s": result.duration_s,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "killed_by_signal": result.killed_by_signal,
            "memory_error": result.memory_error,
            "completed": completed,
            "mechanism": ",".join(result.mechanisms),
            "network_mechanism": result.network_mechanism,
            "n_blocks": n_blocks,
            "has_tests": has_tests,
            "stdout_match": stdout_match,
            "error_line": None,
        }
        if completed and stdout_match is not False:
            reason = (
                "code and tests ran without error (exit code 0)" if has_tests else "ran without error (exit code 0)"
            )
            if stdout_match:
                reason += "; stdout matches the expected output"
            return EvaluateResult(score=1.0, reason=reason, metrics=metrics)
        return EvaluateResult(
            score=0.0, reason=self._failure(result, verdict.stdout, completed, code, tests, metrics), metrics=metrics
        )

    def _failure(self, result, stdout: str, completed: bool, code: str, tests: str | None, metrics: dict) -> str:
        """The reason of a 0.0 (sets ``metrics["error_line"]``)."""
        if completed:
            return f"stdout does not match the expected output (got {normalise_output(stdout)[:80]!r})"
        if result.ok:
            return "exited before the tests finished (exit code 0, no completion line)"
        if result.timed_out:
            return f"timed out after {self.params['timeout_s']:g} s"
        if result.memory_error:
            return f"killed: memory limit ({self.params['memory_mb']} MiB)"
        if result.cpu_limit_exceeded:
            return "killed: CPU time limit" + (f" ({self.params['cpu_s']:g} s)" if self.params["cpu_s"] else "")
        if result.killed_by_signal is not None:
            return f"killed by {result.killed_by_signal}"
        reason = f"exit code {result.exit_code}"
        last = result.last_error_line
        if last:
            reason += f": {last[:200]}"
        found = failing_line(result.stderr)
        if found is not None:
            where, line = found
            lines = (code if where == "solution" else tests or "").splitlines()
            source = lines[line - 1].strip() if 0 < line <= len(lines) else None
            if where == "solution":
                metrics["error_line"] = line
            label = f"line {line}" if where == "solution" else f"tests line {line}"
            reason += f" ({label}" + (f": {source[:120]})" if source else ")")
        return reason
