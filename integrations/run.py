#!/usr/bin/env python3
"""Run the tests of one, several or all framework integrations, each in its own virtualenv.

    python integrations/run.py massgen            # one integration
    python integrations/run.py --all              # every integrations/*/ with a pyproject.toml
    python integrations/run.py --list             # names, one per line
    python integrations/run.py massgen -- -k vote # arguments after -- go to pytest

For each integration NAME it creates (or reuses) ``integrations/.venvs/NAME`` and installs, with
``integrations/constraints.txt`` (torch only: the repository's constraints.txt is the main
environment's full lock, which frameworks cannot share) and the integration's own
``constraints.txt`` when it has one: the main package (editable, without its heavy ``train`` extra) and the integration
(editable, with its ``test`` extra); then runs the integration's ``tests/`` with that
environment's pytest. Frameworks pin conflicting versions (massgen pins ``openai==2.2.0``,
openai-agents wants ``openai>=3``), hence one environment per integration.

Installs use ``uv`` when it is on PATH or can be installed into the environment (much faster on
resolver-heavy frameworks), else pip. An environment is reinstalled when its inputs change
(pyproject/constraints files) or with ``--reinstall``. Exit status: 0 when every selected
integration passed, 1 when one failed (its install or its tests), 2 for a usage error.
Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"
STAMP = ".agent-rl-inputs"


def integrations() -> list[str]:
    """Names of the integrations: directories of integrations/ holding a pyproject.toml."""
    return sorted(p.parent.name for p in HERE.glob("*/pyproject.toml") if not p.parent.name.startswith("."))


def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _inputs_hash(name: str) -> str:
    digest = hashlib.sha256()
    for path in (ROOT / "pyproject.toml", HERE / "constraints.txt", HERE / name / "pyproject.toml",
                 HERE / name / "constraints.txt"):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes() if path.exists() else b"-")
    digest.update(sys.version.encode())
    return digest.hexdigest()


def _run(cmd: list[str], log: list[str], **kwargs) -> int:
    print("  $ " + " ".join(str(c) for c in cmd), flush=True)
    log.append(" ".join(str(c) for c in cmd))
    return subprocess.call([str(c) for c in cmd], **kwargs)


def _installer(python: Path, log: list[str]) -> list[str]:
    """The install command prefix: uv (from PATH or installed in the venv), else pip."""
    if os.environ.get("AGENT_RL_INTEGRATIONS_PIP"):
        return [str(python), "-m", "pip", "install"]
    uv = shutil.which("uv")
    venv_uv = python.parent / ("uv.exe" if os.name == "nt" else "uv")
    if uv is None and not venv_uv.exists():
        _run([python, "-m", "pip", "install", "--quiet", "uv"], log)
    if venv_uv.exists():
        uv = str(venv_uv)
    if uv is not None:
        return [uv, "pip", "install", "--python", str(python)]
    return [str(python), "-m", "pip", "install"]


def ensure_venv(name: str, reinstall: bool, log: list[str]) -> Path | None:
    """Create/refresh integrations/.venvs/NAME; returns its python, or None when install failed."""
    venv = VENVS / name
    python = _python(venv)
    stamp = venv / STAMP
    wanted = _inputs_hash(name)
    if reinstall and venv.exists():
        shutil.rmtree(venv)
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        print(f"  reusing {venv.relative_to(ROOT)}", flush=True)
        return python
    if not python.exists():
        VENVS.mkdir(parents=True, exist_ok=True)
        if _run([sys.executable, "-m", "venv", venv], log) != 0:
            return None
    cmd = _installer(python, log)
    for constraints in (HERE / "constraints.txt", HERE / name / "constraints.txt"):
        if constraints.exists():
            cmd += ["-c", str(constraints)]
    cmd += ["-e", str(ROOT), "-e", f"{HERE / name}[test]"]
    if _run(cmd, log) != 0:
        return None
    stamp.write_text(wanted)
    return python


def run_one(name: str, reinstall: bool, pytest_args: list[str]) -> tuple[str, str, float]:
    """(name, outcome, seconds) where outcome is passed, failed or install failed."""
    start = time.monotonic()
    print(f"== {name}", flush=True)
    log: list[str] = []
    python = ensure_venv(name, reinstall, log)
    if python is None:
        return name, "install failed", time.monotonic() - start
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    code = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", *pytest_args], log,
                cwd=HERE / name, env=env)
    return name, ("passed" if code == 0 else f"failed (pytest exit {code})"), time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="integrations to test (see --list)")
    parser.add_argument("--all", action="store_true", help="test every integration")
    parser.add_argument("--list", action="store_true", help="list the integrations and exit")
    parser.add_argument("--reinstall", action="store_true", help="recreate the environments first")
    args = parser.parse_args(argv)
    known = integrations()
    if args.list:
        print("\n".join(known))
        return 0
    names = known if args.all else args.names
    if not names:
        parser.print_usage(sys.stderr)
        print("error: name an integration, or use --all / --list", file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"error: unknown integration(s) {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    results = [run_one(name, args.reinstall, pytest_args) for name in names]
    print("\n== summary")
    for name, outcome, seconds in results:
        print(f"  {name:<20} {outcome:<28} {seconds:7.1f}s")
    failed = [r for r in results if r[1] != "passed"]
    print(f"  {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
