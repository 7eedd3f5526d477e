"""The ``pydantic_ai`` entry point of group ``agent_rl_plugin`` (never imports pydantic-ai).

Installing ``agent-rl-pydantic-ai`` is all it takes: ``agent_rl_plugin.configure()`` then records
every pydantic-ai agent run, with no other code. Hooks:

* ``agent_rl_configure``: called once by every ``configure()`` that sets up recording, after the
  tracer provider and the exporters are in place. It switches pydantic-ai's own OpenTelemetry
  instrumentation on (``Agent.instrument_all(settings)``, on the tracer provider ``configure()``
  set up), at once if pydantic-ai is imported, else right after it is (see
  :mod:`agent_rl_pydantic_ai.instrumentation`: the user's own ``instrument_all`` /
  ``agent.instrument`` choices win; ``AGENT_RL_PYDANTIC_AI_INSTRUMENT=0`` turns this off);
  ``config.capture_content`` becomes pydantic-ai's ``include_content``.
* ``agent_rl_register_normalizers``: registers ``pydantic_ai``
  (:func:`agent_rl_pydantic_ai.normalize.normalize_pydantic_ai`): rollout input/output, reasoning,
  retry causes and the GenAI ``response`` key of tool results.
"""

from __future__ import annotations

from typing import Any, Callable

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl

from agent_rl_pydantic_ai.instrumentation import apply
from agent_rl_pydantic_ai.normalize import normalize_pydantic_ai


@hookimpl
def agent_rl_configure(config: RLConfig) -> None:
    apply(capture_content=bool(getattr(config, "capture_content", True)))


@hookimpl
def agent_rl_register_normalizers(register: Callable[[str, Callable[[dict[str, Any], str], None]], None]) -> None:
    register("pydantic_ai", normalize_pydantic_ai)
