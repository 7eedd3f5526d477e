"""GiGPO advantages: hand-computed cases, input-order invariance, a per-row Python reference on
random data (hypothesis), input formats and the errors for bad input."""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_rl_plugin.rl import compute_gigpo, discounted_returns, gigpo_advantages

EPS = 1e-6
SQRT2 = math.sqrt(2.0)


def row(group, traj, step, state, reward, **extra):
    return {"group_id": group, "trajectory_id": traj, "step_index": step, "state_key": state, "reward": reward, **extra}


# Group g1: trajectory A (3 steps, revisits s0) and B (2 steps); group g2: trajectory C alone
# (2 steps, both in s0: a revisit, and a state named like g1's s0 that must stay separate).
# gamma = 0.5:
#   A: r = 0, 1, 2  ->  G_A2 = 2, G_A1 = 1 + 0.5*2 = 2, G_A0 = 0 + 0.5*2 = 1;  R_A = 3
#   B: r = 1, 0     ->  G_B1 = 0, G_B0 = 1 + 0.5*0 = 1;                       R_B = 1
#   C: r = 0, 4     ->  G_C1 = 4, G_C0 = 0 + 0.5*4 = 2;                       R_C = 4
CASE = [
    row("g1", "A", 0, "s0", 0.0),
    row("g1", "A", 1, "s1", 1.0),
    row("g1", "A", 2, "s0", 2.0),
    row("g1", "B", 0, "s0", 1.0),
    row("g1", "B", 1, "s2", 0.0),
    row("g2", "C", 0, "s0", 0.0),
    row("g2", "C", 1, "s0", 4.0),
]
RETURNS = [1.0, 2.0, 2.0, 1.0, 0.0, 2.0, 4.0]

# Step groups:
#   g1/s0 = {A0: G=1, A2: G=2, B0: G=1}: mean 4/3, deviations -1/3, +2/3, -1/3,
#           unbiased var = (1/9 + 4/9 + 1/9) / 2 = 1/3, std = 0.5773503
#   g1/s1 = {A1}, g1/s2 = {B1}: step groups of one -> A_S = 0
#   g2/s0 = {C0: G=2, C1: G=4}: mean 3, deviations -1, +1, std = sqrt(2)
STEP_MEAN_NORM = [-1 / 3, 0.0, 2 / 3, -1 / 3, 0.0, -1.0, 1.0]
S0_STD = math.sqrt(1 / 3)
STEP_STD_NORM = [
    -1 / 3 / (S0_STD + EPS),
    0.0,
    2 / 3 / (S0_STD + EPS),
    -1 / 3 / (S0_STD + EPS),
    0.0,
    -1 / (SQRT2 + EPS),
    1 / (SQRT2 + EPS),
]

# Episode advantages. g2 has one trajectory: mean 0, std 1, so A_E(C) = 4 (4 / (1 + eps) with std).
# baseline="trajectory": g1 values [3, 1]: mean 2, unbiased std sqrt(((1)^2 + (-1)^2) / 1) = sqrt(2)
EP_TRAJ_MEAN = {"A": 1.0, "B": -1.0, "C": 4.0}
EP_TRAJ_STD = {"A": 1 / (SQRT2 + EPS), "B": -1 / (SQRT2 + EPS), "C": 4 / (1 + EPS)}
# baseline="step": g1 list [3, 3, 3, 1, 1] (R once per step): mean 11/5 = 2.2,
#   unbiased var = (3 * 0.8^2 + 2 * 1.2^2) / 4 = (1.92 + 2.88) / 4 = 1.2, std = sqrt(1.2)
EP_STEP_MEAN = {"A": 0.8, "B": -1.2, "C": 4.0}
EP_STEP_STD = {"A": 0.8 / (math.sqrt(1.2) + EPS), "B": -1.2 / (math.sqrt(1.2) + EPS), "C": 4 / (1 + EPS)}


