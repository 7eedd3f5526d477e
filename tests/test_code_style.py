"""The package passes its linter and formatter (ruff, configured in pyproject.toml), so a
contributor running the test suite sees what CI would refuse. Types (mypy) are checked by .ci/run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is part of the dev extra: pip install -c constraints.txt -e '.[dev]'"
    return subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_lint_passes():
    result = _ruff("check", "--no-cache", "agent_rl_plugin")
    assert result.returncode == 0, "fix with `ruff check --fix agent_rl_plugin`:\n" + result.stdout[-4000:]


def test_ruff_format_passes():
    result = _ruff("format", "--check", "--no-cache", "agent_rl_plugin")
    assert result.returncode == 0, "reformat with `ruff format agent_rl_plugin`:\n" + result.stdout[-4000:]
