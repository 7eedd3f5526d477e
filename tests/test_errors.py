"""One error family: every exception class the package defines for users derives from
``AgentRLError(message, hint)``, keeps its built-in base, and prints as one line plus the fix."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import agent_rl_plugin
from agent_rl_plugin.errors import AgentRLError

#: Internal signals that never reach a user (caught where they are raised).
INTERNAL = {"agent_rl_plugin.receiver.copies.RateLimited"}


def _package_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(agent_rl_plugin.__path__, "agent_rl_plugin."):
        # *_script modules are programs run in a sandbox or child process, not importable libraries.
        if info.name.endswith("_script") or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_public_exception_is_an_agent_rl_error():
    exceptions = _package_exceptions()
    assert len(exceptions) >= 20  # the walk found the package's errors
    outside = sorted(n for n, cls in exceptions.items() if not issubclass(cls, AgentRLError) and n not in INTERNAL)
    assert outside == [], f"derive these from agent_rl_plugin.errors.AgentRLError: {outside}"


def test_errors_keep_the_builtin_base_earlier_code_catches():
    from agent_rl_plugin.rollouts.agent_call import RolloutTimeout
    from agent_rl_plugin.store.spool import SpoolNotPrivate
    from agent_rl_plugin.store.user_sql import SqlRefused
    from agent_rl_plugin.train.config import TrainConfigError

    assert issubclass(SqlRefused, ValueError) and issubclass(TrainConfigError, ValueError)
    assert issubclass(SpoolNotPrivate, PermissionError) and issubclass(RolloutTimeout, TimeoutError)


def test_message_and_hint():
    error = AgentRLError("database x.duckdb is locked", "close the other connection")
    assert str(error) == "database x.duckdb is locked"
    assert error.hint == "close the other connection"
    assert error.describe() == "database x.duckdb is locked. Fix: close the other connection."
    assert AgentRLError("no fix").describe() == "no fix"


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--where", "bogus_column = 1"],  # printed by the command
        ["query", "delete from spans"],
        ["export", "parquet", "--where", "bogus_column = 1"],  # printed by the entry point's handler
    ],
)
def test_the_cli_prints_an_error_of_the_family_as_one_line_and_the_fix(tmp_path, args):
    import subprocess
    import sys

    import agent_rl_plugin as arl

    db = tmp_path / "t.duckdb"
    arl.configure(db=str(db))
    with arl.rollout(task_id="t"):
        arl.emit_reward(1.0)
    arl.flush()
    arl.shutdown()
    out = tmp_path / "r.html"
    extra = ["--db", str(db)] + (["--out", str(out)] if args[0] in ("report", "export") else [])
    result = subprocess.run(
        [sys.executable, "-m", "agent_rl_plugin", *args, *extra], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    assert any(line.startswith("fix: ") for line in lines[1:])


def test_a_subclass_that_bypasses_the_base_init_still_prints():
    class Legacy(AgentRLError):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, message)

    assert str(Legacy("old style")) == "old style" and Legacy("x").hint is None


def test_an_error_quoting_user_input_prints_it_as_text_not_markup(tmp_path):
    """A message that quotes what the user typed (here a rollout id) is printed as written:
    rich markup in it is neither applied nor swallowed."""
    import subprocess
    import sys

    import agent_rl_plugin as arl

    db = tmp_path / "t.duckdb"
    arl.configure(db=str(db))
    with arl.rollout(task_id="t"):
        arl.emit_reward(1.0)
    arl.flush()
    arl.shutdown()
    result = subprocess.run(
        [sys.executable, "-m", "agent_rl_plugin", "traces", "show", "[red]abc[/red]", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "no rollout with id '[red]abc[/red]'" in result.stderr, result.stderr