@pytest.mark.parametrize(
    "mode, baseline, episode, step",
    [
        ("mean_norm", "trajectory", EP_TRAJ_MEAN, STEP_MEAN_NORM),
        ("mean_norm", "step", EP_STEP_MEAN, STEP_MEAN_NORM),
        ("mean_std_norm", "trajectory", EP_TRAJ_STD, STEP_STD_NORM),
        ("mean_std_norm", "step", EP_STEP_STD, STEP_STD_NORM),
    ],
)
@pytest.mark.parametrize("omega", [1.0, 0.5])
def test_hand_computed_case(mode, baseline, episode, step, omega):
    result = compute_gigpo(CASE, omega=omega, gamma=0.5, mode=mode, baseline=baseline)
    ep = [episode[r["trajectory_id"]] for r in CASE]
    np.testing.assert_allclose(result.step_return, RETURNS, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.episode_advantage, ep, rtol=0, atol=1e-9)
    np.testing.assert_allclose(result.step_advantage, step, rtol=0, atol=1e-9)
    np.testing.assert_allclose(result.advantage, np.add(ep, np.multiply(omega, step)), rtol=0, atol=1e-9)
    assert result.step_group_size.tolist() == [3, 1, 3, 3, 1, 2, 2]
    assert result.episode_reward.tolist() == [3, 3, 3, 1, 1, 4, 4]
    s = result.summary
    assert (s["groups"], s["singleton_groups"], s["trajectories"]) == (2, 1, 3)
    assert (s["step_groups"], s["singleton_step_groups"], s["revisits"]) == (4, 2, 2)  # A0/A2 and C0/C1
    assert s["rows_in_shared_step_groups"] == 5


def test_episode_reward_column_replaces_the_sum_of_step_rewards():
    # Same steps, R given: A -> 10, B -> 0 (so the step returns are unchanged: they use `reward`).
    # baseline="trajectory", mean_norm: g1 values [10, 0], mean 5: A_E(A) = 5, A_E(B) = -5; C alone: 7.
    rows = [dict(r, episode_reward={"A": 10.0, "B": 0.0, "C": 7.0}[r["trajectory_id"]]) for r in CASE]
    result = compute_gigpo(rows, gamma=0.5, baseline="trajectory")
    assert result.episode_advantage.tolist() == [5, 5, 5, -5, -5, 7, 7]
    np.testing.assert_allclose(result.step_advantage, STEP_MEAN_NORM, atol=1e-12)


def test_gaps_and_order_of_step_indices():
    # Indices 10, 30, 20 are sorted to 10, 20, 30: r = 1 (10), 3 (20), 2 (30); gamma 0.5:
    # G(30) = 2, G(20) = 3 + 1 = 4, G(10) = 1 + 0.5*4 = 3 (the discount counts steps, not index gaps)
    rows = [row("g", "T", 10, "a", 1.0), row("g", "T", 30, "b", 2.0), row("g", "T", 20, "c", 3.0)]
    assert compute_gigpo(rows, gamma=0.5).step_return.tolist() == [3.0, 2.0, 4.0]


def test_all_equal_groups_and_gamma_edges():
    # Two trajectories with identical rewards and states: every group is all-equal -> exactly 0.
    rows = [row("g", t, i, f"s{i}", 0.1) for t in ("x", "y") for i in range(3)]
    result = compute_gigpo(rows, mode="mean_std_norm", epsilon=0.0)
    assert result.advantage.tolist() == [0.0] * 6
    assert (result.summary["all_equal_groups"], result.summary["all_equal_step_groups"]) == (1, 3)
    # gamma = 0: G_t = r_t; gamma = 1: G_t = the sum of the remaining rewards
    rewards = np.array([1.0, 2.0, 3.0, 4.0])
    continues = np.array([True, True, False, False])  # trajectories [1, 2, 3] and [4]
    assert discounted_returns(rewards, continues, 0.0).tolist() == [1, 2, 3, 4]
    assert discounted_returns(rewards, continues, 1.0).tolist() == [6, 5, 3, 4]


def test_long_trajectory_returns_do_not_underflow():
    # 5000 steps of reward 1 with gamma 0.9: G_t = (1 - 0.9^(5000 - t)) / 0.1
    n = 5000
    g = discounted_returns(np.ones(n), np.arange(n) < n - 1, 0.9)
    np.testing.assert_allclose(g, (1 - 0.9 ** (n - np.arange(n))) / 0.1, rtol=1e-12)


def _bench_like_table(seed: int, trajectories: int = 300) -> pa.Table:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 21, size=trajectories)
    traj = np.repeat(np.arange(trajectories), lengths)
    step = np.arange(traj.size) - np.repeat(np.cumsum(lengths) - lengths, lengths) + 7
    table = pa.table(
        {
            "group_id": [f"g{t // 4}" for t in traj],
            "trajectory_id": [f"t{t}" for t in traj],
            "step_index": step,
            "state_key": [f"s{k}" for k in rng.integers(0, 5, size=traj.size)],
            "reward": rng.choice([0.0, 0.5, 1.0, -0.25], size=traj.size),
        }
    )
    return table.take(pa.array(rng.permutation(table.num_rows)))


