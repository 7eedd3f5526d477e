"""Learning: the closed loop (:func:`agent_rl_plugin.loop.train_loop`) with GRPO, GiGPO and RLOO
advantages on the same budget, several seeds, on both bundled environments.

For every (environment, method, seed) one loop runs in its own process (two at a time on two
cores, one torch thread each). Reported per (environment, method):

* held-out success per round (greedy, on starts never trained on): mean and sd over seeds;
* rounds to 0.8 (the first round whose held-out success is >= 0.8; seeds that never get there
  count as not reached) and wall seconds to 0.8 (the loop's own phases summed to that round);
* wall seconds per round by phase (rollouts, advantages, dataset, train, reload, eval).

The moonshot target tracked here: on the harder environment (keydoor) GiGPO reaches 0.8 in
<= 0.75x the rounds GRPO needs, the ordering of the GiGPO paper. Whatever it shows is reported.

    python bench/learning.py                       # full: 2 envs x 3 methods x 3 seeds
    python bench/learning.py --quick               # grid only, 1 seed, 4 rounds
    python -m bench --only learning [--quick]      # as a row of the benchmark table
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import Context, Measure, Row  # noqa: E402

METHODS = ("grpo", "gigpo", "rloo")
PHASES = ("rollouts", "advantages", "dataset", "train", "reload", "eval")
#: Rounds per environment (the same budget for every method).
ROUNDS = {"grid": 8, "keydoor": 8}
#: Training overrides per environment: keydoor's 16-step episodes give ~1000 rows a round, so
#: larger batches keep a round's training near the grid's number of optimizer steps.
TRAIN = {"grid": {}, "keydoor": {"batch_size": 64, "epochs": 2.0}}

CHILD = """
import json, sys, torch
torch.set_num_threads(1)
import transformers; transformers.logging.set_verbosity_error()
from agent_rl_plugin.loop import LoopConfig, train_loop
settings = json.loads(sys.argv[1])
result = train_loop(LoopConfig(**settings), progress=False)
print(json.dumps([{"round": r.round, "status": r.status, "heldout": r.heldout_success,
                   "train": r.train_success, "seconds": r.seconds} for r in result.rounds]))
"""


def run_loop(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """One loop in a fresh interpreter; its rounds as dicts."""
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(settings)], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"loop {settings} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def rounds_to(curve: list[float], level: float = 0.8) -> int | None:
    """The first round whose held-out success is >= ``level`` (None: never)."""
    return next((i for i, value in enumerate(curve) if value >= level), None)


def summarise(runs: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Mean/sd per round, rounds and seconds to 0.8, seconds per phase per round."""
    curves = [[r["heldout"] for r in rounds] for rounds in runs]
    length = min(len(c) for c in curves)
    mean = [statistics.fmean(c[i] for c in curves) for i in range(length)]
    sd = [statistics.pstdev([c[i] for c in curves]) for i in range(length)]
    reached = [rounds_to(c) for c in curves]
    seconds_to = []
    for rounds, k in zip(runs, reached):
        if k is not None:
            seconds_to.append(sum(sum(r["seconds"].values()) for r in rounds[: k + 1]))
    trained = [r for rounds in runs for r in rounds[1:]]
    phases = {p: statistics.fmean(r["seconds"].get(p, 0.0) for r in trained) for p in PHASES} if trained else {}
    return {
        "heldout_mean": [round(v, 3) for v in mean],
        "heldout_sd": [round(v, 3) for v in sd],
        "curves": curves,
        "rounds_to_0.8": reached,
        "mean_rounds_to_0.8": statistics.fmean(k for k in reached if k is not None)
        if any(k is not None for k in reached)
        else None,
        "seeds_reaching_0.8": sum(k is not None for k in reached),
        "mean_seconds_to_0.8": round(statistics.fmean(seconds_to), 1) if seconds_to else None,
        "seconds_per_round": {p: round(v, 2) for p, v in phases.items()},
        "round_seconds": round(sum(phases.values()), 2) if phases else None,
        "improvement": [round(c[-1] - c[0], 3) for c in curves],
    }


