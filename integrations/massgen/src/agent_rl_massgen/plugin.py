"""The ``massgen`` entry point of group ``agent_rl_plugin`` (never imports MassGen).

Hooks:

* ``agent_rl_instrument_object``: ``arl.instrument(obj)`` and ``arl.RLAgentMixin`` /
  ``arl.RLOrchestratorMixin`` instances of MassGen classes get what ``MassGenAgentMixin`` /
  ``MassGenOrchestratorMixin`` record: a ``SingleAgent`` / ``ConfigurableAgent`` (any MassGen
  ``ChatAgent``) its backend's LLM calls and executed tools, an ``Orchestrator`` its
  coordination events and its agents (:func:`agent_rl_massgen.agents.observe`). Other objects,
  and every object while MassGen is not imported, are passed (``None``).
* ``agent_rl_state_key``: GiGPO state key of a MassGen LLM step without a recorded key (spans
  ingested from elsewhere, older recordings): a hash of its last user message, where MassGen
  puts the task and the answers the agent can see. Steps recorded by this adapter carry the same
  key as ``agent_rl.state.key`` already, so the hook is not called for them. Returns ``None``
  (fall back to the built-in key) for steps that do not look like MassGen's.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from agent_rl_plugin.hookspecs import hookimpl

from agent_rl_massgen.stream import state_key_of

#: Markers MassGen puts in the user message of a coordination turn.
MASSGEN_MARKERS = ("<ORIGINAL MESSAGE>", "<CURRENT ANSWERS")


@hookimpl
def agent_rl_instrument_object(obj: Any) -> Callable[[], None] | None:
    if "massgen" not in sys.modules:  # no MassGen object can exist: never import it here
        return None
    from agent_rl_massgen.agents import observe

    return observe(obj)


@hookimpl
def agent_rl_state_key(step: dict[str, Any]) -> str | None:
    raw = step.get("input")
    if not isinstance(raw, str) or not any(marker in raw for marker in MASSGEN_MARKERS):
        return None
    try:
        messages = json.loads(raw)
    except ValueError:
        return None
    return state_key_of(messages)
