"""Rollouts per second through ``agent-rl score`` for a cheap pointwise reward.

Records N demo rollouts (the calculator agent, groups of ``--group-size``) into a DuckDB file,
then scores them all with one cheap reward (exact answer against the ground truth) through
:func:`agent_rl_plugin.rewards.runner.score`, once per ``--workers`` value (``--rescore``, so
every run does the full work), and prints the time split: loading the rollouts, running the
reward (in worker processes, or in-process for ``0``) and writing the rows.

    python bench/score_throughput.py                    # 2000 rollouts, workers 2 and 0
    python bench/score_throughput.py -n 500 --workers 4 2 1 0 --db /tmp/bench.duckdb
    python bench/score_throughput.py --rewards tool_success task_completion answer_quality syntax_valid
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import tempfile
import time

from agent_rl_plugin import plugins, tracing
from agent_rl_plugin.demo.calculator import demo_tasks
from agent_rl_plugin.demo.run import run_groups
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.rewards import EvaluateResult, reward
from agent_rl_plugin.rewards.runner import score

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@reward(name="bench_exact", version="1")
def bench_exact(rollout):
    """1.0 when the last number of the final answer equals the ground truth."""
    numbers = _NUMBER.findall(rollout.final_output or "")
    if rollout.ground_truth is None or not numbers:
        return None
    correct = abs(float(numbers[-1]) - float(rollout.ground_truth)) < 1e-6
    return EvaluateResult(score=1.0 if correct else 0.0, reason=f"answered {numbers[-1]}")


class BenchRewards:
    @hookimpl
    def agent_rl_register_rewards(self, register, config):
        register(bench_exact)


def record(path: str, rollouts: int, group_size: int) -> float:
    """Fill ``path`` with about ``rollouts`` demo rollouts; returns the seconds it took."""
    started = time.perf_counter()
    tracing.configure(db_path=path)
    asyncio.run(run_groups(demo_tasks(max(1, rollouts // group_size)), group_size, seed=0))
    tracing.flush()
    tracing.shutdown()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--rollouts", type=int, default=2000)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 0])
    parser.add_argument("--db", default=None, help="database file (default: a temporary one)")
    parser.add_argument("--rewards", nargs="+", default=["bench_exact"],
                        help="rewards to run together (built-in names work too)")
    args = parser.parse_args()

    pm = plugins.new_plugin_manager(load_entry_points=False)
    pm.register(BenchRewards(), name="bench_rewards")
    plugins.set_plugin_manager(pm)
    folder = tempfile.mkdtemp(prefix="agent-rl-bench-")
    path = args.db or os.path.join(folder, "bench.duckdb")
    if not os.path.exists(path):
        seconds = record(path, args.rollouts, args.group_size)
        print(f"recorded {args.rollouts} rollouts into {path} in {seconds:.1f} s")
    results = []
    for workers in args.workers:
        report = score(path, rewards=args.rewards, workers=workers, rescore=True, pm=pm)
        line = {
            "workers": workers,
            "rewards": args.rewards,
            "rollouts": report.rollouts,
            "scored": sum(s.scored for s in report.rewards.values()),
            "not_applicable": sum(s.not_applicable for s in report.rewards.values()),
            "errors": sum(s.errors for s in report.rewards.values()),
            "elapsed_s": round(report.elapsed_s, 3),
            "rollouts_per_s": round(report.rollouts_per_s, 1),
            "timings_s": {k: round(v, 3) for k, v in report.timings.items()},
        }
        results.append(line)
        print(json.dumps(line))


if __name__ == "__main__":
    main()