def measure(envs: list[str], seeds: list[int], rounds: dict[str, int], workdir: Path, log: Any) -> dict[str, Any]:
    jobs = [(env, method, seed) for env in envs for method in METHODS for seed in seeds]

    def one(job: tuple[str, str, int]) -> tuple[tuple[str, str, int], list[dict[str, Any]], float]:
        env, method, seed = job
        started = time.perf_counter()
        out = workdir / f"{env}-{method}-{seed}"
        settings = {
            "env": env,
            "method": method,
            "seed": seed,
            "rounds": rounds[env],
            "output_dir": str(out),
            "train": TRAIN[env],
        }
        result = run_loop(settings)
        took = time.perf_counter() - started
        log(f"learning: {env} {method} seed {seed}: {[r['heldout'] for r in result]} ({took:.0f} s)")
        return job, result, took

    with ThreadPoolExecutor(max_workers=2) as pool:
        finished = list(pool.map(one, jobs))
    table: dict[str, Any] = {}
    for env in envs:
        for method in METHODS:
            runs = [result for (e, m, _), result, _ in finished if e == env and m == method]
            table[f"{env}/{method}"] = summarise(runs)
    return {"table": table, "loop_seconds": [round(t, 1) for *_, t in finished]}


def run(ctx: Context) -> Row:
    envs = ["grid"] if ctx.quick else ["grid", "keydoor"]
    seeds = [0] if ctx.quick else [0, 1, 2]
    rounds = {"grid": 4, "keydoor": 4} if ctx.quick else ROUNDS
    row = Row(id="learning", sizes={"envs": envs, "seeds": len(seeds), "rounds": rounds})
    ctx.log(f"learning: {len(envs)} envs x {len(METHODS)} methods x {len(seeds)} seeds, two loops at a time")
    started = time.perf_counter()
    found = measure(envs, seeds, rounds, ctx.folder("learning"), ctx.log)
    table = found["table"]
    wall = time.perf_counter() - started
    grid = table["grid/grpo"]
    row.value = Measure(
        "grid, GRPO: final held-out success (mean over seeds)", "share", [c[-1] for c in grid["curves"]]
    )
    row.baselines.append(Measure("grid, GRPO: round 0 held-out success", "share", [c[0] for c in grid["curves"]]))
    row.ratios["grid GRPO: final - round 0"] = statistics.fmean(grid["improvement"])
    if not ctx.quick:
        row.check(
            "GRPO on the grid improves held-out success by >= 0.5 on every seed",
            all(v >= 0.5 for v in grid["improvement"]),
            f"improvements {grid['improvement']}",
        )
        gigpo, grpo = table["keydoor/gigpo"], table["keydoor/grpo"]
        if gigpo["mean_rounds_to_0.8"] is not None and grpo["mean_rounds_to_0.8"]:
            row.target(
                "keydoor: GiGPO rounds to 0.8 / GRPO's",
                gigpo["mean_rounds_to_0.8"] / grpo["mean_rounds_to_0.8"],
                "<=",
                0.75,
            )
        else:
            row.notes.append(
                f"keydoor: rounds to 0.8 not comparable (GiGPO {gigpo['rounds_to_0.8']}, GRPO {grpo['rounds_to_0.8']})"
            )
    row.info.update(table=table, wall_s=round(wall, 1), loop_seconds=found["loop_seconds"])
    return row


def markdown(table: dict[str, Any]) -> str:
    """The table of docs/training.md."""
    lines = [
        "| env / method | held-out success per round (mean ± sd over seeds) | rounds to 0.8 | s to 0.8 | s per round (rollouts / train / other) |",
        "|---|---|---|---|---|",
    ]
    for key, s in table.items():
        curve = " ".join(f"{m:.2f}±{d:.2f}" for m, d in zip(s["heldout_mean"], s["heldout_sd"]))
        phases = s["seconds_per_round"]
        other = sum(v for p, v in phases.items() if p not in ("rollouts", "train"))
        lines.append(
            f"| {key} | {curve} | {s['rounds_to_0.8']} | {s['mean_seconds_to_0.8']} | "
            f"{phases.get('rollouts', 0):.1f} / {phases.get('train', 0):.1f} / {other:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None, help="write the row's info here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        ctx = Context(quick=args.quick, workdir=Path(folder))
        row = run(ctx)
    print(markdown(row.info["table"]))
    print(json.dumps({k: v for k, v in row.info.items() if k != "table"}))
    if args.json:
        Path(args.json).write_text(json.dumps(row.to_dict(), indent=2, default=str))


if __name__ == "__main__":
    main()
