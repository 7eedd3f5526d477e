"""The built-in rewards, one module each (the module name is the reward's ``name``).

=====================  ==========================================================================
``tool_success``       per tool call +1 success, -1 error, -0.5 empty result; episode = mean
``answer_quality``     heuristic 0..1: structure, depth, similarity (source "heuristic", weight 0)
``coordination``       multi-agent: fewer rounds, consensus (+1 / -0.5), 2 x answer quality, tokens
``efficiency``         tokens, calls, duration against budgets: mean of min(1, budget / actual)
``format_compliance``  1/0: the final answer matches a regex or a JSON-schema subset
``task_completion``    1/0: the final answer matches the ground truth (normalized/exact/equal/...)
``rubric_alignment``   -(generated rubric score - ground-truth rubric score)^2
``human_label``        the latest human label: good 1.0, bad 0.0 (source "human")
``learned_reward``     logistic regression fitted on human labels: P(good)
``llm_judge``          LLM judge: "Score: N/10" or "Ranking: 2 > 1" (source "llm"; no judge:
                       ``llm_judge_heuristic``, source "heuristic", weight 0)
``syntax_valid``       1/0: every Python code block of the answer parses
``code_execution``     1/0: the answer's code (and the task's tests) runs in a sandbox
=====================  ==========================================================================

Each class documents its parameters (constructor keywords, stored in ``params``) and its exact
scoring rule. :data:`BUILTIN_REWARDS` maps each name to its class.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_rl_plugin.rewards.base import RewardPlugin
    from agent_rl_plugin.rewards.builtin.answer_quality import AnswerQuality
    from agent_rl_plugin.rewards.builtin.code_execution import CodeExecution
    from agent_rl_plugin.rewards.builtin.coordination import Coordination
    from agent_rl_plugin.rewards.builtin.efficiency import Efficiency
    from agent_rl_plugin.rewards.builtin.format_compliance import FormatCompliance
    from agent_rl_plugin.rewards.builtin.human_label import HumanLabel
    from agent_rl_plugin.rewards.builtin.learned_reward import LearnedReward
    from agent_rl_plugin.rewards.builtin.llm_judge import KeywordJudge, LLMJudge
    from agent_rl_plugin.rewards.builtin.rubric_alignment import RubricAlignment
    from agent_rl_plugin.rewards.builtin.syntax_valid import SyntaxValid
    from agent_rl_plugin.rewards.builtin.task_completion import TaskCompletion
    from agent_rl_plugin.rewards.builtin.tool_success import ToolSuccess

    BUILTIN_REWARDS: dict[str, type[RewardPlugin]]

#: Each built-in class and its module, in the order of :data:`BUILTIN_REWARDS`. The modules are
#: imported on first use: registering the built-in plugin (every ``configure()``) loads none of
#: them, so a recording agent does not carry the sandbox, judge and learned-reward code.
_CLASSES = {
    "ToolSuccess": "tool_success",
    "AnswerQuality": "answer_quality",
    "Coordination": "coordination",
    "Efficiency": "efficiency",
    "FormatCompliance": "format_compliance",
    "TaskCompletion": "task_completion",
    "RubricAlignment": "rubric_alignment",
    "HumanLabel": "human_label",
    "LearnedReward": "learned_reward",
    "LLMJudge": "llm_judge",
    "SyntaxValid": "syntax_valid",
    "CodeExecution": "code_execution",
    "KeywordJudge": "llm_judge",  # not registered by name: the judge's fallback
}


def _load(name: str) -> Any:
    value = getattr(importlib.import_module(f"{__name__}.{_CLASSES[name]}"), name)
    globals()[name] = value
    return value


def __getattr__(name: str) -> Any:
    """A built-in class, or ``BUILTIN_REWARDS`` (every built-in reward class by its ``name``),
    imported on first use."""
    if name in _CLASSES:
        return _load(name)
    if name == "BUILTIN_REWARDS":
        classes = [_load(n) for n in _CLASSES if n != "KeywordJudge"]
        table = {cls.name: cls for cls in classes}
        globals()["BUILTIN_REWARDS"] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILTIN_REWARDS",
    "AnswerQuality",
    "CodeExecution",
    "Coordination",
    "Efficiency",
    "FormatCompliance",
    "HumanLabel",
    "KeywordJudge",
    "LLMJudge",
    "LearnedReward",
    "RubricAlignment",
    "SyntaxValid",
    "TaskCompletion",
    "ToolSuccess",
]
