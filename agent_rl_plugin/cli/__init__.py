"""The ``agent-rl`` command line: one module per command group, each a built-in plugin."""
