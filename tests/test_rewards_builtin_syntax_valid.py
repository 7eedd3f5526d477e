"""``syntax_valid`` and the code-block extraction it uses (``rewards/code_blocks.py``)."""

from __future__ import annotations

import json

import pytest

from agent_rl_plugin.rewards import Rollout, Step
from agent_rl_plugin.rewards.builtin import BUILTIN_REWARDS
from agent_rl_plugin.rewards.builtin.syntax_valid import SyntaxValid
from agent_rl_plugin.rewards.code_blocks import fenced_blocks, looks_like_code, python_code, python_code_blocks
from agent_rl_plugin.rewards.result import coerce_result
from agent_rl_plugin.rewards.workers import evaluate

FENCE = "```"


def rollout(final_output: str | None, steps: list[Step] | None = None) -> Rollout:
    return Rollout(rollout_id="r1", final_output=final_output, steps=steps or [])


def block(code: str, language: str = "python", fence: str = FENCE) -> str:
    return f"{fence}{language}\n{code}\n{fence}"


# ---------------------------------------------------------------------------------------------
# extraction
# ---------------------------------------------------------------------------------------------


def test_tagged_blocks_in_order():
    text = "\n".join([
        "First:", block("x = 1", "python"), "then", block("print(x)", "py"), block("y = 2", "Python3"),
        block("z = 3", "py3 title='z.py'"),
    ])
    assert python_code(text) == ["x = 1\n", "print(x)\n", "y = 2\n", "z = 3\n"]
    assert [b.language for b in python_code_blocks(text)] == ["python", "py", "python3", "py3"]


def test_other_languages_are_never_python():
    text = "\n".join([block("ls -la", "bash"), block('{"a": 1}', "json"), block(">>> 1 + 1\n2", "pycon"),
                      block("x = 1", "text")])
    assert python_code(text) == []
    assert len(fenced_blocks(text)) == 4


def test_untagged_blocks_only_when_they_are_code():
    text = "\n".join([
        block("def f():\n    return 1", ""),   # code: kept
        block("42", ""),                        # program output: parses, but not code
        block("[1, 2, 3]", ""),
        block("ls -la", ""),                    # a shell line that happens to parse
        block("Hello, world!", ""),             # does not parse
        block("print(f())", ""),                # a call: kept
    ])
    assert python_code(text) == ["def f():\n    return 1\n", "print(f())\n"]
    assert python_code(text, untagged=False) == []
    assert looks_like_code("import os") and not looks_like_code("True") and not looks_like_code("foo bar")


def test_bare_code_answer_only_with_bare():
    answer = "def add(a, b):\n    return a + b\n"
    assert python_code(answer) == []
    assert python_code(answer, bare=True) == [answer]
    assert python_code("The answer is 42.", bare=True) == []
    assert python_code("yes", bare=True) == []
    # with fences, bare does not take the whole text
    assert python_code("x = 1\n" + block("y = 2"), bare=True) == ["y = 2\n"]


def test_fence_details():
    # tildes, longer fences containing shorter ones, indented fences in lists, unclosed at the end
    text = "\n".join([
        "~~~python", "a = 1", "~~~",
        "````python", "s = '''", "```", "'''", "````",
        "1. step one", "   ```python", "   if True:", "       b = 2", "   ```",
        "inline ```print(1)``` is not a fence",
        "```python", "c = 3",
    ])
    blocks = python_code_blocks(text)
    assert [b.code for b in blocks] == ["a = 1\n", "s = '''\n```\n'''\n", "if True:\n    b = 2\n", "c = 3\n"]
    assert [b.start_line for b in blocks] == [2, 5, 11, 16]
    assert python_code_blocks("\r\n".join(["```python", "x = 1", "```"]))[0].code == "x = 1\n"
    assert python_code(block("   \n", "python")) == []  # blank blocks are skipped
    assert python_code(None) == [] and python_code("") == []


# ---------------------------------------------------------------------------------------------
# the reward
# ---------------------------------------------------------------------------------------------


def test_valid_code_scores_one():
    answer = "Here is the function:\n" + block("def add(a, b):\n    return a + b") + "\nand a test:\n" + block("assert add(1, 2) == 3")
    result = SyntaxValid().score(rollout(answer))
    assert result.score == 1.0
    assert result.reason == "all 2 Python code blocks parse"
    assert result.metrics == {"n_blocks": 2, "n_valid": 2, "n_tool_steps": 0}


