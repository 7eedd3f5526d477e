"""The example reward package in ``examples/reward-plugin``, installed with real pip.

pip installs it into a temporary target directory; ``agent-rl`` then runs in a subprocess with
that directory on ``PYTHONPATH`` and entry-point loading on, like after ``pip install``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from score_support import record_demo, rows

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "reward-plugin"


def pip_install(source: Path, target: Path) -> None:
    """``pip install --no-deps --target`` without network when the venv can build wheels
    (setuptools and wheel), else with pip's isolated build (setuptools from the package index)."""
    base = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check",
            "--target", str(target)]
    first = subprocess.run([*base, "--no-build-isolation", str(source)], capture_output=True, text=True, timeout=300)
    if first.returncode == 0:
        return
    second = subprocess.run([*base, str(source)], capture_output=True, text=True, timeout=300)
    if second.returncode != 0:
        raise AssertionError(f"pip install failed:\n{first.stderr}\n{second.stderr}")


def agent_rl_subprocess(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "AGENT_RL_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "agent_rl_plugin.cli.main", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )


@pytest.mark.slow
def test_installed_example_plugin_is_listed_and_scores(db_path, tmp_path):
    record_demo()
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path / "site"
    pip_install(source, site)
    assert (site / "agent_rl_reward_example").is_dir()

    listed = agent_rl_subprocess(site, "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    plugin = next(p for p in data["plugins"] if p["name"] == "example_rewards")
    assert plugin["version"] == "0.3.0" and plugin["distribution"] == "agent-rl-reward-example"
    assert not plugin["builtin"] and plugin["hooks"] == ["agent_rl_register_rewards"]
    assert {r["name"]: r["mode"] for r in plugin["rewards"]} == {
        "example_tool_success": "pointwise", "example_brevity_rank": "batch"
    }
    assert {r["plugin_version"] for r in data["rewards"] if r["plugin"] == "example_rewards"} == {"0.3.0/1"}

    scored = agent_rl_subprocess(site, "score", "--db", str(db_path), "--plugin", "example_rewards", "--json")
    assert scored.returncode == 0, scored.stderr
    report = json.loads(scored.stdout)
    assert report["ok"] and {r["name"]: r["scored"] for r in report["rewards"]} == {
        "example_tool_success": 6, "example_brevity_rank": 6
    }
    written = rows(db_path, "select name, step_index, value, plugin, plugin_version, source from rewards "
                            "where plugin = 'example_rewards'")
    assert {(w["plugin"], w["plugin_version"], w["source"]) for w in written} == {("example_rewards", "0.3.0/1", "code")}
    tool_steps = [w for w in written if w["name"] == "example_tool_success" and w["step_index"] is not None]
    assert len(tool_steps) >= 12 and all(w["value"] in (0.0, 1.0) for w in tool_steps)
    ranks = [w["value"] for w in written if w["name"] == "example_brevity_rank"]
    assert len(ranks) == 6 and all(0.0 <= v <= 1.0 for v in ranks)

    again = agent_rl_subprocess(site, "score", "--db", str(db_path), "--plugin", "example_rewards", "--json")
    assert json.loads(again.stdout)["rows_written"] == 0
