"""The built-in ``rl_state_keys`` plugin: the default GiGPO state key of an agent action.

For GiGPO over stored traces an *action* is an LLM step (``kind = 'llm'`` in the ``steps``
view) and the *state* it acted on is its **observation**: the output of the most recent tool
step before it in the same rollout (for a failed tool, ``"error: "`` + its error), or, for the
rollout's first action(s) before any tool step, the rollout's input (else the LLM call's own
input messages). Only that observation is hashed, not the whole history, so two rollouts that
reach the same tool result share a step group.

The rollout's input counts as a state without the runner's per-sample bookkeeping: when it is
the task dict that :func:`~agent_rl_plugin.rollouts.run_rollouts` gives the agent (a JSON object
whose keys are exactly :data:`~agent_rl_plugin.rollouts.tasks.TASK_PAYLOAD_FIELDS`), its
:data:`~agent_rl_plugin.rollouts.tasks.PER_SAMPLE_FIELDS` (``sample_index``, ``seed``) are
removed and the rest (task id, prompt, ground truth, metadata) is the observation, as compact
JSON. So the ``group_size`` rollouts of one task start in one state (one step group), and two
tasks in two. Any other input is the observation as recorded.

The default key is the first 16 hex digits of the MD5 of the observation's UTF-8 text (the
empty text when there is none). :func:`agent_rl_plugin.rl.store.steps_for_gigpo` computes the
same value in SQL (DuckDB's ``md5``) when no other plugin implements ``agent_rl_state_key``.
A key recorded on the span (``agent_rl.state.key``) always wins over this hook.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

from agent_rl_plugin.hookspecs import hookimpl

#: Hex digits kept from the MD5 of the observation (64 bits: collisions are negligible within
#: one group).
KEY_DIGITS = 16


def observation_key(observation: str | None) -> str:
    """The default key of an observation text: MD5 hex prefix (``None`` counts as ``""``).
    Equal to ``left(md5(coalesce(observation, '')), 16)`` in DuckDB."""
    return hashlib.md5((observation or "").encode("utf-8")).hexdigest()[:KEY_DIGITS]


def default_state_key(step: Mapping[str, Any]) -> str:
    """The state key of ``step`` without plugins: its recorded ``state_key`` when it has one,
    else :func:`observation_key` of its ``observation``."""
    recorded = step.get("state_key")
    if recorded is not None and recorded != "":
        return str(recorded)
    return observation_key(step.get("observation"))


@hookimpl(trylast=True)
def agent_rl_state_key(step: dict[str, Any]) -> str:
    """Default implementation: :func:`default_state_key`."""
    return default_state_key(step)
