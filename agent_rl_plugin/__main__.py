"""``python -m agent_rl_plugin ...`` is the ``agent-rl`` command, so launchers that start a
Python module can run it: ``accelerate launch --multi_gpu --num_processes 8 -m agent_rl_plugin
train gigpo --config gigpo.yaml`` (``-m agent_rl_plugin.cli.main`` works too)."""

from agent_rl_plugin.cli.main import main

if __name__ == "__main__":
    main()
