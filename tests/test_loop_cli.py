"""``agent-rl loop`` and ``agent-rl demo`` (the loop) from the command line, as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import duckdb
import pytest

pytest.importorskip("torch")


def agent_rl_exe() -> str:
    return shutil.which("agent-rl") or os.path.join(os.path.dirname(sys.executable), "agent-rl")


def agent_rl(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([agent_rl_exe(), *args], capture_output=True, text=True, timeout=600, cwd=cwd)


class Started:
    """An ``agent-rl`` command started in the background, its output going to files;
    :meth:`result` waits for it."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.folder = folder
        with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
            self.process = subprocess.Popen([agent_rl_exe(), *args], stdout=out, stderr=err, cwd=folder)

    def result(self) -> subprocess.CompletedProcess:
        returncode = self.process.wait(timeout=600)
        out, err = (self.folder / "stdout").read_text(), (self.folder / "stderr").read_text()
        return subprocess.CompletedProcess(self.process.args, returncode, out, err)


@pytest.fixture(scope="module")
def loops(tmp_path_factory) -> Iterator[dict[str, tuple[Path, Started]]]:
    """The two one-round loops of this module (``agent-rl loop --config`` and ``agent-rl demo``),
    started together on first use: each trains with one torch thread, so on a machine with
    several cores they run side by side. name -> (its folder, the started command)."""
    config_dir = tmp_path_factory.mktemp("loop_config")
    config = config_dir / "loop.yaml"
    config.write_text(f"env: grid\nmethod: rloo\nrounds: 3\ngroup_size: 2\noutput_dir: {config_dir / 'run'}\n")
    demo_dir = tmp_path_factory.mktemp("loop_demo")
    started = {
        "config": (config_dir, Started(config_dir, "loop", "--config", str(config), "--rounds", "1", "--json")),
        "demo": (demo_dir, Started(demo_dir, "demo", "--db", str(demo_dir / "demo.duckdb"), "--rounds", "1", "--json")),
    }
    yield started
    for _, command in started.values():
        if command.process.poll() is None:
            command.process.kill()
            command.process.wait()


def test_loop_from_a_config_file_prints_its_rounds_as_json_and_records_them(loops):
    _, command = loops["config"]
    done = command.result()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [r["round"] for r in result["rounds"]] == [0, 1]
    assert result["rounds"][1]["method"] == "rloo"
    assert len(result["heldout_success"]) == 2
    assert "round  1" in done.stderr  # progress goes to stderr, stdout stays JSON
    connection = duckdb.connect(result["db"], read_only=True)
    try:
        assert connection.execute("select count(*) from loop_rounds").fetchone()[0] == 2
    finally:
        connection.close()


def test_bad_settings_exit_1_with_the_fix(tmp_path):
    done = agent_rl("loop", "--env", "maze", "--output-dir", str(tmp_path))
    assert done.returncode == 1
    assert "unknown environment 'maze'" in done.stderr and "grid" in done.stderr
    assert "Traceback" not in done.stderr
    config = tmp_path / "bad.yaml"
    config.write_text("env: grid\nlearning_rate: 3\n")
    done = agent_rl("loop", "--config", str(config))
    assert done.returncode == 1 and "unknown settings learning_rate" in done.stderr


def test_demo_is_the_loop_and_json_gives_the_rounds(loops):
    folder, command = loops["demo"]
    db = folder / "demo.duckdb"
    done = command.result()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["loop_id"].startswith("demo-")
    assert [r["round"] for r in result["rounds"]] == [0, 1]
    assert result["first"] == result["heldout_success"][0] and result["last"] == result["heldout_success"][-1]
    assert os.path.isdir(f"{db}.loop")
    # the queries the demo suggests next all return rows on its database
    from agent_rl_plugin.cli.demo import LOOP_QUERIES

    connection = duckdb.connect(str(db), read_only=True)
    try:
        for sql in LOOP_QUERIES:
            assert connection.execute(sql).fetchall(), sql
    finally:
        connection.close()
