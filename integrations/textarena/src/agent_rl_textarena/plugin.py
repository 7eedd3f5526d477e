"""The ``textarena`` entry point of group ``agent_rl_plugin`` (never imports textarena).

It implements no hook: the integration is an environment, not a recorded framework, so there is
nothing to normalise. The entry point makes the package show in ``agent-rl plugins`` with its
version, and is where hooks go when it needs some.
"""

from __future__ import annotations

__all__: list[str] = []
