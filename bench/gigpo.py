"""GiGPO advantages on a million steps: the vectorised code against a per-row Python reference.

Builds a synthetic steps table (``--groups`` groups x ``--trajectories`` trajectories, lengths
uniform in [5, 20] so about 12.5 steps each, state keys drawn from a vocabulary of ``--vocab``
keys per group, rewards in {0, 0.5, 1} at random), times
:func:`agent_rl_plugin.rl.compute_gigpo` on it (best of ``--repeat``), then checks it against a
straightforward per-row Python implementation (loops and dicts, like verl-agent's
``gigpo/core_gigpo.py``) on a smaller table of about ``--check-steps`` rows, where both are
timed, and prints both times, the ratio per step and the largest difference.

    python bench/gigpo.py                                  # 10k groups x 8 trajectories (~1M steps)
    python bench/gigpo.py --groups 1000 --check-steps 5000 # quick
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.rl import compute_gigpo


def synthetic_steps(groups: int, trajectories: int, vocab: int, seed: int = 0) -> pa.Table:
    """A steps table with text ids, built with numpy and Arrow compute (no per-row Python)."""
    rng = np.random.default_rng(seed)
    n_traj = groups * trajectories
    lengths = rng.integers(5, 21, size=n_traj)  # mean 12.5
    traj = np.repeat(np.arange(n_traj), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    step = np.arange(traj.size) - np.repeat(starts, lengths)
    group = traj // trajectories
    state = rng.integers(0, vocab, size=traj.size)
    reward = rng.choice([0.0, 0.5, 1.0], size=traj.size, p=[0.6, 0.2, 0.2])

    def text(prefix: str, values: np.ndarray) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(values), pa.string()), "")

    table = pa.table({
        "group_id": text("g", group),
        "trajectory_id": text("t", traj),
        "step_index": pa.array(step),
        "state_key": text("s", state),
        "reward": pa.array(reward),
    })
    return table.take(pa.array(rng.permutation(table.num_rows)))  # rows in no particular order


def reference_gigpo(rows, omega=1.0, gamma=0.95, mode="mean_norm", epsilon=1e-6, baseline="step"):
    """Per-row Python GiGPO (loops and dicts); the same rules as ``compute_gigpo``."""
    n = len(rows)
    by_traj = defaultdict(list)
    for i, r in enumerate(rows):
        by_traj[r["trajectory_id"]].append(i)
    returns, episode = [0.0] * n, {}
    for traj, idx in by_traj.items():
        idx.sort(key=lambda i: rows[i]["step_index"])
        running = 0.0
        for i in reversed(idx):
            running = rows[i]["reward"] + gamma * running
            returns[i] = running
        episode[traj] = sum(rows[i]["reward"] for i in idx)
    scores, members = defaultdict(list), defaultdict(set)
    for traj, idx in by_traj.items():
        group = rows[idx[0]]["group_id"]
        members[group].add(traj)
        scores[group].extend([episode[traj]] * (len(idx) if baseline == "step" else 1))
    stats = {
        g: (0.0, 1.0) if len(members[g]) == 1 else (statistics.fmean(v), statistics.stdev(v))
        for g, v in scores.items()
    }
    step_values = defaultdict(list)
    for i, r in enumerate(rows):
        step_values[(r["group_id"], r["state_key"])].append(returns[i])
    step_stats = {k: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 1.0, len(v)) for k, v in step_values.items()}
    out = []
    for i, r in enumerate(rows):
        mean, std = stats[r["group_id"]]
        a_e = episode[r["trajectory_id"]] - mean
        s_mean, s_std, size = step_stats[(r["group_id"], r["state_key"])]
        a_s = 0.0 if size == 1 else returns[i] - s_mean
        if mode == "mean_std_norm":
            a_e /= std + epsilon
            a_s /= s_std + epsilon
        out.append(a_e + omega * a_s)
    return np.array(out)


def best_time(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--trajectories", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=10, help="state keys per group")
    parser.add_argument("--check-steps", type=int, default=20_000, help="about this many rows for the reference")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    table = synthetic_steps(args.groups, args.trajectories, args.vocab)
    print(f"steps: {table.num_rows:,} ({args.groups:,} groups x {args.trajectories} trajectories, "
          f"{args.vocab} state keys per group)")
    big: dict[str, float] = {}
    for mode in ("mean_norm", "mean_std_norm"):
        seconds, result = best_time(lambda: compute_gigpo(table, mode=mode), args.repeat)
        big[mode] = seconds
        s = result.summary
        print(f"vectorised, {mode}: {seconds:.3f} s ({table.num_rows / seconds / 1e6:.2f} M steps/s); "
              f"{s['step_groups']:,} step groups, mean size {s['mean_step_group_size']:.2f}, {s['revisits']:,} revisits")

    small_groups = max(1, round(args.check_steps / (args.trajectories * 12.5)))
    small = synthetic_steps(small_groups, args.trajectories, args.vocab, seed=1)
    rows = small.to_pylist()
    for mode in ("mean_norm", "mean_std_norm"):
        fast_s, fast = best_time(lambda: compute_gigpo(small, mode=mode).advantage, args.repeat)
        slow_s, slow = best_time(lambda: reference_gigpo(rows, mode=mode), 1)
        worst = float(np.max(np.abs(fast - slow)))
        assert worst < 1e-6, f"vectorised and reference differ by {worst}"
        print(f"check on {small.num_rows:,} steps, {mode}: reference {slow_s:.3f} s, vectorised {fast_s:.4f} s, "
              f"ratio {slow_s / fast_s:.0f}x, max |difference| {worst:.1e}")
        per_ref = slow_s / small.num_rows
        print(f"  per step: reference {per_ref * 1e6:.2f} us, vectorised at full size "
              f"{big[mode] / table.num_rows * 1e6:.3f} us; the reference would need about "
              f"{per_ref * table.num_rows:.1f} s for the {table.num_rows:,} steps "
              f"({per_ref * table.num_rows / big[mode]:.0f}x)")


if __name__ == "__main__":
    main()