def test_invalid_block_scores_zero_and_is_named():
    answer = "\n".join([
        "Try this:",                                   # line 1
        block("x = 1"),                                # lines 2-4
        block("def broken(:\n    pass"),               # lines 5-8, error on line 6
        block("y = (1,"),                              # lines 9-11
    ])
    result = SyntaxValid().score(rollout(answer))
    assert result.score == 0.0
    assert result.reason == "code block 2 of 3, line 6 of the answer: SyntaxError: invalid syntax"
    assert result.metrics["first_error_block"] == 2 and result.metrics["error_line"] == 6
    assert result.metrics["n_blocks"] == 3 and result.metrics["n_valid"] == 1


def test_other_errors_fail_too():
    nul = SyntaxValid().score(rollout(block("x = 'a\x00b'")))  # a real NUL byte in the source
    assert nul.score == 0.0 and "null bytes" in nul.reason
    nested = "x = " + "[" * 500 + "]" * 500
    result = SyntaxValid().score(rollout(block(nested)))
    assert result.score == 0.0 and result.reason.startswith("code block 1 of 1")
    unclosed = SyntaxValid().score(rollout("```python\nprint('truncated'"))
    assert unclosed.score == 0.0 and "SyntaxError" in unclosed.reason


def test_not_applicable_without_code():
    reward = SyntaxValid()
    assert reward.score(rollout("The answer is 42.")) is None
    assert reward.score(rollout(None)) is None
    assert reward.score(rollout(block("echo hi", "bash"))) is None
    assert reward.score(rollout(block("not python at all", ""))) is None  # untagged, does not parse: not Python
    assert reward.score(rollout("def f(:\n")) is None  # bare text only with bare=True
    assert SyntaxValid(bare=True).score(rollout("def f():\n    return 1\n")).score == 1.0


def test_step_rewards_for_code_tool_calls():
    steps = [
        Step(index=0, kind="llm", name="gpt", output="thinking"),
        Step(index=1, kind="tool", name="python", input={"code": "print(1 + 1)"}),
        Step(index=2, kind="tool", name="Execute_Code", input={"code": "for i in range(3)\n    print(i)"}),
        Step(index=3, kind="tool", name="search", input={"code": "def broken(:"}),   # not a code tool
        Step(index=4, kind="tool", name="run_python", input="```python\nx = 1\n```"),  # string arguments with a fence
        Step(index=5, kind="tool", name="python", input={"query": "no code here"}),
    ]
    result = SyntaxValid().score(rollout(block("x = 1"), steps))
    assert result.score == 1.0
    assert [(s.step_index, s.base_reward) for s in result.step_outputs] == [(1, 1.0), (2, 0.0), (4, 1.0)]
    failing = result.step_outputs[1]
    assert failing.reason == "Execute_Code code at line 1: SyntaxError: expected ':'"
    assert failing.metrics["error_line"] == 1

    only_search = SyntaxValid(tool_names=["search"]).score(rollout(block("x = 1"), steps))
    assert [(s.step_index, s.base_reward) for s in only_search.step_outputs] == [(3, 0.0)]


def test_steps_without_code_in_the_answer():
    steps = [Step(index=0, kind="tool", name="python", input={"code": "x = ("})]
    result = SyntaxValid().score(rollout("Done, see the tool output.", steps))
    assert result.score is None and result.applicable
    assert [(s.step_index, s.base_reward) for s in result.step_outputs] == [(0, 0.0)]
    # the scoring runner accepts it: an "ok" outcome with step rows only
    outcome = evaluate(SyntaxValid(), [rollout("Done.", steps)])[0]
    assert outcome.status == "ok" and outcome.score is None and len(outcome.steps) == 1


def test_result_passes_the_contract_and_is_registered():
    reward = SyntaxValid()
    outcome = evaluate(reward, [rollout(block("def f(:"))])[0]
    assert outcome.status == "ok" and outcome.score == 0.0
    coerce_result(reward.score(rollout(block("x = 1"))), reward.name)
    assert BUILTIN_REWARDS["syntax_valid"] is SyntaxValid
    described = reward.describe()
    json.dumps(described)
    assert described["params"]["tool_names"][0] == "python" and described["weight"] == 1.0


def test_parameter_checks():
    with pytest.raises(ValueError, match="untagged"):
        SyntaxValid(untagged="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_names"):
        SyntaxValid(tool_names="python")  # type: ignore[arg-type]
    assert SyntaxValid(weight=0.5).weight == 0.5
