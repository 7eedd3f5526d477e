"""coordination: efficiency + consensus + 2 x answer quality - token penalty (MassGen's examples)."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout, Step
from agent_rl_plugin.rewards.builtin.coordination import Coordination, consensus, count_rounds, is_multi_agent

HIGH = """# Answer

Rayleigh scattering makes the sky blue because short wavelengths scatter more, therefore blue
light near 450 nm dominates, as John Strutt showed in 1871.

- For example, sunsets are red since light crosses more air.
- Thus on Mars the sky looks butterscotch.
- Hence the colour depends on particles in the Atmosphere.

As a result, for instance, volcanic ash changes the colour of sunsets on Earth.

In short: Rayleigh scattering of sunlight by air molecules makes the sky look blue during the day.
"""
LOW = "Blue, because of scattering of sunlight by air."
REFERENCE = "Rayleigh scattering of sunlight by air molecules makes the sky look blue during the day"


def event(index: int, kind: str, agent: str | None, round_: int | None = None, target: str | None = None, content: str | None = None) -> Step:
    fields = {"agent_id": agent, "round": round_, "target": target, "content": content}
    return Step(index=index, kind="event", name=kind, output={k: v for k, v in fields.items() if v is not None})


def two_round_consensus(answer: str) -> Rollout:
    steps = [
        event(0, "new_answer", "a", 0), event(1, "new_answer", "b", 0),
        event(2, "vote", "a", 0, target="b"), event(3, "vote", "b", 0, target="a"),
        event(4, "restart", None, 1),
        event(5, "new_answer", "a", 1), event(6, "vote", "a", 1, target="a"), event(7, "vote", "b", 1, target="a"),
        event(8, "final_answer", "a", 1, content=answer),
    ]
    return Rollout(rollout_id="r", steps=steps, final_output=answer, ground_truth=REFERENCE, input_tokens=8000, output_tokens=2000)


def five_rounds_no_consensus(answer: str) -> Rollout:
    steps = []
    for r in range(5):
        steps += [event(len(steps), "new_answer", "a", r), event(len(steps) + 1, "new_answer", "b", r)]
        steps += [event(len(steps), "vote", "a", r, target="a"), event(len(steps) + 1, "vote", "b", r, target="b")]
    return Rollout(rollout_id="r", steps=steps, final_output=answer, ground_truth=REFERENCE)


def test_two_rounds_high_quality_consensus_is_about_plus_2_5():
    result = Coordination().score(two_round_consensus(HIGH))
    m = result.metrics
    assert m["rounds"] == 2 and m["consensus"] is True and 0.75 <= m["answer_quality"] <= 0.85
    assert m["token_penalty"] == 0.0
    assert result.score == pytest.approx(2.5, abs=0.15)


def test_five_rounds_low_quality_no_consensus_is_about_minus_1():
    result = Coordination().score(five_rounds_no_consensus(LOW))
    m = result.metrics
    assert m["rounds"] == 5 and m["consensus"] is False and 0.1 <= m["answer_quality"] <= 0.3
    assert result.score == pytest.approx(-1.0, abs=0.15)
    assert "not reached" in result.reason


def test_token_penalty_above_budget_is_capped():
    rollout = two_round_consensus(HIGH)
    base = Coordination().score(rollout).score
    over = Coordination(token_budget=5000).score(rollout)  # 10k tokens = budget x 2
    assert over.metrics["token_penalty"] == pytest.approx(0.5)
    assert over.score == pytest.approx(base - 0.5)
    assert Coordination(token_budget=100).score(rollout).metrics["token_penalty"] == 1.0
    assert Coordination(token_budget=None).score(rollout).metrics["token_penalty"] == 0.0


def test_single_agent_rollout_is_not_applicable():
    lone = Rollout(rollout_id="r", steps=[event(0, "new_answer", "a", 0), event(1, "final_answer", "a", 0)], final_output="x")
    assert not is_multi_agent(lone)
    assert Coordination().score(lone) is None
    assert Coordination().score(Rollout(rollout_id="r", final_output="x")) is None


def test_metadata_multi_agent_makes_it_applicable():
    rollout = Rollout(rollout_id="r", final_output="x", metadata={"multi_agent": True})
    result = Coordination().score(rollout)
    assert result.metrics["rounds"] == 1 and result.metrics["consensus"] is False


def test_rounds_from_restarts_when_events_have_no_round():
    events = [event(0, "new_answer", "a"), event(1, "restart", "b"), event(2, "restart", "a"), event(3, "vote", "b", target="a")]
    assert count_rounds(events) == 3


def test_consensus_needs_a_majority_of_the_last_rounds_votes():
    final = event(9, "final_answer", "a", 1)
    split = [event(0, "vote", "a", 1, target="a"), event(1, "vote", "b", 1, target="b"), final]
    assert consensus(split)[0] is False
    changed_mind = [event(0, "vote", "b", 1, target="b"), event(1, "vote", "b", 1, target="a"), event(2, "vote", "a", 1, target="a"), final]
    assert consensus(changed_mind)[0] is True  # latest vote per agent counts
    old_round_only = [event(0, "vote", "a", 0, target="a"), event(1, "vote", "b", 1, target="b"), final]
    assert consensus(old_round_only)[0] is False
    assert consensus([final])[0] is False  # no votes, no consensus


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="coordination: parameter token_budget"):
        Coordination(token_budget=0)
    with pytest.raises(ValueError, match="round_penalty"):
        Coordination(round_penalty=-1)
