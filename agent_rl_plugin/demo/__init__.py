"""The example agent and task set used by ``agent-rl demo`` and the end-to-end tests."""
