"""GPU rows: LoRA KTO and GRPO tokens per second on a randomly initialised model of Qwen2-0.5B's
shape (the config is built here: nothing is downloaded), against a plain TRL script in the
same run. Skipped ("no GPU") where ``torch.cuda.is_available()`` is false.

* ``gpu_kto``: ``agent-rl train kto`` vs ``bench/plain_trl_kto.py --gpu``;
* ``gpu_grpo``: agent-rl's ``build_prompt_dataset`` + ``train_grpo`` vs a plain
  ``GRPOTrainer`` script (``bench/gpu_runner.py``), same reward function (share of "e").

Tokens/s = the trainer's logged ``num_tokens`` (prompt + completion tokens seen) divided by
``train_runtime`` (``trainer.train()`` alone; model loading is not counted). Each side runs in a
fresh process, interleaved. ``BENCH_GPU_ROWS_ON_CPU=1`` runs both rows on the CPU with the
tiny model (to test this code without a GPU; the numbers mean nothing).

    python -m bench --only gpu_kto,gpu_grpo [--quick]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import Context, Measure, Row, gpu_info, interleave, ratio  # noqa: E402
from bench.train_kto import _run, agent_rl_command  # noqa: E402

HERE = Path(__file__).resolve().parent
ON_CPU = os.environ.get("BENCH_GPU_ROWS_ON_CPU", "").strip() not in ("", "0")

#: Qwen2-0.5B's architecture (config.json of Qwen/Qwen2-0.5B), with random weights.
QWEN2_05B = dict(
    vocab_size=151_936, hidden_size=896, intermediate_size=4_864, num_hidden_layers=24, num_attention_heads=14,
    num_key_value_heads=2, max_position_embeddings=32_768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
    tie_word_embeddings=True, hidden_act="silu", initializer_range=0.02,
)


def build_model(path: Path, bf16: bool) -> dict[str, Any]:
    """Save a random Qwen2-0.5B-shaped model and the tiny BPE tokenizer (ids < 400) to ``path``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from agent_rl_plugin.train.tiny import build_tokenizer

    if ON_CPU:
        from agent_rl_plugin.train import build_tiny_model

        build_tiny_model(path)
        return {"shape": "tiny (BENCH_GPU_ROWS_ON_CPU)", "parameters": None}
    tokenizer = build_tokenizer(path)
    config = Qwen2Config(**QWEN2_05B, bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    if bf16:
        model = model.to(torch.bfloat16)
    model.save_pretrained(str(path))
    return {"shape": "Qwen2-0.5B", "parameters": sum(p.numel() for p in model.parameters())}


def _device() -> tuple[dict[str, Any] | None, bool]:
    info = gpu_info()
    return info, bool(info and info.get("bf16"))


def _skip(row_id: str) -> Row | None:
    if ON_CPU:
        return None
    info, _ = _device()
    if info is None:
        return Row(id=row_id, skipped="no GPU")
    return None


def _tokens_per_s(results: list[dict[str, Any]]) -> list[float]:
    out = []
    for r in results:
        tokens, runtime = r.get("num_tokens"), r.get("train_runtime")
        out.append(tokens / runtime if tokens and runtime else float("nan"))
    return out


def _store(folder: Path, rollouts: int, llm_calls: int) -> Path:
    from agent_rl_plugin.data.synthetic import synthesize_store

    store = folder / "runs.duckdb"
    if not store.exists():
        synthesize_store(store, rollouts=rollouts, llm_calls=llm_calls, group_size=4)
    return store


def run_gpu_kto(ctx: Context) -> Row:
    skipped = _skip("gpu_kto")
    if skipped is not None:
        return skipped
    info, bf16 = _device()
    rollouts, steps, batch, lora_r = ctx.size((512, 20, 16, 16), (64, 3, 8, 8))
    if ON_CPU:
        rollouts, steps, batch, lora_r = 64, 2, 4, 4
    repeats = ctx.size(2, 1)
    row = Row(id="gpu_kto", sizes={"rows": rollouts, "max_steps": steps, "batch_size": batch, "lora_r": lora_r,
                                   "bf16": bf16})
    folder = ctx.folder("gpu_kto")
    model = folder / "model"
    row.info["model"] = build_model(model, bf16)
    row.info["device"] = info or "cpu (BENCH_GPU_ROWS_ON_CPU)"
    store = _store(folder, rollouts, llm_calls=2)
    from agent_rl_plugin.data import build_kto_dataset
    from agent_rl_plugin.train.config import balanced_weights

    dataset = build_kto_dataset(store)
    data = folder / "kto.jsonl"
    with open(data, "w", encoding="utf-8") as handle:
        for r in dataset.select_columns(["prompt", "completion", "label"]).to_list():
            handle.write(json.dumps(r) + "\n")
    n_desirable = sum(bool(x) for x in dataset["label"])
    desirable_w, undesirable_w = balanced_weights(n_desirable, len(dataset) - n_desirable)
    config = folder / "train.yaml"
    config.write_text(f"use_cpu: {'true' if ON_CPU else 'false'}\nbf16: {'true' if bf16 else 'false'}\n"
                      "logging_steps: 1\nsave_strategy: 'no'\nreport_to: []\n", encoding="utf-8")
    results: dict[str, list[dict[str, Any]]] = {"ours": [], "plain": []}
    counter = iter(range(1000))

    def ours() -> float:
        out = folder / f"ours-{next(counter)}"
        seconds, summary = _run(agent_rl_command() + [
            "train", "kto", "--config", str(config), "--model", str(model), "--db", str(store), "--out", str(out),
            "--max-steps", str(steps), "--batch-size", str(batch), "--lora-r", str(lora_r), "--lr", "1e-5", "--json",
        ], folder, threads=None)
        results["ours"].append({"train_runtime": summary["metrics"].get("train_runtime"),
                                "num_tokens": summary["metrics"].get("num_tokens"), "seconds": seconds})
        shutil.rmtree(out, ignore_errors=True)
        return _tokens_per_s(results["ours"][-1:])[0]

    def plain() -> float:
        out = folder / f"plain-{next(counter)}"
        command = [sys.executable, str(HERE / "plain_trl_kto.py"), "--model", str(model), "--data", str(data),
                   "--out", str(out), "--max-steps", str(steps), "--batch-size", str(batch), "--lora-r", str(lora_r),
                   "--lr", "1e-5", "--desirable-weight", str(desirable_w), "--undesirable-weight", str(undesirable_w)]
        if not ON_CPU:
            command.append("--gpu")
        if bf16:
            command.append("--bf16")
        seconds, summary = _run(command, folder, threads=None)
        summary["seconds"] = seconds
        results["plain"].append(summary)
        shutil.rmtree(out, ignore_errors=True)
        return _tokens_per_s(results["plain"][-1:])[0]

    ctx.log(f"gpu_kto: {steps} steps of batch {batch}, {repeats} interleaved run(s) of each")
    samples = interleave({"ours": ours, "plain": plain}, repeats)
    return _finish(row, samples, results, "KTO")


def run_gpu_grpo(ctx: Context) -> Row:
    skipped = _skip("gpu_grpo")
    if skipped is not None:
        return skipped
    info, bf16 = _device()
    rollouts, steps, batch, lora_r, generations, length = ctx.size((400, 8, 16, 16, 8, 128), (64, 2, 8, 8, 4, 32))
    if ON_CPU:
        rollouts, steps, batch, lora_r, generations, length = 64, 2, 4, 4, 4, 8
    repeats = ctx.size(2, 1)
    row = Row(id="gpu_grpo", sizes={"rollouts": rollouts, "max_steps": steps, "batch_size": batch, "lora_r": lora_r,
                                    "num_generations": generations, "max_completion_length": length, "bf16": bf16})
    folder = ctx.folder("gpu_grpo")
    model = folder / "model"
    row.info["model"] = build_model(model, bf16)
    row.info["device"] = info or "cpu (BENCH_GPU_ROWS_ON_CPU)"
    store = _store(folder, rollouts, llm_calls=1)
    from agent_rl_plugin.train import build_prompt_dataset

    prompts = folder / "prompts.jsonl"
    with open(prompts, "w", encoding="utf-8") as handle:
        for r in build_prompt_dataset(store).to_list():
            handle.write(json.dumps(r) + "\n")
    common = ["--model", str(model), "--steps", str(steps), "--batch-size", str(batch), "--lora-r", str(lora_r),
              "--num-generations", str(generations), "--max-completion-length", str(length)]
    common += ([] if ON_CPU else ["--gpu"]) + (["--bf16"] if bf16 else [])
    results: dict[str, list[dict[str, Any]]] = {"ours": [], "plain": []}
    counter = iter(range(1000))

    def side(name: str, extra: list[str]) -> float:
        out = folder / f"{name}-{next(counter)}"
        seconds, summary = _run([sys.executable, str(HERE / "gpu_runner.py"), f"grpo-{name}", "--out", str(out)]
                                + extra + common, folder, threads=None)
        summary["seconds"] = seconds
        results[name].append(summary)
        shutil.rmtree(out, ignore_errors=True)
        return _tokens_per_s(results[name][-1:])[0]

    ctx.log(f"gpu_grpo: {steps} steps, {generations} generations of {length} tokens, {repeats} interleaved run(s)")
    samples = interleave({"ours": lambda: side("ours", ["--db", str(store)]),
                          "plain": lambda: side("plain", ["--prompts", str(prompts)])}, repeats)
    return _finish(row, samples, results, "GRPO")


def _finish(row: Row, samples: dict[str, list[float]], results: dict[str, list[dict[str, Any]]], what: str) -> Row:
    row.value = Measure(f"agent-rl {what} (LoRA)", "tokens/s", samples["ours"])
    row.baselines.append(Measure(f"plain TRL {what} script", "tokens/s", samples["plain"]))
    row.baselines.append(Measure("  process wall time: ours", "s", [r["seconds"] for r in results["ours"]]))
    row.baselines.append(Measure("  process wall time: plain", "s", [r["seconds"] for r in results["plain"]]))
    row.ratios["ours / plain (tokens/s)"] = ratio(row.value.median, row.baselines[0].median)
    row.target("tokens/s ours / plain", row.ratios["ours / plain (tokens/s)"], ">=", 0.95)
    same = [r.get("num_tokens") for r in results["ours"]] + [r.get("num_tokens") for r in results["plain"]]
    if what == "KTO":  # same data, same steps: the same tokens (GRPO samples, so lengths vary)
        row.check("both trained on the same tokens", len(set(same)) == 1 and same[0] is not None, f"num_tokens {same}")
    else:
        row.check("both logged tokens", all(t for t in same), f"num_tokens {same}")
    return row


__all__ = ["QWEN2_05B", "build_model", "run_gpu_grpo", "run_gpu_kto"]
