"""The plugin manager: built-ins and outside plugins, loaded the same way.

* Built-ins are the modules in :data:`DEFAULT_PLUGINS`; each implements hooks from
  :mod:`agent_rl_plugin.hookspecs` exactly as an outside plugin would.
* Outside plugins are found through the ``agent_rl_plugin`` entry-point group.
* ``AGENT_RL_DISABLE_PLUGIN_AUTOLOAD=1`` skips entry points entirely;
  ``AGENT_RL_PLUGINS=name1,name2`` loads only the entry points with those names.
* A plugin that fails to import is reported once as a warning and skipped; it never stops an
  agent from running.
* After registering, :func:`check_pending` runs pluggy's ``check_pending()``: a plugin with a
  ``hookimpl`` whose name matches no hook spec (a misspelled hook such as
  ``agent_rl_register_exportrs``, or one written for another version) is reported the same way,
  as a warning naming the plugin and the unknown hooks, recorded in :data:`load_errors`, and
  unregistered (``hookimpl(optionalhook=True)`` marks a hook that may legitimately be missing).
* No command-line module is a built-in here: the ``agent-rl`` command line registers its own
  command groups when it builds its app (:mod:`agent_rl_plugin.cli.main`), so recording never
  imports it.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pluggy

from agent_rl_plugin import hookspecs
from agent_rl_plugin.plugin_names import DISABLE_AUTOLOAD_ENV as DISABLE_AUTOLOAD_ENV
from agent_rl_plugin.plugin_names import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from agent_rl_plugin.version import __version__

if TYPE_CHECKING:  # importlib.metadata is imported where entry points are read (~20 ms at start-up)
    from importlib.metadata import EntryPoint

logger = logging.getLogger(__name__)

ALLOW_LIST_ENV = "AGENT_RL_PLUGINS"

#: Built-in plugins, registered under these names before outside plugins. None of them imports
#: the command line: its command groups are registered by :mod:`agent_rl_plugin.cli.main`.
DEFAULT_PLUGINS: dict[str, str] = {
    "duckdb_store": "agent_rl_plugin.store.plugin",
    "otlp_export": "agent_rl_plugin.otlp_plugin",
    "redaction": "agent_rl_plugin.redaction",
    "genai_normalizer": "agent_rl_plugin.store.normalizers",
    "rewards_builtin": "agent_rl_plugin.rewards.builtin.plugin",
    "rl_state_keys": "agent_rl_plugin.rl.state_keys",
    "llm_clients": "agent_rl_plugin.instrumentation.clients.plugin",
}

_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
#: Plugins that failed to load (an entry point that raised, a plugin with unknown hooks):
#: name -> error message (shown by ``agent-rl plugins``).
load_errors: dict[str, str] = {}
#: Entry-point plugins' distributions: plugin name -> (distribution name, version).
distributions: dict[str, tuple[str, str]] = {}


def new_plugin_manager(
    *, load_entry_points: bool | None = None, builtins: Iterable[str] | None = None
) -> pluggy.PluginManager:
    """Build a fresh manager with the hook specs, the built-ins and (optionally) entry points.

    ``load_entry_points=None`` follows ``AGENT_RL_DISABLE_PLUGIN_AUTOLOAD``. ``builtins`` limits
    which :data:`DEFAULT_PLUGINS` are registered (all when ``None``). Tests build their own
    manager with this so plugins never leak between them.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    wanted = DEFAULT_PLUGINS if builtins is None else {k: DEFAULT_PLUGINS[k] for k in builtins}
    for name, module_name in wanted.items():
        pm.register(importlib.import_module(module_name), name=name)
    if load_entry_points is None:
        load_entry_points = os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() not in (
            "1",
            "true",
            "yes",
        )
    if load_entry_points:
        _load_entry_points(pm)
    check_pending(pm)
    return pm


def register_modules(pm: pluggy.PluginManager, modules: Mapping[str, str]) -> None:
    """Import and register each module of ``modules`` (plugin name -> module name) that is not
    registered yet (under any name), then :func:`check_pending`. Used by the command line to add
    its own command groups to the manager it runs with."""
    for name, module_name in modules.items():
        module = importlib.import_module(module_name)
        if pm.is_registered(module) or pm.get_plugin(name) is not None or pm.is_blocked(name):
            continue
        pm.register(module, name=name)
    check_pending(pm)


def check_pending(pm: pluggy.PluginManager) -> None:
    """``pm.check_pending()``, without raising: each plugin implementing a hook that has no
    spec (and is not marked ``optionalhook``) is reported as a warning naming it and its unknown
    hooks, recorded in :data:`load_errors` and unregistered; the others stay."""
    for _ in range(len(pm.get_plugins()) + 1):
        try:
            pm.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            plugin = exc.plugin
            name = pm.get_name(plugin) or repr(plugin)
            unknown = sorted(
                caller.name
                for caller in pm.get_hookcallers(plugin) or []
                if not caller.has_spec()
                and any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls())
            )
            message = (
                f"unknown hook{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: no such hook "
                f"in {hookspecs.__name__} (misspelled, or written for another version); plugin not loaded"
            )
            load_errors[name] = message
            logger.warning("agent-rl: plugin %r could not be loaded: %s", name, message)
            pm.unregister(plugin)


def _allowed_names() -> set[str] | None:
    raw = os.environ.get(ALLOW_LIST_ENV)
    if raw is None:
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    allowed = _allowed_names()
    for ep in _group_entry_points():
        if allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            plugin = ep.load()
            pm.register(plugin, name=ep.name)
            dist = getattr(ep, "dist", None)
            if dist is not None:
                distributions[ep.name] = (dist.name, dist.version)
        except Exception as exc:  # a broken plugin must not break the agent
            load_errors[ep.name] = f"{type(exc).__name__}: {exc}"
            logger.warning("agent-rl: plugin %r could not be loaded: %s", ep.name, exc)


def _group_entry_points() -> list[EntryPoint]:
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide manager, built on first use."""
    global _manager
    if _manager is None:
        with _lock:
            if _manager is None:
                _manager = new_plugin_manager()
    return _manager


def current_plugin_manager() -> pluggy.PluginManager | None:
    """The process-wide manager if it was built or set already, else ``None`` (builds nothing)."""
    return _manager


def set_plugin_manager(pm: pluggy.PluginManager | None) -> None:
    """Replace (or with ``None``, forget) the process-wide manager; used by tests."""
    global _manager
    with _lock:
        _manager = pm


def plugin_version(pm: pluggy.PluginManager, plugin: object) -> str | None:
    """The distribution version of an entry-point plugin, or the package version of a built-in."""
    name = pm.get_name(plugin)
    if name in distributions:
        return distributions[name][1]
    module_name = getattr(plugin, "__name__", "")
    if module_name.startswith("agent_rl_plugin"):
        return __version__
    return getattr(plugin, "__version__", None)
