"""Rollouts: run an agent over tasks in groups, and import saved conversations as rollouts.

* :func:`run_rollouts` / :func:`run_rollouts_async`: any agent callable (sync, async, streaming)
  over a task list, ``group_size`` times per task, concurrently, each run a recorded rollout;
  returns :class:`RolloutOutcome` objects (``agent-rl rollouts run``).
* :func:`import_chats`: OpenAI-format conversations (JSONL) become rollouts with LLM and tool
  steps and rewards, returning an :class:`ImportReport` (``agent-rl import chats``).

See ``docs/rollouts.md``.
"""

from agent_rl_plugin.rollouts.agent_call import RolloutTimeout, agent_kind
from agent_rl_plugin.rollouts.chat_import import ChatImportError, ImportReport, import_chats
from agent_rl_plugin.rollouts.loading import AgentLoadError, load_agent
from agent_rl_plugin.rollouts.runner import RolloutOutcome, run_rollouts, run_rollouts_async
from agent_rl_plugin.rollouts.tasks import TaskFileError, load_tasks

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
