"""Isolated virtual environments for the peers (MLflow, Phoenix, Agent Lightning), built like the
integrations' (``integrations/run.py``): one environment per peer, reused while its inputs are
unchanged, installed from the package index **at build time only**.

Where: ``$AGENT_RL_BENCH_PEERS_DIR/<peer>`` when that variable is set, else
``~/.cache/agent-rl-bench-peers/<peer>`` (outside the repository; nothing to ignore in git).

How: ``python -m venv``, then (only for a peer that needs torch) ``pip install torch==2.13.0``
first with ``integrations/constraints.txt`` (the CPU build on these machines; a newer torch
pulls gigabytes of CUDA packages), then ``pip install <requirements>`` with the same
constraints file, so torch can neither be pulled in nor upgraded by a peer. The environment
is stamped with a hash of its inputs (requirements, constraints, Python version) and rebuilt
when they change. Build time is reported apart and never enters a timing.

At run time nothing may reach the network: :func:`offline_env` is the environment every peer
process gets (telemetry and tracking off, Hugging Face offline, no proxy of the index).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "integrations" / "constraints.txt"
STAMP = ".agent-rl-peer-inputs"
#: The torch every peer environment is held to (a local CPU wheel on these machines).
TORCH_PIN = "torch==2.13.0"


@dataclass(frozen=True)
class PeerSpec:
    """What one peer environment holds.

    ``requirements`` are pip requirement strings; ``distribution`` is the one whose installed
    version the row reports; ``needs_torch`` installs :data:`TORCH_PIN` before anything else."""

    name: str
    requirements: tuple[str, ...]
    distribution: str
    needs_torch: bool = False
    extra_pip_args: tuple[str, ...] = field(default_factory=tuple)


@dataclass
class PeerEnv:
    """The outcome of :func:`ensure_env`: ``python`` is None when the build failed (``reason`` says
    why, with the tail of the installer's output)."""

    spec: PeerSpec
    path: Path
    python: Path | None
    version: str | None = None
    reason: str = ""
    build_s: float = 0.0
    reused: bool = False
    commands: list[list[str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.python is not None


def peers_dir() -> Path:
    """Folder holding every peer environment (see the module doc)."""
    override = os.environ.get("AGENT_RL_BENCH_PEERS_DIR")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "agent-rl-bench-peers"


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def inputs_hash(spec: PeerSpec) -> str:
    """Hash of everything an environment is built from; a change rebuilds it."""
    digest = hashlib.sha256()
    digest.update(repr((spec.name, spec.requirements, spec.needs_torch, spec.extra_pip_args)).encode())
    digest.update(CONSTRAINTS.read_bytes() if CONSTRAINTS.exists() else b"-")
    digest.update(sys.version.encode())
    return digest.hexdigest()


def venv_command(venv: Path) -> list[str]:
    """The command that creates an empty environment at ``venv`` (with this interpreter)."""
    return [sys.executable, "-m", "venv", str(venv)]


def install_commands(spec: PeerSpec, python: Path) -> list[list[str]]:
    """The pip commands that fill a fresh environment (torch first when needed; every command
    carries the constraints file, so torch stays at :data:`TORCH_PIN`)."""
    base = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if CONSTRAINTS.exists():
        base += ["-c", str(CONSTRAINTS)]
    commands = []
    if spec.needs_torch:
        commands.append([*base, TORCH_PIN])
    commands.append([*base, *spec.extra_pip_args, *spec.requirements])
    return commands


def installed_version(python: Path, distribution: str) -> str | None:
    """``importlib.metadata.version(distribution)`` inside the environment (None if absent)."""
    code = (
        "import importlib.metadata as m, sys\ntry: print(m.version(sys.argv[1]))\nexcept m.PackageNotFoundError: pass\n"
    )
    try:
        out = subprocess.run(
            [str(python), "-c", code, distribution], capture_output=True, text=True, timeout=60, env=offline_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def ensure_env(spec: PeerSpec, *, reinstall: bool = False, log=print, timeout_s: float = 1800) -> PeerEnv:
    """Create or reuse the environment of ``spec``; never raises for a failed install (the
    :class:`PeerEnv` then has ``python=None`` and the reason)."""
    venv = peers_dir() / spec.name
    python = venv_python(venv)
    stamp = venv / STAMP
    wanted = inputs_hash(spec)
    env = PeerEnv(spec=spec, path=venv, python=None)
    if reinstall and venv.exists():
        shutil.rmtree(venv)
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        env.python, env.reused = python, True
        env.version = installed_version(python, spec.distribution)
        return env
    started = time.perf_counter()
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    commands = [venv_command(venv), *install_commands(spec, python)]
    build_env = dict(os.environ)
    build_env.pop("VIRTUAL_ENV", None)
    build_env.pop("PYTHONPATH", None)
    for command in commands:
        log(f"peers: building {spec.name}: $ {' '.join(command)}")
        env.commands.append(command)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=build_env)
        except subprocess.TimeoutExpired:
            env.reason = f"install of {spec.name} timed out after {timeout_s:.0f} s"
            env.build_s = time.perf_counter() - started
            return env
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-12:]
            env.reason = f"install of {spec.name} failed (exit {done.returncode}): " + " | ".join(tail)
            env.build_s = time.perf_counter() - started
            return env
    stamp.write_text(wanted, encoding="utf-8")
    env.python = python
    env.build_s = time.perf_counter() - started
    env.version = installed_version(python, spec.distribution)
    return env


#: Variables that keep every peer off the network at run time (telemetry, tracking, hubs).
OFFLINE_VARS = {
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "PHOENIX_ENABLE_AUTH": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "AGENTOPS_API_KEY": "",
    "AGENTOPS_ENABLED": "false",
    "WANDB_MODE": "disabled",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # agentlightning imports litellm, which fetches a price list
    "LITELLM_TELEMETRY": "False",
    "OTEL_SDK_DISABLED": "false",
    "PIP_NO_INDEX": "1",
    "no_proxy": "*",
}


def offline_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a peer process: ours, minus the main venv, plus :data:`OFFLINE_VARS`."""
    env = dict(os.environ)
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(key, None)
    env.update(OFFLINE_VARS)
    if extra:
        env.update(extra)
    return env
