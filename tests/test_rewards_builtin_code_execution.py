"""``code_execution``: the answer's code really runs in the sandbox (plus the task's tests)."""

from __future__ import annotations

import json
import sys

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin import BUILTIN_REWARDS
from agent_rl_plugin.rewards.builtin import code_execution as module
from agent_rl_plugin.rewards.builtin.code_execution import CodeExecution, find_tests, normalise_output
from agent_rl_plugin.rewards.sandbox import SandboxError
from agent_rl_plugin.rewards.workers import evaluate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox needs Linux")

FENCE = "```"
ADD = f"Here you go:\n{FENCE}python\ndef add(a, b):\n    return a + b\n{FENCE}\n"


def rollout(final_output: str | None, **fields) -> Rollout:
    return Rollout(rollout_id="r1", final_output=final_output, **fields)


def answer(*codes: str) -> str:
    return "\n".join(f"Step {i}:\n{FENCE}python\n{code}\n{FENCE}" for i, code in enumerate(codes, 1))


@pytest.fixture(scope="module")
def reward() -> CodeExecution:
    return CodeExecution(timeout_s=20)  # generous: a loaded CI machine must not turn passes into timeouts


def test_code_that_runs_scores_one(reward):
    result = reward.score(rollout(ADD))
    assert result.score == 1.0
    assert result.reason == "ran without error (exit code 0)"
    metrics = result.metrics
    assert metrics["exit_code"] == 0 and metrics["timed_out"] is False and metrics["n_blocks"] == 1
    assert metrics["has_tests"] is False and metrics["stdout_match"] is None
    assert "rlimits" in metrics["mechanism"] and metrics["network_mechanism"] in ("netns+audit-hook", "audit-hook")
    assert metrics["duration_s"] > 0


def test_exception_scores_zero_with_the_error(reward):
    result = reward.score(rollout(answer("x = 10\ny = x / 0")))
    assert result.score == 0.0
    assert result.reason == "exit code 1: ZeroDivisionError: division by zero (line 2: y = x / 0)"
    assert result.metrics["exit_code"] == 1 and result.metrics["error_line"] == 2


def test_syntax_error_scores_zero(reward):
    result = reward.score(rollout(answer("def f(:\n    pass")))
    assert result.score == 0.0 and "SyntaxError" in result.reason


