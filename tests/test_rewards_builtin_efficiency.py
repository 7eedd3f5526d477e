"""efficiency: mean of min(1, budget / actual) over the parts that have a budget."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout, Step
from agent_rl_plugin.rewards.builtin.efficiency import Efficiency


def rollout(tokens: int = 1000, calls: int = 4, duration_ms: float | None = 2000.0, **kw) -> Rollout:
    steps = [Step(index=i, kind="llm" if i % 2 == 0 else "tool", name="x", output="ok") for i in range(calls)]
    steps.append(Step(index=calls, kind="event", name="reasoning"))  # events are not calls
    return Rollout(rollout_id="r", input_tokens=tokens // 2, output_tokens=tokens - tokens // 2, steps=steps, duration_ms=duration_ms, **kw)


def test_within_every_budget_scores_one():
    result = Efficiency(token_budget=2000, call_budget=10, time_budget_s=5).score(rollout())
    assert result.score == 1.0
    assert result.metrics["tokens_part"] == result.metrics["calls_part"] == result.metrics["time_part"] == 1.0
    assert result.metrics["calls"] == 4.0


def test_over_budget_parts_are_budget_over_actual_and_averaged():
    result = Efficiency(token_budget=500, call_budget=2, time_budget_s=1).score(rollout(tokens=1000, calls=4, duration_ms=4000))
    assert result.metrics["tokens_part"] == pytest.approx(0.5)
    assert result.metrics["calls_part"] == pytest.approx(0.5)
    assert result.metrics["time_part"] == pytest.approx(0.25)
    assert result.score == pytest.approx((0.5 + 0.5 + 0.25) / 3)


def test_only_budgeted_parts_count():
    result = Efficiency(token_budget=250).score(rollout(tokens=1000))
    assert result.score == pytest.approx(0.25)
    assert "calls_part" not in result.metrics and "time_part" not in result.metrics


def test_missing_duration_drops_the_time_part():
    result = Efficiency(call_budget=8, time_budget_s=1).score(rollout(duration_ms=None))
    assert result.score == 1.0 and "time_part" not in result.metrics


def test_budgets_from_rollout_or_task_metadata():
    r = rollout(tokens=1000, metadata={"token_budget": 100}, task_metadata={"call_budget": 8})
    result = Efficiency().score(r)
    assert result.metrics["tokens_part"] == pytest.approx(0.1) and result.metrics["calls_part"] == 1.0
    assert Efficiency(token_budget=1000).score(r).metrics["tokens_part"] == 1.0  # parameter wins


def test_nothing_spent_is_fully_efficient():
    assert Efficiency(token_budget=10).score(Rollout(rollout_id="r")).score == 1.0


def test_no_budget_is_not_applicable():
    assert Efficiency().score(rollout()) is None


@pytest.mark.parametrize("kwargs", [{"token_budget": 0}, {"call_budget": -3}, {"time_budget_s": "fast"}])
def test_bad_budgets_are_rejected(kwargs):
    with pytest.raises(ValueError, match="efficiency: parameter"):
        Efficiency(**kwargs)
