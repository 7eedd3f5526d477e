#!/usr/bin/env python3
"""Regenerate or check ``constraints.txt``, the full lock of ``pip install -c constraints.txt -e ".[dev]"``.

    python scripts/lock_dependencies.py            # rebuild the lock (fresh venv, newest versions)
    python scripts/lock_dependencies.py --check    # does this environment match the lock exactly?
    python scripts/lock_dependencies.py --check --python .venv/bin/python

Regenerating: a fresh virtual environment (in a temporary folder) gets
``pip install "torch==2.13.0" -e ".[dev]"``, so every other package takes the newest version the
index offers; ``pip freeze --all --exclude-editable`` then becomes ``constraints.txt``, every
package pinned with ``==`` (transitive ones included, setuptools and wheel too; pip itself is
left out). Run it with the Python that CI uses (3.11 here): the lock is for that Python.

torch stays at ``torch==2.13.0``: on these machines that is a CPU build on disk
(``torch-2.13.0+cpu``, found through pip's find-links), and ``==2.13.0`` matches the local
``+cpu`` label, so pip takes it; the ``+cpu`` suffix is dropped from the pin so the file also works
where only the index's ``2.13.0`` exists. Any newer torch pulls gigabytes of CUDA packages.

The integrations (``integrations/run.py``) install each framework with the repository's
constraints.txt too, and some frameworks pin exact versions that no lock of the main environment can
share (massgen 0.1.97 pins ``datasets==3.2.0``, TRL 1.16 needs ``datasets>=4.7``). After writing the
lock the script resolves every integration against it with ``uv pip compile`` (resolution only,
nothing installed) and lists the ones that do not resolve: information for whoever maintains
``integrations/run.py``, not a failure of the lock (skipped once run.py stops passing this file).

Checking (``--check``): every distribution installed in the environment, except pip and the project
itself, must be pinned in ``constraints.txt`` at exactly the installed version (a ``+local`` label is
ignored, as pip ignores it for ``==``). A dependency added to pyproject.toml without regenerating the
lock shows up here as "not pinned". Exit status 0 when it matches, 1 otherwise. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "constraints.txt"
TORCH_PIN = "torch==2.13.0"
# Not pinned: the installer itself (a venv brings its own) and the project (installed editable).
UNPINNED = {"pip", "agent-rl-plugin"}

HEADER = """\
# The full lock: every package that `pip install -c constraints.txt -e ".[dev]"` installs, pinned
# with ==, transitive dependencies included. Generated on CPython {python} ({platform}); other
# Pythons and platforms may need a different set.
#
# Regenerate (fresh venv, newest versions from the index, torch held at 2.13.0), then run the tests:
#     python scripts/lock_dependencies.py
# Check that an environment matches it exactly:
#     python scripts/lock_dependencies.py --check --python .venv/bin/python
# CI (.ci/run) installs from this file, checks it, and also tests the store/tracing/reliability
# subset against the newest and the lowest allowed versions (.ci/dependency_sets.sh).
#
# torch 2.13.0 has a local CPU build on these machines (torch-2.13.0+cpu under /opt/wheels, which
# ==2.13.0 matches); anything newer pulls gigabytes of CUDA packages.
"""


def normalize(name: str) -> str:
    """PEP 503 name normalization (``Huggingface_Hub`` -> ``huggingface-hub``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path | None = None) -> dict[str, str]:
    """{normalized name: version} of the ``name==version`` lines of a constraints file (the lock)."""
    path = path or LOCK
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;]+)", line)
        if match is None:
            raise SystemExit(f"{path.name}: not an exact pin: {raw!r}")
        pins[normalize(match.group(1))] = match.group(2)
    return pins


def installed(python: str) -> dict[str, tuple[str, str]]:
    """{normalized name: (name, version)} of the distributions in ``python``'s environment."""
    code = ("import importlib.metadata as m, json; print(json.dumps(sorted("
            "{(d.metadata['Name'], d.version) for d in m.distributions()})))")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout
    return {normalize(name): (name, version) for name, version in json.loads(out)}


def public(version: str) -> str:
    """The version without its local label: ``2.13.0+cpu`` -> ``2.13.0``."""
    return version.split("+", 1)[0]


def check(python: str) -> int:
    pins = read_lock()
    problems = []
    for key, (name, version) in sorted(installed(python).items()):
        if key in UNPINNED:
            continue
        if key not in pins:
            problems.append(f"{name}=={version} is installed but not pinned in constraints.txt")
        elif public(version) != public(pins[key]):
            problems.append(f"{name}=={version} is installed, constraints.txt pins {pins[key]}")
    if problems:
        print("constraints.txt does not match the environment of " + python + ":")
        for problem in problems:
            print("  " + problem)
        print("Regenerate it with: python scripts/lock_dependencies.py")
        return 1
    print(f"constraints.txt: the environment of {python} matches the lock ({len(pins)} pins)")
    return 0