@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
def test_sort_free_and_sorted_paths_agree(monkeypatch, mode):
    # Consecutive step indices take the sort-free grid; forcing the sorted path (as gaps or a
    # trajectory longer than the grid allows would) must give the same values.
    import agent_rl_plugin.advantages.gigpo as gigpo

    table = _bench_like_table(3)
    calls: list = []
    dense = gigpo._dense_step_returns
    monkeypatch.setattr(gigpo, "_dense_step_returns", lambda *a: calls.append(dense(*a)) or calls[-1])
    fast = compute_gigpo(table, mode=mode, gamma=0.9)
    assert len(calls) == 1 and calls[0] is not None  # the grid ran and gave the values
    monkeypatch.setattr(gigpo, "_DENSE_MAX_STEPS", 0)
    slow = compute_gigpo(table, mode=mode, gamma=0.9)
    np.testing.assert_allclose(fast.step_return, slow.step_return, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.advantage, slow.advantage, rtol=0, atol=1e-12)
    assert fast.summary == pytest.approx(slow.summary, rel=0, abs=1e-12)


def test_sort_free_path_matches_the_reference_on_long_trajectories():
    # 3000 steps (within the grid) and 5000 steps (over it: sorted) against the per-row loops.
    rows = [row("g", t, i, f"s{i % 7}", float(i % 3)) for t, n in (("a", 3000), ("b", 5000)) for i in range(n)]
    random.Random(1).shuffle(rows)
    expected = reference_gigpo(rows, 1.0, 0.99, "mean_std_norm", EPS, "step")
    actual = gigpo_advantages(rows, gamma=0.99, mode="mean_std_norm", epsilon=EPS)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)


# --- a per-row Python reference (loops, like verl-agent's gigpo/core_gigpo.py) ------------
def reference_gigpo(rows, omega, gamma, mode, epsilon, baseline):
    n = len(rows)
    by_traj = defaultdict(list)
    for i, r in enumerate(rows):
        by_traj[r["trajectory_id"]].append(i)
    returns = [0.0] * n
    episode = {}
    for traj, idx in by_traj.items():
        idx.sort(key=lambda i: rows[i]["step_index"])
        running = 0.0
        for i in reversed(idx):
            running = rows[i]["reward"] + gamma * running
            returns[i] = running
        if "episode_reward" in rows[idx[0]]:
            episode[traj] = rows[idx[0]]["episode_reward"]
        else:
            episode[traj] = sum(rows[i]["reward"] for i in idx)
    scores = defaultdict(list)
    members = defaultdict(set)
    for traj, idx in by_traj.items():
        group = rows[idx[0]]["group_id"]
        members[group].add(traj)
        scores[group].extend([episode[traj]] * (len(idx) if baseline == "step" else 1))
    ep_stats = {}
    for group, values in scores.items():
        if len(members[group]) == 1:
            ep_stats[group] = (0.0, 1.0)
        else:
            ep_stats[group] = (statistics.fmean(values), statistics.stdev(values))
    step_values = defaultdict(list)
    for i, r in enumerate(rows):
        step_values[(r["group_id"], r["state_key"])].append(returns[i])
    out = []
    for i, r in enumerate(rows):
        mean, std = ep_stats[r["group_id"]]
        a_e = episode[r["trajectory_id"]] - mean
        if mode == "mean_std_norm":
            a_e /= std + epsilon
        values = step_values[(r["group_id"], r["state_key"])]
        if len(values) == 1:
            a_s = 0.0
        else:
            a_s = returns[i] - statistics.fmean(values)
            if mode == "mean_std_norm":
                a_s /= statistics.stdev(values) + epsilon
        out.append(a_e + omega * a_s)
    return out


@st.composite
def step_tables(draw):
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    reward_pool = [0.0, 1.0, -1.0, 0.5] + [round(rng.uniform(-5, 5), 3) for _ in range(4)]
    rows = []
    consecutive = draw(st.booleans())  # every trajectory's indices consecutive: the sort-free path
    for g in range(draw(st.integers(1, 4))):
        for t in range(draw(st.integers(1, 4))):
            length = draw(st.integers(1, 6))
            if consecutive:
                start = rng.randrange(-3, 4)
                indices = rng.sample(range(start, start + length), length)  # unsorted
            else:
                indices = rng.sample(range(3 * length), length)  # distinct, with gaps, unsorted
            for step in indices:
                rows.append(row(f"g{g}", f"g{g}t{t}", step, f"s{rng.randrange(3)}", rng.choice(reward_pool)))
    if draw(st.booleans()):  # an explicit episode reward per trajectory
        totals = {r["trajectory_id"]: rng.choice(reward_pool) for r in rows}
        rows = [dict(r, episode_reward=totals[r["trajectory_id"]]) for r in rows]
    rng.shuffle(rows)
    return rows


