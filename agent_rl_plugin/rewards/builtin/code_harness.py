"""The scorer's side of the ``code_execution`` test harness (:mod:`.code_harness_script` is the
sandbox's side): the program to run, the stdin that carries the per-run nonce, and reading the
verdict back from stdout.

A run counts as completed only when stdout ends with ``"\\n<marker> <nonce>\\n"``, which the
harness writes after the candidate's code and every test ran to the end; the nonce is drawn
here (:func:`new_nonce`, 128 random bits) for each run and reaches the sandbox only on stdin,
which the harness reads before any candidate code runs. Exiting early (``exit(0)``,
``os._exit(0)``, a signal), raising, or printing a made-up completion line cannot produce it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from importlib import resources

#: The line the harness prints (with the nonce) after the last test.
MARKER = "agent-rl-harness: tests passed"
#: The files the candidate's code and the tests are compiled as (in tracebacks).
SOLUTION_FILE = "solution.py"
TESTS_FILE = "tests.py"

_SCRIPT = resources.files(__package__).joinpath("code_harness_script.py").read_text(encoding="utf-8")
_TRACEBACK_LINE = re.compile(r'File "(solution|tests)\.py", line (\d+)')


def new_nonce() -> str:
    """A fresh nonce for one run (32 hex digits)."""
    return secrets.token_hex(16)


def harness_program(code: str, tests: str | None) -> str:
    """The sandbox's ``main.py``: the harness, then the call running ``code`` and ``tests``.
    Holds no secret: the candidate may read it."""
    return f"{_SCRIPT}\n\n_main({code!r}, {tests!r})\n"


def harness_stdin(nonce: str, stdin: str | None) -> str:
    """What the sandbox gets on stdin: the nonce line, then the task's stdin."""
    return f"{nonce}\n{stdin or ''}"


@dataclass(frozen=True)
class Verdict:
    """``completed``: the harness's nonce line ends stdout; ``stdout``: the candidate's own
    output (that line removed)."""

    completed: bool
    stdout: str


def read_verdict(stdout: str, nonce: str) -> Verdict:
    """Split the harness's completion line off ``stdout`` (see the module docstring)."""
    line = f"\n{MARKER} {nonce}\n"
    if nonce and stdout.endswith(line):
        return Verdict(True, stdout[: -len(line)])
    return Verdict(False, stdout)


def failing_line(stderr: str) -> tuple[str, int] | None:
    """``("solution" | "tests", line)`` of the last traceback entry in the candidate's code or
    the tests, if any."""
    matches = _TRACEBACK_LINE.findall(stderr)
    if not matches:
        return None
    where, number = matches[-1]
    return where, int(number)


__all__ = [
    "MARKER",
    "SOLUTION_FILE",
    "TESTS_FILE",
    "Verdict",
    "failing_line",
    "harness_program",
    "harness_stdin",
    "new_nonce",
    "read_verdict",
]
