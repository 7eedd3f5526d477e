"""``agent-rl plugins``: every registered plugin, its version, the hooks it implements and the
rewards it registers; then every reward (name, version, mode, source, weight, plugin)."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from agent_rl_plugin import plugins as plugin_registry
from agent_rl_plugin.cli.common import TABLE, Output, console, output_options, print_json
from agent_rl_plugin.cli.main import COMMAND_PLUGINS
from agent_rl_plugin.hookspecs import hookimpl

_REWARD_KEYS = ("name", "version", "mode", "source", "weight")


def list_rewards() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every registered reward described (with ``plugin`` and ``plugin_version``), and the
    registration errors by plugin (a duplicate reward name is reported under ``"*"``)."""
    from agent_rl_plugin.rewards.registry import DuplicateRewardError, collect_registered_rewards

    try:
        registry = collect_registered_rewards(plugin_registry.get_plugin_manager())
    except DuplicateRewardError as exc:
        return [], {"*": str(exc)}
    rewards = [entry.describe() for _, entry in sorted(registry.rewards.items())]
    return rewards, registry.errors


def list_plugins(rewards: list[dict[str, Any]] | None = None) -> list[dict]:
    """One entry per plugin: name, built-in or not, version, distribution, hooks and rewards.
    The built-in command groups are registered first (the console script imports them only when
    they run, so they may not be yet)."""
    pm = plugin_registry.get_plugin_manager()
    plugin_registry.register_modules(pm, COMMAND_PLUGINS)
    if rewards is None:
        rewards, _ = list_rewards()
    entries = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0]):
        if plugin is None:
            continue
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or [])
        dist = plugin_registry.distributions.get(name)
        entries.append(
            {
                "name": name,
                "builtin": name in plugin_registry.DEFAULT_PLUGINS or name in COMMAND_PLUGINS,
                "version": plugin_registry.plugin_version(pm, plugin),
                "distribution": dist[0] if dist else None,
                "hooks": hooks,
                "rewards": [{k: r[k] for k in _REWARD_KEYS} for r in rewards if r["plugin"] == name],
            }
        )
    return entries


@output_options("table", "json")
def plugins(output: Output = TABLE) -> None:
    """List registered plugins (built-ins and those installed through entry points) and their rewards."""
    rewards, reward_errors = list_rewards()
    entries = list_plugins(rewards)
    if output.json:
        print_json(
            {
                "plugins": entries,
                "rewards": rewards,
                "load_errors": plugin_registry.load_errors,
                "reward_errors": reward_errors,
            }
        )
        return
    rows = [
        (
            e["name"],
            "built-in" if e["builtin"] else (e["distribution"] or "entry point"),
            e["version"],
            ", ".join(e["hooks"]),
            ", ".join(r["name"] for r in e["rewards"]),
        )
        for e in entries
    ]
    output.rows(["plugin", "from", "version", "hooks", "rewards"], rows, title="plugins")
    if rewards:
        output.rows(
            ["reward", "version", "mode", "source", "weight", "plugin", "plugin_version", "description"],
            [
                (
                    r["name"],
                    r["version"],
                    r["mode"],
                    r["source"],
                    r["weight"],
                    r["plugin"],
                    r["plugin_version"],
                    r["description"],
                )
                for r in rewards
            ],
            title="rewards",
        )
    for name, error in plugin_registry.load_errors.items():
        console.print(f"[red]failed to load[/] {escape(name)}: {escape(error)}", highlight=False)
    for name, error in reward_errors.items():
        who = "rewards" if name == "*" else f"{name}'s rewards"
        console.print(f"[red]failed to register[/] {escape(who)}: {escape(error)}", highlight=False)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("plugins")(plugins)
