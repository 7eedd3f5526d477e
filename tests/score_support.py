"""Helpers for the scoring, labelling and task tests: a recorded demo database, test reward
plugins registered on the test's plugin manager, and running ``agent-rl`` in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

import duckdb
from typer.testing import CliRunner

import agent_rl_plugin as arl
from agent_rl_plugin.cli.main import build_app
from agent_rl_plugin.demo.calculator import demo_tasks
from agent_rl_plugin.demo.run import RolloutResult, run_groups
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.rewards.registry import HOOK_NAME


def record_demo(tasks: int = 2, group_size: int = 3, seed: int = 1) -> list[RolloutResult]:
    """Run the demo agent into the database ``tracing`` is configured with, then release it."""
    results = asyncio.run(run_groups(demo_tasks(tasks), group_size=group_size, seed=seed))
    assert arl.flush()
    arl.shutdown()
    return results


class RewardsPlugin:
    """A test plugin registering the given rewards through the reward hook."""

    def __init__(self, *rewards: Any) -> None:
        self.rewards = list(rewards)

    @hookimpl
    def agent_rl_register_rewards(self, register, config):  # noqa: ANN001 - hook signature
        for reward in self.rewards:
            register(reward)


def only_these_rewards(pm, *rewards: Any, name: str = "test_rewards") -> RewardsPlugin:
    """Unregister every plugin that registers rewards (the built-ins among them), then register
    ``rewards`` as plugin ``name``: scoring "all rewards" then means exactly these."""
    for impl in list(getattr(pm.hook, HOOK_NAME).get_hookimpls()):
        pm.unregister(impl.plugin)
    plugin = RewardsPlugin(*rewards)
    pm.register(plugin, name=name)
    return plugin


def rows(path: Path | str, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Query the database read-only; rows as dicts."""
    connection = duckdb.connect(str(path), read_only=True)
    try:
        result = connection.execute(sql, list(params))
        columns = [d[0] for d in result.description]
        return [dict(zip(columns, row)) for row in result.fetchall()]
    finally:
        connection.close()


def agent_rl(*args: str, input: str | None = None):  # noqa: A002 - CliRunner's name
    """``agent-rl ARGS`` in this process (CliRunner on the real app); returns the result with
    ``exit_code``, ``stdout``, ``stderr`` and ``output``."""
    return CliRunner().invoke(build_app(), list(args), input=input)
