"""pyarrow's allocator in a recording process (issue 19, the memory row): ``configure()`` loads
pyarrow with mimalloc committing arena memory on use, unless the user chose an allocator, and
leaves the environment as it found it. The memory it saves is measured by ``python -m bench
--only memory``; these tests check the mechanism in fresh interpreters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_rl_plugin.arrow_memory import (
    ARENA_EAGER_COMMIT,
    ARROW_POOL,
    PURGE_DELAY,
    child_environment,
    lean_arrow_allocator,
)
from agent_rl_plugin.store.merger_process import LeaseLimits, MergerProcess
from agent_rl_plugin.store.spool import write_segment
from tests.test_store_spool import count, recorded

ROOT = Path(__file__).resolve().parents[1]

#: A fresh agent that reports the allocator environment at the moment pyarrow starts loading
#: (inside configure(): ``at_import`` is missing otherwise), the environment after configure(),
#: and pyarrow's allocator.
PROBE = textwrap.dedent(
    """
    import builtins, json, os, sys
    seen = {}
    original = builtins.__import__
    def watching(name, *args, **kwargs):
        if name.split(".")[0] == "pyarrow" and "pyarrow" not in sys.modules and "at_import" not in seen:
            seen["at_import"] = os.environ.get("MIMALLOC_ARENA_EAGER_COMMIT")
            seen["purge_at_import"] = os.environ.get("MIMALLOC_PURGE_DELAY")
        return original(name, *args, **kwargs)
    builtins.__import__ = watching
    if sys.argv[2] == "pyarrow-first":
        import pyarrow
    import agent_rl_plugin as arl
    arl.configure(db=sys.argv[1])  # the store's exporters load pyarrow here
    import pyarrow
    seen["after"] = os.environ.get("MIMALLOC_ARENA_EAGER_COMMIT")
    seen["purge_after"] = os.environ.get("MIMALLOC_PURGE_DELAY")
    seen["pool"] = pyarrow.default_memory_pool().backend_name
    print(json.dumps(seen))
    """
)


def probe(tmp_path: Path, *, first: str = "configure", **env: str) -> dict[str, str | None]:
    environ = {k: v for k, v in os.environ.items() if k not in (ARENA_EAGER_COMMIT, PURGE_DELAY, ARROW_POOL)}
    environ.update(env, PYTHONPATH=str(ROOT), AGENT_RL_MERGER="thread")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "runs.duckdb"), first],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_configure_loads_pyarrow_with_lean_arenas_and_leaves_no_trace_in_the_environment(tmp_path):
    seen = probe(tmp_path)
    assert seen == {
        "at_import": "0",
        "purge_at_import": "0",
        "after": None,
        "purge_after": None,
        "pool": "mimalloc",
    }


def test_the_users_allocator_choice_wins(tmp_path):
    seen = probe(tmp_path, **{ARENA_EAGER_COMMIT: "1"})
    assert seen == {"at_import": "1", "purge_at_import": None, "after": "1", "purge_after": None, "pool": "mimalloc"}
    seen = probe(tmp_path, **{PURGE_DELAY: "50"})
    assert seen == {"at_import": None, "purge_at_import": "50", "after": None, "purge_after": "50", "pool": "mimalloc"}
    seen = probe(tmp_path, **{ARROW_POOL: "system"})
    assert seen == {"at_import": None, "purge_at_import": None, "after": None, "purge_after": None, "pool": "system"}


def test_pyarrow_loaded_before_configure_is_left_alone(tmp_path):
    seen = probe(tmp_path, first="pyarrow-first")
    assert seen == {"at_import": None, "purge_at_import": None, "after": None, "purge_after": None, "pool": "mimalloc"}


def test_the_block_sets_nothing_once_pyarrow_is_loaded(monkeypatch):
    monkeypatch.delenv(ARENA_EAGER_COMMIT, raising=False)
    monkeypatch.delenv(ARROW_POOL, raising=False)
    import pyarrow  # noqa: F401  (loaded in this process: nothing left to tune)

    with lean_arrow_allocator():
        assert ARENA_EAGER_COMMIT not in os.environ and PURGE_DELAY not in os.environ
    assert ARENA_EAGER_COMMIT not in os.environ


def test_child_environment_adds_the_option_unless_the_user_chose():
    assert child_environment({"PATH": "/bin"}) == {"PATH": "/bin", ARENA_EAGER_COMMIT: "0", PURGE_DELAY: "0"}
    assert child_environment({ARROW_POOL: "jemalloc"}) == {ARROW_POOL: "jemalloc"}
    assert child_environment({ARENA_EAGER_COMMIT: "2"}) == {ARENA_EAGER_COMMIT: "2"}
    assert child_environment({PURGE_DELAY: "5"}) == {PURGE_DELAY: "5"}


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/<pid>/environ")
def test_the_merger_child_starts_with_lean_arenas(tmp_path, monkeypatch):
    monkeypatch.delenv(ARENA_EAGER_COMMIT, raising=False)
    monkeypatch.delenv(PURGE_DELAY, raising=False)
    monkeypatch.delenv(ARROW_POOL, raising=False)
    db = tmp_path / "runs.duckdb"
    write_segment(db, recorded(2).spans)
    merger = MergerProcess(str(db))
    try:
        assert merger.merge(wait_s=5.0, limits=LeaseLimits(8, 64, 8_192, 1)) is not None
        environ = Path(f"/proc/{merger._child.pid}/environ").read_bytes().split(b"\0")
        assert f"{ARENA_EAGER_COMMIT}=0".encode() in environ and f"{PURGE_DELAY}=0".encode() in environ
    finally:
        merger.close()
    assert count(db) == 2 and ARENA_EAGER_COMMIT not in os.environ and PURGE_DELAY not in os.environ
