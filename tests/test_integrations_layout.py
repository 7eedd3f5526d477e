"""Every integration package under integrations/ has the shape docs/integrations/README.md
describes (checked without importing any framework)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
INTEGRATIONS = ROOT / "integrations"
DOCS = ROOT / "docs" / "integrations"
PROJECTS = sorted(INTEGRATIONS.glob("*/pyproject.toml"))


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_there_are_integrations():
    assert PROJECTS, "integrations/*/pyproject.toml: none found"


@pytest.mark.parametrize("pyproject", PROJECTS, ids=lambda p: p.parent.name)
def test_integration_layout(pyproject: Path):
    name = pyproject.parent.name  # a Python-friendly directory name, e.g. pydantic_ai
    dashed = name.replace("_", "-")  # the distribution and page names, e.g. pydantic-ai
    data = tomllib.loads(pyproject.read_text())
    project = data["project"]
    # A test environment: tests of a core feature against a package whose pins the main lock
    # cannot hold (LiteLLM capture); no package or entry point of its own.
    environment_only = data.get("tool", {}).get("agent-rl", {}).get("test-environment", False)
    expected = f"agent-rl-{dashed}-tests" if environment_only else f"agent-rl-{dashed}"
    assert re.sub(r"[-_.]+", "-", project["name"].lower()) == expected
    dependencies = {_requirement_name(r) for r in project.get("dependencies", [])}
    assert "agent-rl-plugin" in dependencies
    entry_points = project.get("entry-points", {}).get("agent_rl_plugin", {})
    if environment_only:
        tested = {_requirement_name(r) for r in project["optional-dependencies"]["test"]}
        assert dashed in tested, "a test environment installs the package it tests in its [test] extra"
        assert not entry_points and data["tool"]["setuptools"]["packages"] == [], "no package of its own"
    else:
        assert len(dependencies) >= 2, "an integration depends on its framework too"
        assert entry_points, "declares an entry point in group agent_rl_plugin"
    for target in entry_points.values():
        module = target.split(":")[0]
        assert (pyproject.parent / "src" / Path(*module.split("."))).with_suffix(".py").exists() or (
            pyproject.parent / "src" / Path(*module.split(".")) / "__init__.py"
        ).exists(), f"entry point target {target} not found under src/"
    assert "test" in project.get("optional-dependencies", {}), "a [test] extra for integrations/run.py"
    tests = pyproject.parent / "tests"
    assert tests.is_dir() and any(tests.glob("test_*.py"))
    page = DOCS / f"{dashed}.md"
    assert page.exists(), f"docs/integrations/{dashed}.md"
    assert f"({dashed}.md)" in (DOCS / "README.md").read_text(), "listed in docs/integrations/README.md"


def test_runner_lists_every_integration():
    out = subprocess.run([sys.executable, str(INTEGRATIONS / "run.py"), "--list"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [p.parent.name for p in PROJECTS]


def test_runner_rejects_unknown_names():
    out = subprocess.run([sys.executable, str(INTEGRATIONS / "run.py"), "no-such-framework"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown integration" in out.stderr


def test_venvs_are_ignored():
    assert "integrations/.venvs/" in (ROOT / ".gitignore").read_text().splitlines()