@settings(max_examples=150, deadline=None)
@given(
    rows=step_tables(),
    mode=st.sampled_from(["mean_norm", "mean_std_norm"]),
    baseline=st.sampled_from(["step", "trajectory"]),
    gamma=st.sampled_from([0.0, 0.5, 0.95, 1.0]),
    omega=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_matches_the_per_row_reference(rows, mode, baseline, gamma, omega):
    expected = reference_gigpo(rows, omega, gamma, mode, EPS, baseline)
    actual = gigpo_advantages(rows, omega=omega, gamma=gamma, mode=mode, baseline=baseline, epsilon=EPS)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(rows=step_tables(), seed=st.integers(0, 1000))
def test_shuffling_the_rows_permutes_the_values(rows, seed):
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    for mode in ("mean_norm", "mean_std_norm"):
        base = gigpo_advantages(rows, mode=mode)
        shuffled = gigpo_advantages([rows[i] for i in order], mode=mode)
        np.testing.assert_allclose(shuffled, base[order], rtol=0, atol=1e-12)


def test_input_formats_agree():
    expected = gigpo_advantages(CASE, gamma=0.5)
    columns = {k: [r[k] for r in CASE] for k in CASE[0]}
    assert gigpo_advantages(pa.Table.from_pylist(CASE), gamma=0.5).tolist() == expected.tolist()
    assert gigpo_advantages(columns, gamma=0.5).tolist() == expected.tolist()
    assert gigpo_advantages(pa.RecordBatch.from_pylist(CASE), gamma=0.5).tolist() == expected.tolist()
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(CASE).iloc[::-1]  # reversed order, non-default index
    assert gigpo_advantages(frame, gamma=0.5).tolist() == expected[::-1].tolist()
    frame["state_key"] = frame["state_key"].astype("category")
    assert gigpo_advantages(frame, gamma=0.5).tolist() == expected[::-1].tolist()
    # integer ids work like text ids
    numeric = [dict(r, group_id=int(r["group_id"][1]), trajectory_id=ord(r["trajectory_id"])) for r in CASE]
    assert gigpo_advantages(numeric, gamma=0.5).tolist() == expected.tolist()


def test_empty_input():
    result = compute_gigpo([])
    assert result.advantage.size == 0 and result.summary["rows"] == 0
    assert (
        gigpo_advantages(
            pa.table(
                {c: pa.array([], pa.string()) for c in ("group_id", "trajectory_id", "state_key")}
                | {"step_index": pa.array([], pa.int64()), "reward": pa.array([], pa.float64())}
            )
        ).size
        == 0
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda rows: rows.append(row("g1", "A", 1, "s9", 0.0)), "same step_index: trajectory 'A', step_index 1"),
        # {0, 0, 2}: as many indices as the span holds, so only the sort-free path's cell count sees it
        (lambda rows: rows[1].update(step_index=0), "same step_index: trajectory 'A', step_index 0"),
        (lambda rows: rows[1].update(reward=float("nan")), "reward is nan at row 1 (trajectory 'A', step_index 1)"),
        (lambda rows: rows[4].update(reward=float("inf")), "reward is inf at row 4 (trajectory 'B', step_index 1)"),
        (lambda rows: rows[3].update(reward=None), "reward is missing at row 3 (trajectory 'B', step_index 0)"),
        (lambda rows: rows[2].update(state_key=None), "state_key is missing at row 2 (trajectory 'A', step_index 2)"),
        (lambda rows: rows[0].update(group_id=None), "group_id is missing at row 0"),
        (lambda rows: rows[4].update(group_id="g2"), "a trajectory is in two groups: trajectory 'B'"),
        (lambda rows: rows[0].update(step_index=1.5), "step_index must be whole numbers"),
        (lambda rows: [r.pop("state_key") for r in rows], "lack the column(s) state_key"),
    ],
)
def test_bad_input_is_named(change, message):
    rows = [dict(r) for r in CASE]
    change(rows)
    with pytest.raises(ValueError) as info:
        gigpo_advantages(rows)
    assert message in str(info.value)


def test_episode_reward_must_be_constant_per_trajectory():
    rows = [dict(r, episode_reward=1.0) for r in CASE]
    rows[2]["episode_reward"] = 2.0
    with pytest.raises(ValueError, match="episode_reward differs between the steps of one trajectory: trajectory 'A'"):
        gigpo_advantages(rows)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "std"}, "mode must be one of"),
        ({"baseline": "group"}, "baseline must be one of"),
        ({"gamma": 1.5}, "gamma must be within"),
        ({"epsilon": -1.0}, "epsilon must be"),
        ({"omega": float("nan")}, "omega must be"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gigpo_advantages(CASE, **kwargs)