def test_tests_from_metadata_pass_and_fail(reward):
    passing = reward.score(rollout(ADD, metadata={"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}))
    assert passing.score == 1.0 and passing.reason == "code and tests ran without error (exit code 0)"
    assert passing.metrics["has_tests"] is True

    failing = reward.score(rollout(ADD, metadata={"tests": "assert add(1, 2) == 3\nassert add(2, 2) == 5"}))
    assert failing.score == 0.0
    assert failing.reason == "exit code 1: AssertionError (tests line 2: assert add(2, 2) == 5)"


def test_tests_from_task_metadata_and_ground_truth():
    reward = CodeExecution(timeout_s=20)
    assert reward.score(rollout(ADD, task_metadata={"tests": "assert add(2, 3) == 6"})).score == 0.0
    assert reward.score(rollout(ADD, ground_truth="assert add(2, 3) == 5")).score == 1.0
    assert reward.score(rollout(ADD, ground_truth={"tests": ["assert add(2, 3) == 4"]})).score == 0.0
    # a ground truth that is an answer, not test code, is not run
    assert find_tests(rollout(ADD, ground_truth="5")) is None
    assert find_tests(rollout(ADD, ground_truth="add(2, 3)")) is None
    # metadata first, then task metadata, then ground truth
    both = rollout(ADD, metadata={"tests": "assert True"}, task_metadata={"tests": "assert False"})
    assert find_tests(both) == "assert True"
    # use_tests=False ignores them
    assert CodeExecution(timeout_s=20, use_tests=False).score(rollout(ADD, metadata={"tests": "assert False"})).score == 1.0


def test_expected_stdout(reward):
    code = answer("for i in range(3):\n    print(i, ' ')")
    matching = reward.score(rollout(code, metadata={"expected_stdout": "0\n1\n2\n"}))
    assert matching.score == 1.0 and matching.metrics["stdout_match"] is True
    assert matching.reason.endswith("stdout matches the expected output")
    wrong = reward.score(rollout(code, ground_truth={"expected_stdout": "0\n1\n2\n3"}))
    assert wrong.score == 0.0 and wrong.metrics["stdout_match"] is False
    assert wrong.reason == "stdout does not match the expected output (got '0\\n1\\n2')"
    assert normalise_output("a  \r\nb\n\n") == "a\nb"


def test_stdin_from_metadata(reward):
    code = answer("name = input()\nprint('hello', name)")
    assert reward.score(rollout(code, metadata={"stdin": "Ada\n", "expected_stdout": "hello Ada"})).score == 1.0
    no_stdin = reward.score(rollout(code))
    assert no_stdin.score == 0.0 and "EOFError" in no_stdin.reason


def test_which_all_or_last():
    code = answer("def square(x):\n    return x * x", "print(square(4))")
    assert CodeExecution(timeout_s=20).score(rollout(code)).score == 1.0
    last = CodeExecution(timeout_s=20, which="last").score(rollout(code))
    assert last.score == 0.0 and "NameError" in last.reason


def test_timeout():
    result = CodeExecution(timeout_s=1).score(rollout(answer("while True:\n    pass")))
    assert result.score == 0.0
    assert result.reason == "timed out after 1 s"
    assert result.metrics["timed_out"] is True and result.metrics["killed_by_signal"] == "SIGKILL"


def test_memory_limit():
    result = CodeExecution(timeout_s=20, memory_mb=96).score(rollout(answer("data = bytearray(2**34)")))
    assert result.score == 0.0
    assert result.reason == "killed: memory limit (96 MiB)"
    assert result.metrics["memory_error"] is True


def test_no_network_and_no_escape(reward):
    code = answer("import socket\nsocket.create_connection(('93.184.216.34', 80), timeout=3)")
    result = reward.score(rollout(code))
    assert result.score == 0.0 and ("PermissionError" in result.reason or "OSError" in result.reason)


def test_not_applicable_without_code(reward):
    assert reward.score(rollout("The answer is 42.")) is None
    assert reward.score(rollout(None)) is None
    assert reward.score(rollout(f"{FENCE}bash\nrm -rf /\n{FENCE}")) is None


def test_bare_code():
    assert CodeExecution(timeout_s=20).score(rollout("print(1 + 1)")) is None
    assert CodeExecution(timeout_s=20, bare=True).score(rollout("print(1 + 1)")).score == 1.0


def test_sandbox_unavailable_is_an_error(monkeypatch):
    def unavailable(*args, **kwargs):
        raise SandboxError("no Python interpreter can run sandboxed code as uid 65534")

    monkeypatch.setattr(module, "run_python", unavailable)
    result = CodeExecution().score(rollout(ADD))
    assert result.score is None and result.error.startswith("sandbox unavailable: no Python interpreter")
    assert evaluate(CodeExecution(), [rollout(ADD)])[0].status == "error"


def test_through_the_scoring_runner_and_registered():
    outcomes = evaluate(CodeExecution(timeout_s=20), [rollout(ADD), rollout(answer("raise ValueError('bad')"))])
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert [o.score for o in outcomes] == [1.0, 0.0]
    assert json.loads(outcomes[1].metrics)["exit_code"] == 1
    assert BUILTIN_REWARDS["code_execution"] is CodeExecution
    described = CodeExecution().describe()
    json.dumps(described)
    assert described["params"] == {"which": "all", "timeout_s": 5.0, "memory_mb": 256, "cpu_s": None, "network": False,
                                   "use_tests": True, "untagged": True, "bare": False}
    assert described["weight"] == 2.0


def test_parameter_checks():
    with pytest.raises(ValueError, match="which"):
        CodeExecution(which="first")
    with pytest.raises(ValueError, match="timeout_s"):
        CodeExecution(timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        CodeExecution(memory_mb=1)
    with pytest.raises(ValueError, match="network"):
        CodeExecution(network="no")  # type: ignore[arg-type]
