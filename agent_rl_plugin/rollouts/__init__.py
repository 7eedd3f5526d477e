"""Rollouts: run an agent over tasks in groups, and import saved conversations as rollouts.

* :func:`run_rollouts` / :func:`run_rollouts_async`: any agent callable (sync, async, streaming)
  over a task list, ``group_size`` times per task, concurrently, each run a recorded rollout;
  returns :class:`RolloutOutcome` objects (``agent-rl rollouts run``).
* :func:`import_chats`: OpenAI-format conversations (JSONL) become rollouts with LLM and tool
  steps and rewards, returning an :class:`ImportReport` (``agent-rl import chats``).

See ``docs/rollouts.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_rl_plugin.rollouts.agent_call import RolloutTimeout, agent_kind
    from agent_rl_plugin.rollouts.chat_import import ChatImportError, ImportReport, import_chats
    from agent_rl_plugin.rollouts.loading import AgentLoadError, load_agent
    from agent_rl_plugin.rollouts.runner import RolloutOutcome, run_rollouts, run_rollouts_async
    from agent_rl_plugin.rollouts.tasks import TaskFileError, load_tasks

#: Public name -> its module, imported on first use: readers of ``rollouts.tasks`` (the store's
#: advantage inputs, ``agent-rl train``) do not pay for the runner, the recorder and OpenTelemetry.
_LAZY = {
    "RolloutTimeout": "agent_call",
    "agent_kind": "agent_call",
    "ChatImportError": "chat_import",
    "ImportReport": "chat_import",
    "import_chats": "chat_import",
    "AgentLoadError": "loading",
    "load_agent": "loading",
    "RolloutOutcome": "runner",
    "run_rollouts": "runner",
    "run_rollouts_async": "runner",
    "TaskFileError": "tasks",
    "load_tasks": "tasks",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentLoadError",
    "ChatImportError",
    "ImportReport",
    "RolloutOutcome",
    "RolloutTimeout",
    "TaskFileError",
    "agent_kind",
    "import_chats",
    "load_agent",
    "load_tasks",
    "run_rollouts",
    "run_rollouts_async",
]