def install_and_freeze(python: str, venv: Path) -> list[str]:
    """A fresh venv with torch==2.13.0 and .[dev], everything else newest: its pins, sorted."""
    subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True)
    vpy = str(venv / "bin" / "python")
    # No -c constraints.txt here: everything but torch takes the newest version.
    subprocess.run([vpy, "-m", "pip", "install", TORCH_PIN, "-e", f"{ROOT}[dev]"], check=True, cwd=ROOT)
    freeze = subprocess.run([vpy, "-m", "pip", "freeze", "--all", "--exclude-editable"],
                            check=True, capture_output=True, text=True).stdout
    pins = []
    for line in freeze.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        if not sep:
            raise SystemExit(f"pip freeze printed a line that is not name==version: {line!r}")
        if normalize(name) in UNPINNED:
            continue
        if normalize(name) == "torch":
            if public(version) != TORCH_PIN.split("==")[1]:
                raise SystemExit(f"expected {TORCH_PIN}, pip installed torch {version}")
            version = public(version)  # drop "+cpu": ==2.13.0 still selects the local CPU build
        pins.append(f"{name}=={version}")
    if not any(normalize(p.split("==")[0]) == "torch" for p in pins):
        raise SystemExit("torch is missing from the freeze")
    return sorted(pins, key=lambda p: normalize(p.split("==")[0]))


def uv_tool(tmp: Path, python: str) -> str:
    """uv from PATH, else pip-installed into a throwaway venv (never into the lock's venv)."""
    found = shutil.which("uv")
    if found:
        return found
    tools = tmp / "tools"
    subprocess.run([python, "-m", "venv", str(tools)], check=True)
    subprocess.run([str(tools / "bin" / "python"), "-m", "pip", "install", "--quiet", "uv"], check=True)
    return str(tools / "bin" / "uv")


def resolves(uv: str, vpy: str, name: str, tmp: Path) -> bool:
    """Does integration NAME resolve as integrations/run.py installs it, with the new lock?"""
    here = ROOT / "integrations" / name
    reqs = tmp / f"req-{name}.txt"
    reqs.write_text(f"-e {ROOT}\n-e {here}[test]\n")
    cmd = [uv, "pip", "compile", "--quiet", "--python", vpy, str(reqs), "-o", str(tmp / f"{name}.txt"), "-c", str(LOCK)]
    if (here / "constraints.txt").exists():
        cmd += ["-c", str(here / "constraints.txt")]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"  {name}: does not resolve with constraints.txt:\n"
              + "\n".join("    " + line for line in result.stderr.strip().splitlines()[-4:]), flush=True)
    return result.returncode == 0


def lock(python: str, keep: Path | None) -> int:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agent-rl-lock-") as tmp_name:
        tmp = Path(tmp_name)
        venv = keep or tmp / "venv"
        pins = install_and_freeze(python, venv)
        vpy = str(venv / "bin" / "python")
        info = subprocess.run([vpy, "-c", "import platform, sys; print(platform.python_version(), "
                               "sys.platform + '-' + platform.machine())"],
                              check=True, capture_output=True, text=True).stdout.split()
        LOCK.write_text(HEADER.format(python=info[0], platform=info[1]) + "\n".join(pins) + "\n")
        print(f"wrote {LOCK.relative_to(ROOT)}: {len(pins)} pins in {time.monotonic() - start:.0f} s", flush=True)
        runner = ROOT / "integrations" / "run.py"
        if not (runner.exists() and 'ROOT / "constraints.txt"' in runner.read_text()):
            return 0
        print("integrations/run.py installs every integration with constraints.txt; resolving each with uv:")
        uv = uv_tool(tmp, python)
        integrations = sorted(p.parent.name for p in (ROOT / "integrations").glob("*/pyproject.toml")
                              if not p.parent.name.startswith("."))
        failed = [name for name in integrations if not resolves(uv, vpy, name, tmp)]
        print(f"  {len(integrations) - len(failed)} of {len(integrations)} resolve"
              + (f"; not: {', '.join(failed)}" if failed else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare an environment with the lock")
    parser.add_argument("--python", default=sys.executable,
                        help="with --check: the environment's python; else the python that makes the venv")
    parser.add_argument("--venv", type=Path, help="build the lock venv here (kept) instead of a temporary folder")
    args = parser.parse_args(argv)
    return check(args.python) if args.check else lock(args.python, args.venv)


if __name__ == "__main__":
    sys.exit(main())
