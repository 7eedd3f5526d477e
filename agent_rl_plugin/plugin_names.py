"""The plugin system's names, for code that must not import pluggy to know them (the command
line's fast path asks whether outside plugins are installed before anything else loads).

:mod:`agent_rl_plugin.hookspecs` and :mod:`agent_rl_plugin.plugins` take them from here: one
definition each.
"""

#: pluggy's project name (hook markers, the plugin manager) and the entry-point group outside
#: plugins are installed under.
PROJECT_NAME = "agent_rl_plugin"
ENTRY_POINT_GROUP = PROJECT_NAME
#: ``AGENT_RL_DISABLE_PLUGIN_AUTOLOAD=1``: no plugin is loaded from entry points.
DISABLE_AUTOLOAD_ENV = "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD"
