"""``syntax_valid``: does every Python code block of the final answer parse?"""

from __future__ import annotations

from typing import Any, Sequence

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.code_blocks import CodeBlock, parse_error, python_code_blocks
from agent_rl_plugin.rewards.result import EvaluateResult, StepOutput
from agent_rl_plugin.rewards.rollout import Rollout, Step

#: Tool names (lower case) whose arguments are Python code.
DEFAULT_TOOL_NAMES = (
    "python",
    "execute_code",
    "run_python",
    "run_code",
    "python_repl",
    "code_interpreter",
    "exec_python",
    "ipython",
)
#: Argument keys holding the code, tried in order.
DEFAULT_ARGUMENT_KEYS = ("code", "source", "script", "python", "program", "cell")


def describe_error(error: BaseException) -> tuple[int | None, str]:
    """``(line, message)`` of a parse error (``line`` within the parsed code, 1-based)."""
    if isinstance(error, SyntaxError):
        return error.lineno, f"{type(error).__name__}: {error.msg}"
    if isinstance(error, RecursionError):
        return None, "RecursionError: code nested too deeply to parse"
    return None, f"{type(error).__name__}: {error}"


def tool_code(step: Step, argument_keys: Sequence[str]) -> list[CodeBlock]:
    """The Python code in a tool call's arguments: the first non-blank string under one of
    ``argument_keys`` (or the arguments themselves when they are a string); when it contains
    fenced blocks, the Python ones, else the whole string."""
    arguments: Any = step.arguments
    code: str | None = None
    if isinstance(arguments, str):
        code = arguments
    elif isinstance(arguments, dict):
        for key in argument_keys:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                code = value
                break
    if code is None or not code.strip():
        return []
    if "```" in code or "~~~" in code:
        blocks = python_code_blocks(code)
        if blocks:
            return blocks
    return [CodeBlock(code=code, language="python", start_line=1, fenced=False)]


def check_blocks(blocks: Sequence[CodeBlock]) -> tuple[int | None, int | None, str | None]:
    """``(index, line, message)`` of the first block that does not parse (index 0-based; line
    within the text the blocks came from), or ``(None, None, None)`` when all parse."""
    for index, block in enumerate(blocks):
        error = parse_error(block.code)
        if error is not None:
            line, message = describe_error(error)
            return index, (block.start_line + line - 1) if line is not None else None, message
    return None, None, None


class SyntaxValid(RewardPlugin):
    """1.0 when every Python code block of the final answer parses (``ast.parse``), else 0.0.

    The blocks are found by :func:`~agent_rl_plugin.rewards.code_blocks.python_code_blocks`:
    fences tagged ``python``/``py``/``python3``/``py3``; with ``untagged`` (default true) also
    untagged fences whose content parses and looks like code (blocks of output or shell lines
    are left out, so an untagged block can never fail); with ``bare`` (default false) the whole
    answer when it has no fences and is code. The reason names the first failing block (its
    number, and the line of the answer) and the error (``SyntaxError: invalid syntax``...);
    metrics: ``n_blocks``, ``n_valid``, ``first_error_block`` (1-based), ``error_line``,
    ``error``. The grammar is the scoring interpreter's (Python 3.10+ parses ``match``; code
    for a newer Python may fail).

    Step rewards: every tool call whose name (lower case) is in ``tool_names`` and whose
    arguments hold code (the first non-blank string under one of ``argument_keys``, or the
    arguments themselves when they are a string; fenced blocks inside are extracted) gets a
    ``StepOutput`` of 1.0 or 0.0 by the same rule. Not applicable (``None``) when the final
    answer has no Python block and no such tool call exists; with tool calls but no block in
    the answer, only the step rewards are written (episode score ``None``).

    Parameters: ``untagged=True``, ``bare=False``, ``tool_names`` (default
    :data:`DEFAULT_TOOL_NAMES`), ``argument_keys`` (default :data:`DEFAULT_ARGUMENT_KEYS`).
    """

    name = "syntax_valid"
    version = "1"
    weight = 1.0
    description = "1.0 when every Python code block of the final answer parses (ast), else 0.0; steps for code tools."

    def __init__(
        self,
        untagged: bool = True,
        bare: bool = False,
        tool_names: Sequence[str] = DEFAULT_TOOL_NAMES,
        argument_keys: Sequence[str] = DEFAULT_ARGUMENT_KEYS,
        weight: float | None = None,
    ) -> None:
        for param, flag in (("untagged", untagged), ("bare", bare)):
            if not isinstance(flag, bool):
                raise ValueError(f"{self.name}: parameter {param} must be true or false, got {flag!r}")
        for param, names in (("tool_names", tool_names), ("argument_keys", argument_keys)):
            if isinstance(names, str) or not all(isinstance(v, str) for v in names):
                raise ValueError(f"{self.name}: parameter {param} must be a list of strings, got {names!r}")
        super().__init__(
            weight=weight,
            untagged=untagged,
            bare=bare,
            tool_names=[name.lower() for name in tool_names],
            argument_keys=list(argument_keys),
        )

    def step_outputs(self, rollout: Rollout) -> list[StepOutput]:
        """A 1.0/0.0 step reward per code tool call."""
        names = set(self.params["tool_names"])
        outputs = []
        for step in rollout.tool_calls:
            if (step.name or "").lower() not in names:
                continue
            blocks = tool_code(step, self.params["argument_keys"])
            if not blocks:
                continue
            index, line, message = check_blocks(blocks)
            if index is None:
                outputs.append(
                    StepOutput(
                        step_index=step.index,
                        base_reward=1.0,
                        reason=f"{step.name} code parses",
                        metrics={"tool": step.name},
                    )
                )
            else:
                where = f" at line {line}" if line is not None else ""
                outputs.append(
                    StepOutput(
                        step_index=step.index,
                        base_reward=0.0,
                        reason=f"{step.name} code{where}: {message}",
                        metrics={"tool": step.name, "error_line": line, "error": message},
                    )
                )
        return outputs

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        blocks = python_code_blocks(rollout.final_output, untagged=self.params["untagged"], bare=self.params["bare"])
        steps = self.step_outputs(rollout)
        if not blocks:
            if not steps:
                return None
            return EvaluateResult(
                score=None,
                reason=f"no Python code in the final answer; {len(steps)} code tool calls checked",
                metrics={"n_blocks": 0, "n_tool_steps": len(steps)},
                step_outputs=steps,
            )
        index, line, message = check_blocks(blocks)
        n_valid = sum(parse_error(block.code) is None for block in blocks) if index is not None else len(blocks)
        metrics: dict[str, Any] = {"n_blocks": len(blocks), "n_valid": n_valid, "n_tool_steps": len(steps)}
        if index is None:
            what = "the Python code block parses" if len(blocks) == 1 else f"all {len(blocks)} Python code blocks parse"
            return EvaluateResult(score=1.0, reason=what, metrics=metrics, step_outputs=steps)
        where = f", line {line} of the answer" if line is not None else ""
        metrics.update(first_error_block=index + 1, error_line=line, error=message)
        return EvaluateResult(
            score=0.0,
            reason=f"code block {index + 1} of {len(blocks)}{where}: {message}",
            metrics=metrics,
            step_outputs=steps,
        )
