"""constraints.txt is a full lock (scripts/lock_dependencies.py): exact pins only, torch held at its
CPU build's version, and every requirement pyproject.toml declares pinned inside its bounds, so a
bound raised without regenerating the lock fails here rather than at install time."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import lock_dependencies  # noqa: E402

packaging_requirements = pytest.importorskip("packaging.requirements")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the lock is made on 3.11
    import tomli as tomllib


def test_every_line_is_an_exact_pin_and_torch_is_held():
    pins = lock_dependencies.read_lock()  # raises on anything but name==version
    lines = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert len(pins) == len(lines), "a package is pinned twice"
    assert pins["torch"] == "2.13.0"
    assert "pip" not in pins and "agent-rl-plugin" not in pins
    assert len(pins) > 50, "a full lock pins the transitive dependencies too"


def test_every_declared_requirement_is_pinned_within_its_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared += extra
    pins = lock_dependencies.read_lock()
    problems = []
    for text in declared:
        req = packaging_requirements.Requirement(text)
        if lock_dependencies.normalize(req.name) == "agent-rl-plugin":
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        pinned = pins.get(lock_dependencies.normalize(req.name))
        if pinned is None:
            problems.append(f"{text}: not pinned")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{text}: constraints.txt pins {pinned}")
    assert not problems, "regenerate with python scripts/lock_dependencies.py: " + "; ".join(problems)


def test_the_header_says_how_to_regenerate():
    header = "\n".join(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("#"))
    assert "python scripts/lock_dependencies.py" in header
    assert re.search(r"--check", header)
