"""llm_judge: pointwise "Score: N/10", batch "Ranking: 2 > 1 > 3", KeywordJudge for demos."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.llm_judge import KeywordJudge, LLMJudge, parse_ranking, parse_score, reply_text

REFERENCE = "Rayleigh scattering of sunlight by air molecules makes the sky blue"


def rollout(answer: str | None, i: int = 0, reference: str | None = REFERENCE) -> Rollout:
    return Rollout(rollout_id=f"r{i}", final_output=answer, ground_truth=reference, task_prompt="Why is the sky blue?")


class Recorder:
    """A fake LLM: records the messages and returns a fixed reply."""

    def __init__(self, reply):
        self.reply = reply
        self.messages = []

    def __call__(self, messages):
        self.messages.append(messages)
        return self.reply


def test_pointwise_prompt_and_parsing():
    judge = Recorder("The answer is mostly right but vague.\n**Score: 7/10**")
    result = LLMJudge(judge=judge, rubric="Be precise.").score(rollout("Because of scattering."))
    assert result.score == pytest.approx(0.7)
    assert "Score: 7/10" in result.reason
    system, user = judge.messages[0]
    assert system["role"] == "system" and "reference" in system["content"]
    assert "<task>\nWhy is the sky blue?\n</task>" in user["content"]
    assert f"<reference>\n{REFERENCE}\n</reference>" in user["content"]
    assert "<answer>\nBecause of scattering.\n</answer>" in user["content"]
    assert "Rubric: Be precise." in user["content"] and "Score: N/10" in user["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("Score: 8", 0.8), ("score = 3/10", 0.3), ("Rating: 85/100", 0.85), ("I give it 9 out of 10.\nScore: 9 out of 10", 0.9),
     ("Score: 2/10 at first... final Score: 6/10", 0.6)],
)
def test_parse_score_variants(reply, expected):
    assert parse_score(reply) == pytest.approx(expected)


def test_unparsable_or_out_of_range_reply_is_an_error_result():
    result = LLMJudge(judge=Recorder("Looks great to me!")).score(rollout("x"))
    assert result.score is None and "no 'Score: N/10'" in result.error
    assert "out of range" in LLMJudge(judge=Recorder("Score: 12/10")).score(rollout("x")).error


def test_failing_judge_call_is_an_error_result():
    def broken(messages):
        raise TimeoutError("model overloaded")

    assert LLMJudge(judge=broken).score(rollout("x")).error == "judge call failed: TimeoutError: model overloaded"


def test_openai_style_replies_are_accepted():
    assert reply_text({"choices": [{"message": {"content": "Score: 5/10"}}]}) == "Score: 5/10"

    class Message:
        content = "Score: 4/10"

    class Choice:
        message = Message()

    class Response:
        choices = [Choice()]

    assert LLMJudge(judge=lambda m: Response()).score(rollout("x")).score == pytest.approx(0.4)


def test_keyword_judge_grades_by_overlap_with_the_reference():
    good = LLMJudge().score(rollout(REFERENCE))
    bad = LLMJudge().score(rollout("Because the ocean reflects."))
    assert good.score == 1.0 and "Score: 10/10" in good.reason
    assert bad.score < 0.3
    assert KeywordJudge()([{"role": "user", "content": "<answer>\nx\n</answer>"}]).startswith("I cannot grade")


def test_no_judge_and_no_reference_is_not_applicable():
    assert LLMJudge().score(rollout("x", reference=None)) is None
    assert LLMJudge(mode="batch").score_batch([rollout("a", 0, None), rollout("b", 1, None)]) == [None, None]


def test_empty_answer_scores_zero_without_a_call():
    judge = Recorder("Score: 9/10")
    assert LLMJudge(judge=judge).score(rollout("  ")).score == 0.0 and judge.messages == []


def test_batch_mode_ranks_a_group():
    reward = LLMJudge(mode="batch")
    assert reward.mode == "batch" and LLMJudge.mode == "pointwise"
    group = [rollout("The sky is blue.", 0), rollout(REFERENCE, 1), rollout("No idea.", 2)]
    results = reward.score_batch(group)
    assert [r.score for r in results] == [0.5, 1.0, 0.0]
    assert results[0].metrics["ranking"] == "2 > 1 > 3"


def test_batch_prompt_and_ties():
    judge = Recorder("Both first ones are equally good.\nRanking: 1 = 2 > 3")
    results = LLMJudge(judge=judge, mode="batch").score_batch([rollout("a", 0), rollout("b", 1), rollout("c", 2)])
    assert [r.score for r in results] == [0.75, 0.75, 0.0]
    user = judge.messages[0][1]["content"]
    assert '<answer id="1">\na\n</answer>' in user and '<answer id="3">\nc\n</answer>' in user and "Ranking:" in user


def test_bad_ranking_fails_the_whole_group():
    results = LLMJudge(judge=Recorder("Ranking: 1 > 1 > 2"), mode="batch").score_batch([rollout("a", 0), rollout("b", 1), rollout("c", 2)])
    assert all(r.score is None and "exactly once" in r.error for r in results)


def test_group_of_one_is_judged_pointwise():
    judge = Recorder("Score: 6/10")
    assert LLMJudge(judge=judge, mode="batch").score_batch([rollout("a")])[0].score == pytest.approx(0.6)


def test_parse_ranking():
    assert parse_ranking("Ranking: 3 > 1 > 2", 3) == [0.5, 0.0, 1.0]
    assert parse_ranking("Ranking: #2 > #1", 2) == [0.0, 1.0]
    with pytest.raises(ValueError, match="every answer 1..3"):
        parse_ranking("Ranking: 1 > 2", 3)
    with pytest.raises(ValueError, match="no 'Ranking"):
        parse_ranking("2 is best", 2)


def test_parameters():
    def my_judge(messages):
        return "Score: 1/10"

    reward = LLMJudge(judge=my_judge)
    assert reward.params["judge"].endswith("my_judge") and reward.source == "llm"
    with pytest.raises(ValueError, match="parameter mode"):
        LLMJudge(mode="pairwise")
    with pytest.raises(ValueError, match="callable"):
        LLMJudge(judge="gpt-4o")
