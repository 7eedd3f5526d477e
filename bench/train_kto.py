"""Wall time of ``agent-rl train kto`` against a plain TRL script, same model, data and settings.

Set-up (not timed): a tiny Qwen2 (:func:`agent_rl_plugin.train.build_tiny_model`), a store of
synthetic scored rollouts (:func:`agent_rl_plugin.data.synthetic.synthesize_store`, one LLM call
each, labels from the combined reward at 0.5), and the same KTO rows written to JSONL for the
plain script.

Timed, each in a fresh Python process (so both pay for their imports), interleaved:

* ours: ``agent-rl train kto --config cfg.yaml --model M --db S --out O --max-steps K
  --batch-size B --lora-r R --json`` (builds the dataset from the store, applies the hardware
  profile, trains, saves the adapter, records the run in the store);
* the baseline: ``bench/plain_trl_kto.py`` (JSONL -> ``datasets`` -> ``KTOTrainer`` + LoRA ->
  save the adapter) with the settings ours used (learning rate, batch, steps, LoRA r/alpha/
  dropout/targets, beta, desirable/undesirable weights, max length, seed, CPU, fp32).

Both must train the same: the same number of steps and the same first and last loss. Both run
with ``OMP_NUM_THREADS=1`` and compiled bytecode for every module (see :func:`_env`).

    python bench/train_kto.py [--quick]
    python -m bench --only train [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import Context, Measure, Row, interleave, ratio  # noqa: E402

HERE = Path(__file__).resolve().parent
LOSS_TOLERANCE = 1e-4


def setup(folder: Path, rollouts: int) -> dict[str, Any]:
    """The tiny model, the store, the JSONL rows and the label counts."""
    import compileall

    import agent_rl_plugin
    from agent_rl_plugin.data import build_kto_dataset
    from agent_rl_plugin.data.synthetic import synthesize_store
    from agent_rl_plugin.train import build_tiny_model
    from agent_rl_plugin.train.config import balanced_weights

    compileall.compile_dir(os.path.dirname(agent_rl_plugin.__file__), quiet=1)  # see _env
    model = folder / "tiny"
    build_tiny_model(model)
    store = folder / "runs.duckdb"
    synthesize_store(store, rollouts=rollouts, llm_calls=1, group_size=4)
    dataset = build_kto_dataset(store)
    data = folder / "kto.jsonl"
    with open(data, "w", encoding="utf-8") as handle:
        for row in dataset.select_columns(["prompt", "completion", "label"]).to_list():
            handle.write(json.dumps(row) + "\n")
    n_desirable = sum(bool(x) for x in dataset["label"])
    weights = balanced_weights(n_desirable, len(dataset) - n_desirable)
    config = folder / "train.yaml"
    config.write_text("use_cpu: true\nbf16: false\nlogging_steps: 1\nsave_strategy: 'no'\nreport_to: []\n",
                      encoding="utf-8")
    return {"model": model, "store": store, "data": data, "config": config, "rows": len(dataset),
            "n_desirable": n_desirable, "weights": weights}


def _env(threads: int | None = 1) -> dict[str, str]:
    """The environment of both sides. torch gets one thread: on a shared 2-core machine its two
    OpenMP threads spin against other processes, and the same 16-step run took anywhere from 2 to
    41 s (1.5 to 1.7 s with one thread); the tiny model gains nothing from a second one."""
    env = dict(os.environ)
    # Both sides read compiled bytecode, as from an installed package: with PYTHONDONTWRITEBYTECODE
    # set (as on the bench machine) only the repository's own package, installed editable, had no
    # .pyc files and was compiled from source in every run (site-packages have theirs).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if threads is not None:
        env.setdefault("OMP_NUM_THREADS", str(threads))
        env.setdefault("MKL_NUM_THREADS", str(threads))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    return env


def _run(command: list[str], cwd: Path, threads: int | None = 1) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=str(cwd), env=_env(threads), capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... exited {proc.returncode}: {proc.stderr[-1500:]}")
    return seconds, last_json(proc.stdout)


def last_json(text: str) -> dict[str, Any]:
    """The JSON object a command printed last: its last line, or its output from the last line
    that is just ``{`` (pretty-printed); trainer log lines before it are skipped."""
    lines = text.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (ValueError, IndexError):
        pass
    start = max(i for i, line in enumerate(lines) if line.strip() == "{")
    return json.loads("\n".join(lines[start:]))


def agent_rl_command() -> list[str]:
    """``agent-rl`` next to this Python (the console script), else ``python -m agent_rl_plugin``."""
    script = Path(sys.executable).with_name("agent-rl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agent_rl_plugin"]


def run(ctx: Context) -> Row:
    rollouts = ctx.size(256, 64)
    steps = ctx.size(16, 3)
    batch, lora_r, lr = 8, 8, 5e-4
    repeats = ctx.size(3, 1)
    row = Row(id="train", sizes={"rows": rollouts, "max_steps": steps, "batch_size": batch, "lora_r": lora_r,
                                 "model": "tiny Qwen2 (hidden 64, 2 layers)"})
    folder = ctx.folder("train")
    ctx.log(f"train: tiny model, {rollouts} KTO rows, {steps} steps of batch {batch}; "
            f"{repeats} interleaved run(s) of each, each in a fresh process")
    s = setup(folder, rollouts)
    desirable_w, undesirable_w = s["weights"]
    counter = iter(range(1000))
    results: dict[str, list[dict[str, Any]]] = {"ours": [], "plain": []}

    def ours() -> float:
        out = folder / f"ours-{next(counter)}"
        seconds, summary = _run(agent_rl_command() + [
            "train", "kto", "--config", str(s["config"]), "--model", str(s["model"]), "--db", str(s["store"]),
            "--out", str(out), "--max-steps", str(steps), "--batch-size", str(batch), "--lora-r", str(lora_r),
            "--lr", str(lr), "--json",
        ], folder)
        results["ours"].append(summary)
        shutil.rmtree(out, ignore_errors=True)
        return seconds

    def plain() -> float:
        out = folder / f"plain-{next(counter)}"
        seconds, summary = _run([
            sys.executable, str(HERE / "plain_trl_kto.py"), "--model", str(s["model"]), "--data", str(s["data"]),
            "--out", str(out), "--max-steps", str(steps), "--batch-size", str(batch), "--lora-r", str(lora_r),
            "--lr", str(lr), "--desirable-weight", str(desirable_w), "--undesirable-weight", str(undesirable_w),
        ], folder)
        results["plain"].append(summary)
        shutil.rmtree(out, ignore_errors=True)
        return seconds

    samples = interleave({"ours": ours, "plain": plain}, repeats)
    row.value = Measure("agent-rl train kto (process)", "s", samples["ours"])
    row.baselines.append(Measure("plain TRL script (process)", "s", samples["plain"]))
    ours_runtime = [r["metrics"].get("train_runtime") for r in results["ours"]]
    plain_runtime = [r.get("train_runtime") for r in results["plain"]]
    row.baselines.append(Measure("  trainer.train() alone: ours", "s", ours_runtime))
    row.baselines.append(Measure("  trainer.train() alone: plain", "s", plain_runtime))
    wall = ratio(row.value.median, row.baselines[0].median)
    row.ratios["ours / plain (wall)"] = wall
    row.ratios["ours / plain (trainer.train)"] = ratio(row.baselines[1].median, row.baselines[2].median)
    row.target("wall time ours / plain TRL", wall, "<=", 1.05)
    a, b = results["ours"][-1], results["plain"][-1]
    same = (a["steps"] == b["steps"] == steps and a["rows"] == b["rows"]
            and abs(a["first_loss"] - b["first_loss"]) < LOSS_TOLERANCE
            and abs(a["final_loss"] - b["final_loss"]) < LOSS_TOLERANCE)
    row.check("same training: steps, rows, first and last loss (1e-4)", same,
              f"ours: {a['steps']} steps, {a['rows']} rows, loss {a['first_loss']:.6f} -> {a['final_loss']:.6f}; "
              f"plain: {b['steps']} steps, {b['rows']} rows, loss {b['first_loss']:.6f} -> {b['final_loss']:.6f}")
    row.info.update(
        ours_overhead_s=row.value.median - row.baselines[0].median,
        weights={"desirable": desirable_w, "undesirable": undesirable_w},
        hardware=a.get("hardware"),
        losses={"ours": [a["first_loss"], a["final_loss"]], "plain": [b["first_loss"], b["final_loss"]]},
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-bench-train-"))
    try:
        row = run(Context(quick=args.quick, workdir=folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(row.to_dict(), indent=2))


if __name__ == "__main__":
    main()
