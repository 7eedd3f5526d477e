"""GRPO (TRL 1.16's formula), RLOO and Dr. GRPO: hand-computed cases, groups of one, equal
rewards, TRL agreement on a random case, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agent_rl_plugin.rl import dr_grpo_advantages, group_summary, grpo_advantages, rloo_advantages

# Group a: rewards 1, 0, 0, 1 (mean 0.5); group b: 2, 4 (mean 3); group c: 7 alone.
REWARDS = [1.0, 2.0, 0.0, 7.0, 0.0, 4.0, 1.0]
GROUPS = ["a", "b", "a", "c", "a", "b", "a"]
# unbiased stds: a: sqrt(4 * 0.25 / 3) = sqrt(1/3) = 0.5773503; b: sqrt((1 + 1) / 1) = sqrt(2)
STD_A, STD_B = math.sqrt(1 / 3), math.sqrt(2)


def test_grpo_group_scale_by_hand():
    # (r - mean) / (std + 1e-4); c is alone: 0
    expected = [0.5 / (STD_A + 1e-4), -1 / (STD_B + 1e-4), -0.5 / (STD_A + 1e-4), 0.0,
                -0.5 / (STD_A + 1e-4), 1 / (STD_B + 1e-4), 0.5 / (STD_A + 1e-4)]
    np.testing.assert_allclose(grpo_advantages(REWARDS, GROUPS), expected, rtol=0, atol=1e-12)


def test_grpo_batch_and_none_scale_by_hand():
    # batch std: unbiased std of all 7 rewards; mean 15/7
    mean = 15 / 7
    batch_std = math.sqrt(sum((r - mean) ** 2 for r in REWARDS) / 6)
    centred = [0.5, -1.0, -0.5, 0.0, -0.5, 1.0, 0.5]
    np.testing.assert_allclose(grpo_advantages(REWARDS, GROUPS, "batch"), np.divide(centred, batch_std + 1e-4), atol=1e-12)
    assert grpo_advantages(REWARDS, GROUPS, "none").tolist() == centred
    assert dr_grpo_advantages(REWARDS, GROUPS).tolist() == centred


def test_rloo_by_hand():
    # a: 1 - (0 + 0 + 1)/3 = 2/3, 0 - (1 + 0 + 1)/3 = -2/3; b: 2 - 4 = -2, 4 - 2 = 2; c alone: 0
    expected = [2 / 3, -2.0, -2 / 3, 0.0, -2 / 3, 2.0, 2 / 3]
    np.testing.assert_allclose(rloo_advantages(REWARDS, GROUPS), expected, rtol=0, atol=1e-12)


def trl_grpo_reference(rewards: np.ndarray, num_generations: int, scale: str) -> np.ndarray:
    """TRL 1.16 ``GRPOTrainer._generate_and_score_completions`` (trl/trainer/grpo_trainer.py,
    lines 2765-2787, ``multi_objective_aggregation == "sum_then_normalize"``) in numpy, with
    ``trl.trainer.utils.nanstd`` (utils.py line 1021: Bessel-corrected variance):

        mean_grouped_rewards = nanmean(rewards.view(-1, G), dim=1).repeat_interleave(G)
        std_rewards = nanstd(rewards.view(-1, G), dim=1).repeat_interleave(G)   # "group"
        std_rewards = nanstd(rewards).expand_as(rewards)                         # "batch"
        advantages = rewards - mean_grouped_rewards
        if scale_rewards != "none": advantages = advantages / (std_rewards + 1e-4)
    """
    grouped = rewards.reshape(-1, num_generations)
    mean = np.repeat(grouped.mean(axis=1), num_generations)
    if scale == "group":
        std = np.repeat(grouped.std(axis=1, ddof=1), num_generations)
    else:
        std = np.full(rewards.size, rewards.std(ddof=1))
    advantages = rewards - mean
    return advantages if scale == "none" else advantages / (std + 1e-4)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_matches_trl_on_a_random_case(scale):
    rng = np.random.default_rng(7)
    rewards = rng.normal(size=64 * 8)
    groups = np.repeat(np.arange(64), 8)  # TRL's layout: consecutive groups of num_generations
    expected = trl_grpo_reference(rewards, 8, scale)
    np.testing.assert_allclose(grpo_advantages(rewards, groups, scale), expected, rtol=1e-12, atol=1e-12)
    # order does not matter
    order = rng.permutation(rewards.size)
    np.testing.assert_allclose(grpo_advantages(rewards[order], groups[order], scale), expected[order], atol=1e-12)


def test_grpo_matches_torch_when_available():
    torch = pytest.importorskip("torch")
    rewards = torch.tensor([0.3, 1.2, -0.7, 2.0, 0.0, 0.9], dtype=torch.float64)
    grouped = rewards.view(-1, 3)
    expected = (rewards - grouped.mean(dim=1).repeat_interleave(3)) / (grouped.std(dim=1).repeat_interleave(3) + 1e-4)
    np.testing.assert_allclose(grpo_advantages(rewards.numpy(), [0, 0, 0, 1, 1, 1]), expected.numpy(), atol=1e-12)


@pytest.mark.parametrize(
    "fn", [grpo_advantages, rloo_advantages, dr_grpo_advantages, lambda r, g: grpo_advantages(r, g, "batch")]
)
def test_groups_of_one_and_equal_rewards_give_zero(fn):
    # groups of one
    assert fn([3.0, -1.0, 5.0], ["x", "y", "z"]).tolist() == [0.0, 0.0, 0.0]
    # equal rewards in a group (0.1 three times: a naive mean would leave ~1e-17 residues)
    assert fn([0.1, 0.1, 0.1, 2.0, 2.0], ["a", "a", "a", "b", "b"]).tolist() == [0.0] * 5
    # a single rollout overall
    assert fn([4.0], ["only"]).tolist() == [0.0]
    assert fn([], []).tolist() == []


def test_group_summary_counts():
    summary = group_summary([1.0, 1.0, 2.0, 3.0, 5.0], ["a", "a", "b", "c", "c"])
    assert summary.to_dict() == {"rollouts": 5, "groups": 3, "singleton_groups": 1, "all_equal_groups": 1}


def test_mixed_id_types_and_epsilon_zero():
    # ids Arrow cannot put in one column still group correctly; epsilon 0 with no spread gives 0
    assert grpo_advantages([1.0, 3.0, 5.0, 5.0], [1, 1, "1", "1"], epsilon=0.0).tolist() == [
        -1 / math.sqrt(2), 1 / math.sqrt(2), 0.0, 0.0,
    ]


@pytest.mark.parametrize("fn", [grpo_advantages, rloo_advantages, dr_grpo_advantages])
def test_bad_input_names_the_rollout(fn):
    with pytest.raises(ValueError, match=r"reward is nan at row 1 \(r-2\)"):
        fn([1.0, float("nan")], ["g", "g"], rollout_ids=["r-1", "r-2"])
    with pytest.raises(ValueError, match=r"reward is missing at row 0"):
        fn([None, 1.0], ["g", "g"])
    with pytest.raises(ValueError, match=r"group id is missing at row 1 \(r-2\)"):
        fn([1.0, 2.0], ["g", None], rollout_ids=["r-1", "r-2"])
    with pytest.raises(ValueError, match="group_ids has 1 entries but there are 2 rewards"):
        fn([1.0, 2.0], ["g"])


def test_unknown_scale():
    with pytest.raises(ValueError, match="scale must be one of group, batch, none"):
        grpo_advantages([1.0], ["g"], "std")
