"""What the peer rows share: getting a peer's environment (or the reason it is unavailable),
running a worker script on either side and reading its one JSON line, free ports.

Our side runs with the bench's own interpreter (the main virtualenv, agent-rl importable);
the peer side with the peer environment's python and :func:`bench.peers.envs.offline_env`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from agent_rl_plugin.errors import AgentRLError
from bench.harness import Context, Row
from bench.peers import SPECS
from bench.peers.envs import PeerEnv, ensure_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class PeerRunError(AgentRLError):
    """A worker process of a peer row failed (its exit status and the tail of its output)."""


def ours_env() -> dict[str, str]:
    """The environment of our side's worker processes (the bench's own interpreter)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")
    return env


def run_json(command: list[str], env: dict[str, str], timeout_s: float, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``command``; its last stdout line is a JSON object, returned. Raises
    :class:`PeerRunError` on a non-zero exit, a timeout or no JSON."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=str(cwd) if cwd else None
        )
    except subprocess.TimeoutExpired as exc:
        raise PeerRunError(
            f"{Path(command[1]).name} timed out after {timeout_s:.0f} s",
            hint="rerun with --quick, or look at the peer's own output by running it alone",
        ) from exc
    lines = [line for line in done.stdout.strip().splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise PeerRunError(
            f"{Path(command[1]).name} exited with status {done.returncode}: {tail}",
            hint="run the same command by hand with the peer environment's python",
        )
    return json.loads(lines[-1])


def peer_env(name: str, ctx: Context, row: Row) -> PeerEnv:
    """The environment of peer ``name`` (built or reused; the build is never timed); records its
    version, build time and path in ``row.info``, and sets ``row.skipped`` when unavailable."""
    env = ensure_env(SPECS[name], log=ctx.log)
    row.info[f"{name}_env"] = {
        "path": str(env.path),
        "version": env.version,
        "reused": env.reused,
        "build_s_excluded": round(env.build_s, 1),
    }
    if not env.ok:
        row.skipped = f"{name} unavailable: {env.reason}"
    elif env.version is None:
        row.skipped = f"{name} unavailable: its environment holds no {SPECS[name].distribution}"
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def share(persisted: int | None, sent: int) -> str:
    """``"1,234 of 2,001 stored (62%)"``."""
    if persisted is None:
        return f"? of {sent:,} stored"
    return f"{persisted:,} of {sent:,} stored ({100 * persisted / sent:.0f}%)" if sent else "nothing sent"


def guarded(row: Row, label: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``: one peer measurement; a failure is noted on the row (with its reason), not raised."""
    try:
        return fn(*args)
    except (PeerRunError, OSError) as exc:
        row.notes.append(f"{label}: {exc}")
        row.info.setdefault("peer_failures", {})[label] = str(exc)
        return None


PYTHON = sys.executable
