"""CI's skip policy: with ``AGENT_RL_FAIL_ON_SKIP=1`` a skipped test fails the run unless allow-listed.

Many test files skip themselves when an optional package is missing (``pytest.importorskip``) or
the machine lacks a capability. On a developer's laptop that is convenient; in CI it would hide a
broken install (a renamed extra, a dependency dropped from the lock) behind a green run. So CI
(``.ci/run``) sets ``AGENT_RL_FAIL_ON_SKIP=1``: every skip, at collection (a module-level
``importorskip``) or in a test, must match an entry of ``ALLOWED_SKIPS`` below, else pytest exits
with status 1 and lists the skips that are not allowed. Unset (or ``0``), nothing changes.

An entry matches a skip when its ``nodeid`` glob (fnmatch, against the node id relative to the
rootdir, e.g. ``tests/test_x.py::test_y[param]``; a module-level skip has the file's id) matches AND
its ``reason`` regular expression is found in the skip message. Each entry says ``why`` the skip
is acceptable in CI. Keep the list short and specific: allow a skip only for something CI cannot
have (a GPU, a second machine), never for a package the ``dev`` extra or ``.ci/run`` can install.

Loaded by ``tests/conftest.py`` (``pytest_plugins``); its own tests are in
``tests/test_ci_skip_policy.py``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass

import pytest

ENV_VAR = "AGENT_RL_FAIL_ON_SKIP"


@dataclass(frozen=True)
class AllowedSkip:
    nodeid: str  # fnmatch glob on the node id
    reason: str  # regular expression searched in the skip message
    why: str  # why CI may skip it

    def matches(self, nodeid: str, message: str) -> bool:
        return fnmatch.fnmatchcase(nodeid, self.nodeid) and re.search(self.reason, message) is not None


# The allow-list. Every entry needs a reason CI cannot avoid the skip, e.g.
#     AllowedSkip(nodeid="tests/test_train_gpu.py::*", reason=r"needs a CUDA GPU",
#                 why="CI machines have no GPU; the GPU job runs these"),
# Empty on purpose: on 2026-11-25 the whole suite, installed from the lock on a CI machine (root,
# Linux, 2 cores), skipped nothing (1217 tests), and the newest/lowest subsets skip nothing either.
# The skips the suite can take are all things CI has: the optional packages (the dev extra), root
# for the mount/sandbox tests, Linux for the sandbox, Chromium (installed by
# scripts/install_chromium.sh from tests/test_report_browser.py), and no DeepSpeed.
ALLOWED_SKIPS: tuple[AllowedSkip, ...] = ()


def enabled() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() not in ("", "0", "false", "no")


def skip_message(report) -> str:  # noqa: ANN001 - a TestReport or CollectReport
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        message = str(longrepr[2])
    else:
        message = str(longrepr)
    return message.removeprefix("Skipped: ")


class SkipPolicy:
    """Records every skip of the session; fails the session on any that is not allowed."""

    def __init__(self) -> None:
        self.allowed: list[tuple[str, str, AllowedSkip]] = []
        self.disallowed: list[tuple[str, str]] = []

    def _record(self, report) -> None:  # noqa: ANN001
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        nodeid, message = report.nodeid, skip_message(report)
        entry = next((e for e in ALLOWED_SKIPS if e.matches(nodeid, message)), None)
        if entry is None:
            self.disallowed.append((nodeid, message))
        else:
            self.allowed.append((nodeid, message, entry))

    def pytest_runtest_logreport(self, report) -> None:  # noqa: ANN001
        self._record(report)

    def pytest_collectreport(self, report) -> None:  # noqa: ANN001
        self._record(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.disallowed and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        tr = terminalreporter
        if self.allowed:
            tr.write_sep("-", f"{ENV_VAR}: {len(self.allowed)} allow-listed skip(s)")
            for nodeid, message, entry in self.allowed:
                tr.write_line(f"{nodeid}: {message} (allowed: {entry.why})")
        if self.disallowed:
            tr.write_sep("=", f"{ENV_VAR}: {len(self.disallowed)} skip(s) not in the allow-list", red=True)
            for nodeid, message in self.disallowed:
                tr.write_line(f"SKIP NOT ALLOWED {nodeid}: {message}")
            tr.write_line("Install what the test needs in .ci/run (or the dev extra), or add an entry with "
                          "its reason to ALLOWED_SKIPS in tests/ci_skip_policy.py.")


def pytest_configure(config: pytest.Config) -> None:
    if enabled():
        config.pluginmanager.register(SkipPolicy(), "agent-rl-skip-policy")
