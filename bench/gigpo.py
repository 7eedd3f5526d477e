"""GiGPO advantages on a million steps: the vectorised code against a per-row Python reference.

Builds a synthetic steps table (``--groups`` groups x ``--trajectories`` trajectories, lengths
uniform in [5, 20] so about 12.5 steps each, state keys drawn from a vocabulary of ``--vocab``
keys per group, rewards in {0, 0.5, 1} at random, rows shuffled), then times, interleaved,
on the **same table**:

* ours: :func:`agent_rl_plugin.rl.compute_gigpo` (Arrow in, numpy inside);
* the baseline: a straightforward per-row Python implementation (loops and dicts, like
  verl-agent's ``gigpo/core_gigpo.py``), including turning the table into Python rows
  (``to_pylist``), since both start from the same table; the loop alone is reported too.

and checks the two agree to 1e-6 on every row (``mean_norm`` on the full table,
``mean_std_norm`` on a smaller one).

    python bench/gigpo.py                                  # 10k groups x 8 trajectories (~1M steps)
    python bench/gigpo.py --groups 500                     # ~50k steps
    python -m bench --only gigpo [--quick]                 # as a row of the benchmark table
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agent_rl_plugin.rl import compute_gigpo  # noqa: E402
from bench.harness import Context, Measure, Row, interleave, median, ratio  # noqa: E402

TOLERANCE = 1e-6


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


def _mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and unbiased standard deviation, in plain Python (two passes)."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 1.0
    return mean, std


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
    stats = {g: (0.0, 1.0) if len(members[g]) == 1 else _mean_std(v) for g, v in scores.items()}
    step_values = defaultdict(list)
    for i, r in enumerate(rows):
        step_values[(r["group_id"], r["state_key"])].append(returns[i])
    step_stats = {k: (*_mean_std(v), len(v)) for k, v in step_values.items()}
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


def reference_from_table(table: pa.Table, **kwargs) -> tuple[np.ndarray, float]:
    """The baseline from the same input as ours: rows out of the table, then the loops.
    Returns (advantages, seconds of the loops alone)."""
    rows = table.to_pylist()
    started = time.perf_counter()
    result = reference_gigpo(rows, **kwargs)
    return result, time.perf_counter() - started


def run(ctx: Context) -> Row:
    groups = ctx.size(10_000, 400)
    trajectories, vocab = 8, 10
    repeats_ours, repeats_ref = ctx.size((5, 2), (5, 2))
    row = Row(id="gigpo", sizes={"groups": groups, "trajectories": trajectories, "state_keys_per_group": vocab})
    table = synthetic_steps(groups, trajectories, vocab)
    n = table.num_rows
    row.sizes["steps"] = n
    ctx.log(f"gigpo: {n:,} steps; ours x{repeats_ours}, per-row Python x{repeats_ref}, interleaved")

    outputs: dict[str, object] = {}
    loop_seconds: list[float] = []

    def ours() -> float:
        started = time.perf_counter()
        outputs["ours"] = compute_gigpo(table)
        return time.perf_counter() - started

    def reference() -> float:
        started = time.perf_counter()
        outputs["reference"], loop = reference_from_table(table)
        seconds = time.perf_counter() - started
        loop_seconds.append(loop)
        return seconds

    compute_gigpo(table.slice(0, 1000))  # warm up imports and caches
    samples = interleave({"ours": ours, "reference": reference}, repeats=repeats_ref)
    samples["ours"] += interleave({"ours": ours}, repeats=max(0, repeats_ours - repeats_ref))["ours"]

    row.value = Measure("compute_gigpo", "s", samples["ours"])
    row.baselines.append(Measure("per-row Python (to_pylist + loops)", "s", samples["reference"]))
    row.baselines.append(Measure("  of which the loops alone", "s", loop_seconds))
    speedup = ratio(row.baselines[0].median, row.value.median)
    row.ratios["per-row Python / ours"] = speedup
    row.ratios["loops alone / ours"] = ratio(median(loop_seconds), row.value.median)
    row.target("speed-up over per-row Python", speedup, ">=", 20)

    result = outputs["ours"]
    worst = float(np.max(np.abs(result.advantage - outputs["reference"])))  # type: ignore[attr-defined]
    row.check(f"mean_norm: equal on all {n:,} steps (1e-6)", worst < TOLERANCE, f"max |difference| {worst:.2e}")
    small = synthetic_steps(max(1, groups // 20), trajectories, vocab, seed=1)
    fast = compute_gigpo(small, mode="mean_std_norm").advantage
    slow, _ = reference_from_table(small, mode="mean_std_norm")
    worst_std = float(np.max(np.abs(fast - slow)))
    row.check(f"mean_std_norm: equal on {small.num_rows:,} steps (1e-6)", worst_std < TOLERANCE,
              f"max |difference| {worst_std:.2e}")
    summary = result.summary  # type: ignore[attr-defined]
    row.info.update(
        steps_per_s_ours=n / row.value.median,
        steps_per_s_reference=n / row.baselines[0].median,
        us_per_step_ours=row.value.median / n * 1e6,
        us_per_step_reference=row.baselines[0].median / n * 1e6,
        max_abs_difference=max(worst, worst_std),
        step_groups=summary.get("step_groups"),
        mean_step_group_size=summary.get("mean_step_group_size"),
        revisits=summary.get("revisits"),
    )
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--trajectories", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=10, help="state keys per group")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    table = synthetic_steps(args.groups, args.trajectories, args.vocab)
    print(f"steps: {table.num_rows:,} ({args.groups:,} groups x {args.trajectories} trajectories, "
          f"{args.vocab} state keys per group)")
    for mode in ("mean_norm", "mean_std_norm"):
        fast_s, slow_s, worst = [], [], 0.0
        for _ in range(args.repeat):
            started = time.perf_counter()
            fast = compute_gigpo(table, mode=mode).advantage
            fast_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        slow, loop = reference_from_table(table, mode=mode)
        slow_s.append(time.perf_counter() - started)
        worst = float(np.max(np.abs(fast - slow)))
        assert worst < TOLERANCE, f"vectorised and reference differ by {worst}"
        print(f"{mode}: ours {min(fast_s):.3f} s (best of {args.repeat}), per-row Python {slow_s[0]:.2f} s "
              f"(loops alone {loop:.2f} s): {slow_s[0] / min(fast_s):.0f}x; max |difference| {worst:.1e}")


if __name__ == "__main__":
    main()
