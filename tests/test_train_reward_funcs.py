"""Reward plugins as TRL reward functions: built-ins by name on bare completions, the rollout
each completion becomes, failures and hangs giving ``None`` instead of stopping training,
batch plugins scoring groups, unknown names and weights. No model, no TRL: the functions are
called the way ``GRPOTrainer`` calls them."""

from __future__ import annotations

import logging
import math
import threading
import time

import pytest

from agent_rl_plugin.rewards import EvaluateResult, reward
from agent_rl_plugin.rewards.runner import UnknownRewardError
from agent_rl_plugin.train import TrainError
from agent_rl_plugin.train.reward_funcs import (
    PluginRewardFunction,
    RewardFunctionError,
    UnknownRewardFunctionError,
    completion_rollouts,
    reward_functions,
    reward_weights,
)

QUESTION = [{"role": "user", "content": "How much do 3 notebooks and 2 pens cost in total?"}]


def said(text: str) -> list[dict]:
    """A conversational completion, as TRL passes it."""
    return [{"role": "assistant", "content": text}]


def call(func, completions, prompts=None, **columns):
    prompts = prompts if prompts is not None else [QUESTION] * len(completions)
    return func(prompts=prompts, completions=completions, completion_ids=[[1] * 4] * len(completions), **columns)


@reward(name="length")
def length(rollout):
    return float(len(rollout.final_output or ""))


def test_task_completion_by_name_uses_the_ground_truth_column(plugin_manager):
    (func,) = reward_functions(["task_completion"], plugin_manager=plugin_manager)
    assert func.__name__ == "task_completion"  # TRL logs rewards/task_completion/mean
    assert func.reward_weight == 1.5  # the plugin's own weight
    scores = call(
        func,
        [said("The total is 15.00."), said("It is 12."), said("15"), said("anything")],
        ground_truth=["15.0", "15.0", '["15", "fifteen"]', None],  # JSON text, as build_prompt_dataset gives it
        task_id=["shop-0"] * 4,
    )
    assert scores == [1.0, 0.0, 1.0, None]  # no ground truth: not applicable -> None
    assert func.stats.scored == 3 and func.stats.not_applicable == 1 and func.stats.errors == 0


def test_builtins_that_read_only_the_answer_score_plain_text_completions(plugin_manager):
    quality, syntax = reward_functions(["answer_quality", "syntax_valid"], plugin_manager=plugin_manager)
    texts = ["Because prices differ, the total is 15. For example, 3 x 4 + 2 x 1.5.", "```python\nprint(1)\n```"]
    scores = quality(prompts=["question?"] * 2, completions=texts)  # plain text, no chat messages
    assert all(0.0 < s <= 1.0 for s in scores)
    assert syntax(prompts=["q"] * 3, completions=["```python\nx = (\n```", "```python\nx = 1\n```", "no code"]) == [
        0.0, 1.0, None,
    ]


def test_a_plugin_name_means_all_its_rewards(plugin_manager):
    names = [f.__name__ for f in reward_functions(["rewards_builtin"], plugin_manager=plugin_manager)]
    assert {"task_completion", "answer_quality", "tool_success"} <= set(names)


def test_each_completion_becomes_a_single_turn_rollout():
    prompts = [QUESTION, QUESTION, "plain prompt"]
    completions = [said("15"), said("16"), "text answer"]
    rollouts = completion_rollouts(
        prompts, completions, [[5, 6, 7], [5], [1, 2]],
        ground_truth=["15.0", '"Paris"', None], task_id=["shop-0", "shop-0", None],
        difficulty=["easy", "easy", "hard"], trainer_state=[object()] * 3,
    )
    first, second, third = rollouts
    assert first.final_output == "15" and first.messages == QUESTION + said("15")
    assert first.ground_truth == 15.0 and second.ground_truth == "Paris" and third.ground_truth is None
    assert first.task_id == "shop-0" and third.task_id is None
    assert first.group_id == second.group_id != third.group_id  # same prompt and task: one GRPO group
    assert [s.kind for s in first.steps] == ["llm"] and first.steps[0].output_tokens == 3 == first.output_tokens
    assert first.tool_calls == [] and first.prompt == QUESTION[0]["content"]
    assert first.metadata == {"difficulty": "easy"}  # other JSON-able columns; TRL's keywords are not columns
    assert third.messages == [{"role": "user", "content": "plain prompt"}, {"role": "assistant", "content": "text answer"}]
    assert len({r.rollout_id for r in rollouts}) == 3


def test_a_raising_plugin_gives_none_and_warns_once(caplog):
    @reward(name="boom")
    def boom(rollout):
        if "bad" in rollout.final_output:
            raise ZeroDivisionError("no luck")
        return 1.0

    (func,) = reward_functions([boom])
    metrics = []
    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin.train.reward_funcs"):
        assert call(func, [said("bad"), said("good"), said("bad")], log_metric=lambda k, v: metrics.append((k, v))) == [
            None, 1.0, None,
        ]
        assert call(func, [said("bad")]) == [None]
    warnings = [r for r in caplog.records if "boom" in r.getMessage()]
    assert len(warnings) == 1 and "ZeroDivisionError: no luck" in warnings[0].getMessage()
    assert func.stats.errors == 3 and func.stats.scored == 1
    assert func.stats.first_error.startswith("ZeroDivisionError")
    assert metrics == [("rewards/boom/failed", pytest.approx(2 / 3))]


