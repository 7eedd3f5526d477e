"""tool_success: +1 success, -1 error, -0.5 empty per tool step; episode = mean."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import EvaluateResult, Rollout, Step, coerce_result
from agent_rl_plugin.rewards.builtin import BUILTIN_REWARDS
from agent_rl_plugin.rewards.builtin.tool_success import ToolSuccess


def tool(index: int, result=None, status: str = "ok", error: str | None = None, name: str = "search") -> Step:
    return Step(index=index, kind="tool", name=name, input={"q": "x"}, output=result, status=status, error=error)


def llm(index: int) -> Step:
    return Step(index=index, kind="llm", name="gpt", output=[{"role": "assistant", "content": "hi"}])


def test_registered_under_its_module_name():
    assert BUILTIN_REWARDS["tool_success"] is ToolSuccess
    assert ToolSuccess.name == "tool_success" and ToolSuccess.version == "1"


def test_all_successful_calls_score_one_with_step_outputs_at_step_indices():
    rollout = Rollout(rollout_id="r", steps=[llm(0), tool(1, {"hits": 3}), llm(2), tool(3, "42")])
    result = ToolSuccess().score(rollout)
    assert result.score == 1.0
    assert [(s.step_index, s.base_reward) for s in result.step_outputs] == [(1, 1.0), (3, 1.0)]
    assert result.metrics["n_success"] == 2
    coerce_result(result, "tool_success")  # passes the contract


def test_errors_and_empty_results_are_penalised():
    rollout = Rollout(
        rollout_id="r",
        steps=[
            tool(0, {"ok": True}),
            tool(1, None, status="error", error="ValueError: boom"),
            tool(2, []),
            tool(3, "Error: file not found"),
            tool(4, {"error": "rate limited"}),
            tool(5, "   "),
        ],
    )
    result = ToolSuccess().score(rollout)
    rewards = [s.base_reward for s in result.step_outputs]
    assert rewards == [1.0, -1.0, -0.5, -1.0, -1.0, -0.5]
    assert result.score == pytest.approx(sum(rewards) / 6)
    assert result.metrics == {"n_tool_calls": 6, "n_success": 1, "n_error": 3, "n_empty": 2}
    assert "failed" in result.step_outputs[1].reason


def test_result_text_detection_can_be_switched_off_and_rewards_configured():
    rollout = Rollout(rollout_id="r", steps=[tool(0, "Error: not really"), tool(1, {})])
    result = ToolSuccess(detect_error_results=False, empty_reward=0.0).score(rollout)
    assert [s.base_reward for s in result.step_outputs] == [1.0, 0.0]


def test_no_tool_calls_is_not_applicable():
    assert ToolSuccess().score(Rollout(rollout_id="r", steps=[llm(0)])) is None


@pytest.mark.parametrize("kwargs", [{"success_reward": "high"}, {"error_reward": float("nan")}, {"detect_error_results": "yes"}])
def test_bad_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError, match="tool_success"):
        ToolSuccess(**kwargs)


def test_parameters_and_weight_are_recorded():
    reward = ToolSuccess(empty_reward=-0.25, weight=2.0)
    assert reward.weight == 2.0
    assert reward.params["empty_reward"] == -0.25
    assert isinstance(reward.score(Rollout(rollout_id="r", steps=[tool(0, "")])), EvaluateResult)
