"""``code_execution``: does the final answer's Python code actually run (and pass the tests)?"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Any

from agent_rl_plugin.rewards.base import RewardPlugin, ScoringContext
from agent_rl_plugin.rewards.builtin._util import check_choice, check_number
from agent_rl_plugin.rewards.code_blocks import python_code_blocks
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout
from agent_rl_plugin.rewards.sandbox import SandboxError, SandboxResult, run_python, sandbox_info

WHICH = ("all", "last")
_TRACEBACK_LINE = re.compile(r'File "[^"\n]*main\.py", line (\d+)')
_TESTS_MARKER = "# ---- tests (appended by the code_execution reward) ----"


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
    for value in (rollout.metadata.get("tests"), rollout.task_metadata.get("tests"),
                  truth.get("tests") if isinstance(truth, dict) else None):
        code = _as_code(value)
        if code is not None:
            return code
    code = _as_code(truth) if not isinstance(truth, dict) else None
    if code is not None and _has_assert(code):
        return code
    return None


def _lookup(rollout: Rollout, key: str) -> Any:
    truth = rollout.ground_truth
    for value in (rollout.metadata.get(key), rollout.task_metadata.get(key),
                  truth.get(key) if isinstance(truth, dict) else None):
        if value is not None:
            return value
    return None


def normalise_output(text: str) -> str:
    """Output as compared with ``expected_stdout``: newlines unified, trailing spaces of each
    line and surrounding blank space stripped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


def failing_line(result: SandboxResult, program: str) -> tuple[int | None, str | None]:
    """The line of the program the traceback points at last (number, source), if any."""
    matches = _TRACEBACK_LINE.findall(result.stderr)
    if not matches:
        return None, None
    number = int(matches[-1])
    lines = program.splitlines()
    source = lines[number - 1].strip() if 0 < number <= len(lines) else None
    return number, source


class CodeExecution(RewardPlugin):
    """1.0 when the final answer's Python code runs without error in the sandbox (exit code 0
    within the time limit; and, with an expected output, stdout matches it), else 0.0.

    The code is the answer's Python blocks (same rules as ``syntax_valid``; ``untagged``,
    ``bare``): all of them joined in order with blank lines (``which="all"``, default) or only
    the last (``which="last"``). Test code is appended after it when the rollout has some
    (:func:`find_tests`: ``metadata["tests"]``, ``task_metadata["tests"]``,
    ``ground_truth["tests"]``, or a ground truth that is Python code with an ``assert``), so a
    failing ``assert`` fails the run. The program runs with
    :func:`~agent_rl_plugin.rewards.sandbox.run_python` (a separate interpreter as an
    unprivileged user, no network, rlimits; only the standard library is importable) with
    ``timeout_s``, ``cpu_s``, ``memory_mb`` and ``network``; stdin is ``stdin`` from the
    metadata / task metadata / ground-truth dict, else empty. When ``expected_stdout`` is found
    the same way, stdout must equal it after :func:`normalise_output` (newlines unified,
    trailing spaces of each line and surrounding blank space stripped).

    The reason is ``"ran without error (exit code 0)"``, ``"exit code 1: ZeroDivisionError:
    division by zero (line 3: x = 1 / 0)"`` or ``"exit code 1: AssertionError (tests line 2:
    assert f(2) == 4)"`` (the last stderr line and the line the traceback points at, in the
    answer's code or in the tests), ``"timed out after 5 s"``, ``"killed: memory limit (256 MiB)"``,
    ``"killed: CPU time limit (6 s)"``, ``"killed by SIGSEGV"`` or ``"stdout does not match
    the expected output"``. Metrics: ``duration_s``, ``exit_code``, ``timed_out``,
    ``killed_by_signal``, ``memory_error``, ``mechanism`` (the containment used, e.g.
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
    description = "1.0 when the answer's Python code (plus the task's tests) runs with exit code 0 in a sandbox."

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

    def program(self, rollout: Rollout) -> tuple[str, int, bool] | None:
        """``(program, number of blocks, has tests)`` for the rollout, or None without code."""
        blocks = python_code_blocks(rollout.final_output, untagged=self.params["untagged"], bare=self.params["bare"])
        if not blocks:
            return None
        codes = [block.code for block in blocks]
        program = codes[-1] if self.params["which"] == "last" else "\n\n".join(code.rstrip("\n") for code in codes)
        tests = find_tests(rollout) if self.params["use_tests"] else None
        if tests is not None:
            program = f"{program.rstrip()}\n\n\n{_TESTS_MARKER}\n{tests}"
        return program.rstrip("\n") + "\n", len(blocks), tests is not None

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        built = self.program(rollout)
        if built is None:
            return None
        program, n_blocks, has_tests = built
        stdin = _lookup(rollout, "stdin")
        expected = _lookup(rollout, "expected_stdout")
        try:
            result = run_python(
                program,
                timeout_s=self.params["timeout_s"],
                cpu_s=self.params["cpu_s"],
                memory_mb=self.params["memory_mb"],
                network=self.params["network"],
                stdin=stdin if isinstance(stdin, str) else None,
            )
        except SandboxError as exc:
            return EvaluateResult(error=f"sandbox unavailable: {exc}")
        line, source = failing_line(result, program)
        stdout_match = None
        if expected is not None and result.ok:
            stdout_match = normalise_output(result.stdout) == normalise_output(str(expected))
        metrics: dict[str, Any] = {
            "duration_s": result.duration_s,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "killed_by_signal": result.killed_by_signal,
            "memory_error": result.memory_error,
            "mechanism": ",".join(result.mechanisms),
            "network_mechanism": result.network_mechanism,
            "n_blocks": n_blocks,
            "has_tests": has_tests,
            "stdout_match": stdout_match,
            "error_line": None,
        }
        if result.ok and stdout_match is not False:
            reason = "ran without error (exit code 0)"
            if has_tests:
                reason = "code and tests ran without error (exit code 0)"
            if stdout_match:
                reason += "; stdout matches the expected output"
            return EvaluateResult(score=1.0, reason=reason, metrics=metrics)
        if result.ok:
            got = normalise_output(result.stdout)
            reason = f"stdout does not match the expected output (got {got[:80]!r})"
        elif result.timed_out:
            reason = f"timed out after {self.params['timeout_s']:g} s"
        elif result.memory_error:
            reason = f"killed: memory limit ({self.params['memory_mb']} MiB)"
        elif result.cpu_limit_exceeded:
            reason = "killed: CPU time limit" + (f" ({self.params['cpu_s']:g} s)" if self.params["cpu_s"] else "")
        elif result.killed_by_signal is not None:
            reason = f"killed by {result.killed_by_signal}"
        else:
            reason = f"exit code {result.exit_code}"
            last = result.last_error_line
            if last:
                reason += f": {last[:200]}"
            if line is not None:
                metrics["error_line"] = line
                lines = program.splitlines()
                tests_start = lines.index(_TESTS_MARKER) + 2 if has_tests and _TESTS_MARKER in lines else None
                if tests_start is not None and line >= tests_start:
                    where = f"tests line {line - tests_start + 1}"
                else:
                    where = f"line {line}"
                reason += f" ({where}" + (f": {source[:120]})" if source else ")")
        return EvaluateResult(score=0.0, reason=reason, metrics=metrics)
