"""``agent-rl plugins``: every registered plugin, its version and the hooks it implements."""

from __future__ import annotations

import typer

from agent_rl_plugin import plugins as plugin_registry
from agent_rl_plugin.cli.common import JsonOption, console, print_json, print_rows
from agent_rl_plugin.hookspecs import hookimpl


def list_plugins() -> list[dict]:
    """One entry per plugin: name, built-in or not, version, distribution and hooks."""
    pm = plugin_registry.get_plugin_manager()
    entries = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0]):
        if plugin is None:
            continue
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or [])
        dist = plugin_registry.distributions.get(name)
        entries.append(
            {
                "name": name,
                "builtin": name in plugin_registry.DEFAULT_PLUGINS,
                "version": plugin_registry.plugin_version(pm, plugin),
                "distribution": dist[0] if dist else None,
                "hooks": hooks,
            }
        )
    return entries


def plugins(json_output: bool = JsonOption) -> None:
    """List registered plugins (built-ins and those installed through entry points)."""
    entries = list_plugins()
    if json_output:
        print_json({"plugins": entries, "load_errors": plugin_registry.load_errors})
        return
    rows = [
        (e["name"], "built-in" if e["builtin"] else (e["distribution"] or "entry point"), e["version"], ", ".join(e["hooks"]))
        for e in entries
    ]
    print_rows(["plugin", "from", "version", "hooks"], rows, "table", title="plugins")
    for name, error in plugin_registry.load_errors.items():
        console.print(f"[red]failed to load[/] {name}: {error}")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("plugins")(plugins)