@pytest.mark.parametrize("value", [math.nan, "high", {"score": math.inf}, True])
def test_invalid_values_give_none(value):
    (func,) = reward_functions([reward(lambda rollout: value, name="odd")])
    assert call(func, [said("x")]) == [None]
    assert func.stats.errors == 1


def test_result_objects_and_dicts_give_their_episode_score():
    @reward(name="structured")
    def structured(rollout):
        if rollout.final_output == "dict":
            return {"score": 0.25, "reason": "as a dict"}
        return EvaluateResult(score=0.75, reason="as a result", metrics={"n": 1})

    (func,) = reward_functions([structured])
    assert call(func, [said("dict"), said("object")]) == [0.25, 0.75]


def test_a_hanging_plugin_gives_none_within_the_timeout_and_is_skipped_until_it_returns():
    release = threading.Event()

    @reward(name="slow")
    def slow(rollout):
        if rollout.final_output == "hang":
            release.wait(30)
        return 1.0

    (func,) = reward_functions([slow], timeout_s=0.3)
    started = time.perf_counter()
    assert call(func, [said("ok"), said("hang"), said("ok")]) == [1.0, None, None]  # the rest of the call too
    assert time.perf_counter() - started < 2.0
    started = time.perf_counter()
    assert call(func, [said("ok")]) == [None]  # still stuck: not called again
    assert time.perf_counter() - started < 0.2
    assert func.stats.timeouts == 3
    release.set()
    func._busy.join(5)
    assert call(func, [said("ok"), said("ok")]) == [1.0, 1.0]


def test_batch_plugins_score_each_prompt_group():
    groups = []

    @reward(name="rank", mode="batch")
    def rank(rollouts):
        groups.append([r.final_output for r in rollouts])
        assert len({r.group_id for r in rollouts}) == 1
        order = sorted(range(len(rollouts)), key=lambda i: len(rollouts[i].final_output))
        return [float(order.index(i)) for i in range(len(rollouts))]

    (func,) = reward_functions([rank])
    other = [{"role": "user", "content": "Another question?"}]
    completions = [said("aaa"), said("a"), said("aa"), said("bb"), said("b")]
    scores = call(func, completions, prompts=[QUESTION] * 3 + [other] * 2)
    assert groups == [["aaa", "a", "aa"], ["bb", "b"]]
    assert scores == [2.0, 0.0, 1.0, 1.0, 0.0]


def test_unknown_names_list_the_installed_rewards(plugin_manager):
    with pytest.raises(UnknownRewardFunctionError, match="unknown reward 'nope'; known rewards: .*task_completion") as info:
        reward_functions(["task_completion", "nope"], plugin_manager=plugin_manager)
    assert isinstance(info.value, TrainError) and isinstance(info.value, UnknownRewardError)
    assert info.value.hint


def test_weights_by_name_or_position_and_plain_callables(plugin_manager):
    def trl_style(prompts, completions, **kwargs):
        return [1.0] * len(completions)

    funcs = reward_functions(["task_completion", length, trl_style], plugin_manager=plugin_manager)
    assert funcs[2] is trl_style  # passed through untouched
    assert reward_weights(funcs) == [1.5, 1.0, 1.0]

    funcs = reward_functions(["task_completion", length, trl_style], plugin_manager=plugin_manager,
                             weights={"length": 0.1, "trl_style": 2.0})
    assert reward_weights(funcs) == [1.5, 0.1, 2.0]
    assert funcs[2] is not trl_style and funcs[2].__name__ == "trl_style" and not hasattr(trl_style, "reward_weight")
    assert funcs[2](prompts=["q"], completions=["a"]) == [1.0]

    funcs = reward_functions([length, trl_style], weights=[3, 0.5])
    assert reward_weights(funcs) == [3.0, 0.5]
    assert isinstance(funcs[0], PluginRewardFunction)

    with pytest.raises(RewardFunctionError, match="2 weights for 1 reward functions"):
        reward_functions([length], weights=[1, 2])
    with pytest.raises(RewardFunctionError, match="unknown reward functions \\['lenght'\\]"):
        reward_functions([length], weights={"lenght": 1})
    with pytest.raises(RewardFunctionError, match="finite number"):
        reward_functions([length], weights=[math.nan])


def test_bad_entries_are_refused():
    with pytest.raises(RewardFunctionError, match="no rewards given"):
        reward_functions([])
    with pytest.raises(RewardFunctionError, match="42 is not a reward"):
        reward_functions([42])
    with pytest.raises(RewardFunctionError, match="'length' given twice"):
        reward_functions([length, length])
    with pytest.raises(RewardFunctionError, match="timeout_s must be > 0"):
        reward_functions([length], timeout_s=0)
