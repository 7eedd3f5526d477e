"""The package version, in a module of its own so any layer can read it without importing the
package's public facade (:mod:`agent_rl_plugin`)."""

__version__ = "0.1.0"
